// One row into a plain table without an INSERT statement (direct_insert.hpp).
#include "direct_insert.hpp"

#include <cstring>

extern "C" {
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "executor/executor.h"
#include "utils/rel.h"
}

namespace pg_inbox {
namespace {

// What the executor would do for this table that a heap insert skips.
bool needs_executor(Relation table) {
  TriggerDesc *triggers = table->trigdesc;
  if (triggers != nullptr &&
      (triggers->trig_insert_before_row || triggers->trig_insert_after_row ||
       triggers->trig_insert_instead_row || triggers->trig_insert_before_statement ||
       triggers->trig_insert_after_statement || triggers->trig_insert_new_table))
    return true;
  TupleConstr *constr = RelationGetDescr(table)->constr;
  return table->rd_rel->relrowsecurity || table->rd_rel->relkind != RELKIND_RELATION ||
         (constr != nullptr && constr->has_generated_stored);
}

// The attribute number of column `name`, or InvalidAttrNumber (none, or
// dropped), from the descriptor at hand: get_attnum would search the
// catalog cache once per column per call.
AttrNumber attribute_number(TupleDesc desc, const char *name) {
  for (int i = 0; i < desc->natts; ++i) {
    Form_pg_attribute attribute = TupleDescAttr(desc, i);
    if (!attribute->attisdropped && std::strcmp(NameStr(attribute->attname), name) == 0)
      return attribute->attnum;
  }
  return InvalidAttrNumber;
}

}  // namespace

bool insert_without_executor(Oid table_id, const ColumnValue *columns, int count) {
  Relation table = table_open(table_id, RowExclusiveLock);
  TupleDesc desc = RelationGetDescr(table);
  if (needs_executor(table)) {
    table_close(table, RowExclusiveLock);
    return false;
  }
  Datum *values = static_cast<Datum *>(palloc0(sizeof(Datum) * desc->natts));
  bool *nulls = static_cast<bool *>(palloc(sizeof(bool) * desc->natts));
  bool *named = static_cast<bool *>(palloc0(sizeof(bool) * desc->natts));
  for (int i = 0; i < desc->natts; ++i) nulls[i] = true;
  bool complete = true;
  for (int i = 0; i < count; ++i) {
    AttrNumber attno = attribute_number(desc, columns[i].column);
    complete = attno > 0 && !named[attno - 1];
    if (!complete) break;  // a name the table lacks, or one named twice
    named[attno - 1] = true;
    values[attno - 1] = columns[i].value;
    nulls[attno - 1] = columns[i].isnull;
  }
  for (int i = 0; i < desc->natts && complete; ++i)
    complete = named[i] || TupleDescAttr(desc, i)->attisdropped;
  if (!complete) {
    table_close(table, RowExclusiveLock);
    return false;
  }

  EState *estate = CreateExecutorState();
  ResultRelInfo *result = makeNode(ResultRelInfo);
  InitResultRelInfo(result, table, 1, nullptr, 0);
  ExecOpenIndices(result, false);
  TupleTableSlot *slot = ExecInitExtraTupleSlot(estate, desc, &TTSOpsHeapTuple);
  ExecStoreHeapTuple(heap_form_tuple(desc, values, nulls), slot, false);
  simple_table_tuple_insert(table, slot);
  ExecInsertIndexTuples(result, slot, estate, false, false, nullptr, NIL);
  ExecCloseIndices(result);
  ExecResetTupleTable(estate->es_tupleTable, false);
  FreeExecutorState(estate);
  table_close(table, NoLock);  // the lock is kept to the transaction's end, as INSERT keeps it
  CommandCounterIncrement();
  return true;
}

}  // namespace pg_inbox
