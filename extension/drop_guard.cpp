// DROP EXTENSION pg_inbox (or DROP SCHEMA inbox) removes the pg_cron jobs
// inbox.schedule() installed, so no job is left calling functions that are
// gone. It runs at ddl_command_start, the last moment inbox.unschedule()
// still exists (an sql_drop trigger of the extension is dropped with it and
// never fires), and a drop that fails rolls the removal back with it.
#include <cstring>

#include "boundary.hpp"
#include "spi.hpp"

using namespace pg_inbox;

namespace {

// Whether a DROP statement names the extension or its schema.
bool drops_pg_inbox(Node *parsetree) {
  if (parsetree == nullptr || !IsA(parsetree, DropStmt)) return false;
  auto *drop = reinterpret_cast<DropStmt *>(parsetree);
  const char *target = drop->removeType == OBJECT_EXTENSION ? "pg_inbox"
                       : drop->removeType == OBJECT_SCHEMA  ? "inbox"
                                                            : nullptr;
  if (target == nullptr) return false;
  ListCell *cell;
  foreach (cell, drop->objects) {
    Node *name = static_cast<Node *>(lfirst(cell));
    if (IsA(name, String) && std::strcmp(strVal(name), target) == 0) return true;
  }
  return false;
}

}  // namespace

INBOX_SQL_FUNCTION(inbox_unschedule_on_drop) {
  if (!CALLED_AS_EVENT_TRIGGER(fcinfo))
    throw InboxError(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED,
                     "inbox._unschedule_on_drop() runs only as an event trigger");
  auto *event = reinterpret_cast<EventTriggerData *>(fcinfo->context);
  if (drops_pg_inbox(event->parsetree)) {
    spi_call([] {
      SPI_execute("SELECT inbox.unschedule() WHERE inbox._cron_missing() IS NULL", false, 0);
    });
  }
  PG_RETURN_VOID();
}
