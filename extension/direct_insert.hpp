// One row into a plain table without an INSERT statement: the heap tuple
// and its index entries, as the catalogs and logical replication's apply
// worker insert theirs. For the hottest appends (the delivery log's row of
// every ingest call), where an INSERT's executor start-up cost more than the
// insert itself.
#pragma once

#include "postgres.hpp"

namespace pg_inbox {

// A column's value, by the column's name.
struct ColumnValue {
  const char *column;
  Datum value;
  bool isnull;
};

// Inserts one row into table_id (RowExclusiveLock): heap_insert, then one
// entry in each index (unique ones checked, partial ones by their
// predicate), then CommandCounterIncrement so the transaction's next reads
// see it. What the INSERT statement would do and this does not: CHECK
// constraints and defaults are not evaluated (the caller builds rows that
// satisfy them). Inserts nothing and returns false when the table needs the
// executor: INSERT triggers, row-level security, a column that `columns`
// does not name (a later release added one), or a name it does not have.
// Call inside pg_call.
bool insert_without_executor(Oid table_id, const ColumnValue *columns, int count);

}  // namespace pg_inbox
