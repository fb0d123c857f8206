#include "boundary.hpp"

#include <cstring>

namespace pg_inbox {

void copy_message(char (&to)[512], const char *from) noexcept {
  std::strncpy(to, from ? from : "", sizeof(to) - 1);
  to[sizeof(to) - 1] = '\0';
}

void raise_pending(const PendingError &pending) {
  if (pending.edata) ReThrowError(pending.edata);
  ereport(ERROR, (errcode(pending.sqlstate), errmsg("%s", pending.message),
                  pending.detail[0] ? errdetail("%s", pending.detail) : 0));
  pg_unreachable();
}

}  // namespace pg_inbox
