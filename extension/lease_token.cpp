// inbox._lease_token in C. A lease token is
//   md5(concat_ws(':', event_id, attempt, extract(epoch FROM first_received_at)))::uuid
// as 0.1.0 defined it in SQL. Every claimed event and every published
// outbox message computes one. In SQL that was a numeric epoch, its text, a
// concatenation, PostgreSQL's md5 (digests.hpp), a hex digest and its parse
// back into a uuid; this takes a quarter of that time (bench/README.md). It
// builds the same text and hashes it, so a token issued before an upgrade
// still completes after it: test/pgtap/24_lease_token.sql holds the two equal.
#include <algorithm>
#include <array>
#include <charconv>
#include <cstring>
#include <new>
#include <string_view>

#include "boundary.hpp"
#include "digests.hpp"

namespace {

using pg_inbox::InboxError;
using pg_inbox::pg_call;

// The text being hashed, in a fixed buffer: formatting and allocation were
// most of this function's time with snprintf and std::string.
class TokenText {
 public:
  // concat_ws(':', ...) skips NULLs: a part is preceded by ':' unless first.
  template <typename Int>
  void add_integer(Int value) {
    separate();
    end_ = std::to_chars(end_, limit(), value).ptr;
  }
  void add_text(std::string_view text) {
    separate();
    end_ = std::copy(text.begin(), text.end(), end_);
  }
  // extract(epoch FROM ts)::text: seconds since 1970 as a numeric of scale
  // 6 ("-0.500000", "1764650000.123000"), or ±Infinity. Past the year
  // 294246 the microseconds since 1970 overflow int64 and PostgreSQL
  // divides in numeric, which rounds differently: there its own extract
  // answers.
  void add_epoch(TimestampTz ts) {
    constexpr int64 kUnixEpochUsecs = (POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * USECS_PER_DAY;
    if (TIMESTAMP_IS_NOBEGIN(ts)) return add_text("-Infinity");
    if (TIMESTAMP_IS_NOEND(ts)) return add_text("Infinity");
    if (ts >= PG_INT64_MAX - kUnixEpochUsecs)
      return add_text(pg_call([&] {
        Datum epoch = DirectFunctionCall2(extract_timestamptz, CStringGetTextDatum("epoch"),
                                          TimestampTzGetDatum(ts));
        return static_cast<const char *>(DatumGetCString(DirectFunctionCall1(numeric_out, epoch)));
      }));
    int64 usecs = ts + kUnixEpochUsecs;
    // |usecs|: the earliest timestamptz is far from PG_INT64_MIN.
    int64 magnitude = usecs < 0 ? -usecs : usecs;
    separate();
    if (usecs < 0) *end_++ = '-';
    end_ = std::to_chars(end_, limit(), magnitude / USECS_PER_SEC).ptr;
    *end_++ = '.';
    int64 fraction = magnitude % USECS_PER_SEC;
    for (int digit = 5; digit >= 0; --digit, fraction /= 10)
      end_[digit] = char('0' + fraction % 10);
    end_ += 6;
  }
  std::string_view view() const {
    return std::string_view(buffer_.data(), static_cast<std::size_t>(end_ - buffer_.data()));
  }

 private:
  void separate() {
    if (end_ != buffer_.data()) *end_++ = ':';
  }
  char *limit() { return buffer_.data() + buffer_.size(); }
  // 20 + 1 + 11 + 1 + 28 at most (numeric_out past 294246 is shorter).
  std::array<char, 96> buffer_{};
  char *end_ = buffer_.data();
};

}  // namespace

using namespace pg_inbox;

// inbox._lease_token(event_id, attempt, first_received_at). Not strict, like
// the SQL it replaces: concat_ws skips a NULL argument.
INBOX_SQL_FUNCTION(inbox_lease_token) {
  TokenText text;
  if (!PG_ARGISNULL(0)) text.add_integer(PG_GETARG_INT64(0));
  if (!PG_ARGISNULL(1)) text.add_integer(PG_GETARG_INT32(1));
  if (!PG_ARGISNULL(2)) text.add_epoch(PG_GETARG_TIMESTAMPTZ(2));

  std::array<unsigned char, UUID_LEN> digest{};
  DigestContext context(EVP_MD_CTX_new());
  if (context == nullptr) throw std::bad_alloc();
  if (!digest_parts(context.get(), md5_algorithm(), {text.view()}, digest.data(), digest.size()))
    throw InboxError(ERRCODE_FEATURE_NOT_SUPPORTED, "could not compute a lease token",
                     "Lease tokens are MD5 digests, and this OpenSSL does not provide MD5.");
  return pg_call([&] {
    auto *token = static_cast<pg_uuid_t *>(palloc(sizeof(pg_uuid_t)));
    std::memcpy(token->data, digest.data(), UUID_LEN);
    return UUIDPGetDatum(token);
  });
}
