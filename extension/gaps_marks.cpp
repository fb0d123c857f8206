#include "gaps_marks.hpp"

#include "spi.hpp"

extern "C" {
#include "nodes/params.h"
#include "tcop/dest.h"
}

namespace pg_inbox {
namespace {

using gaps::Block;
using gaps::Pattern;
using gaps::Step;

constexpr int64 kUnionBudget = 3;     // keys per id a one-read of several lengths may read
constexpr int64 kUnionSlack = 128;    // ...plus these
constexpr int kSeekAfter = 64;        // longer ids read through before jumping
constexpr int kProbeAfterJumps = 16;  // jumps in a block before probing may take over
constexpr int64 kIdsPerJump = 32;     // ...when there is a jump per fewer ids than this

// Key-ordered reads of one index range, streamed to a KeyReader, which stops
// the read itself when it has seen enough.
KeptPlan events_range = {R"SQL(
SELECT external_id FROM inbox.events
WHERE provider = $1 AND external_id >= $2 AND external_id <= $3
ORDER BY external_id
)SQL",
                         3,
                         {TEXTOID, TEXTOID, TEXTOID},
                         nullptr,
                         0};
KeptPlan tombstones_range = {R"SQL(
SELECT external_id FROM inbox.tombstones
WHERE provider = $1 AND external_id >= $2 AND external_id <= $3
ORDER BY external_id
)SQL",
                             3,
                             {TEXTOID, TEXTOID, TEXTOID},
                             nullptr,
                             0};

// Per-id probes of the rest of a block, for a stretch where longer ids
// interleave so densely that range reads would keep jumping: a jump costs a
// statement, a probe inside one statement an index descent.
KeptPlan events_probe = {R"SQL(
SELECT n FROM generate_series($2::bigint, $3::bigint) n
WHERE EXISTS (SELECT 1 FROM inbox.events e WHERE e.provider = $1
              AND e.external_id = $4 || CASE WHEN $5 > 0 THEN lpad(n::text, $5, '0') ELSE n::text END)
)SQL",
                         5,
                         {TEXTOID, INT8OID, INT8OID, TEXTOID, INT4OID},
                         nullptr};
KeptPlan tombstones_probe = {R"SQL(
SELECT n FROM generate_series($2::bigint, $3::bigint) n
WHERE EXISTS (SELECT 1 FROM inbox.tombstones t WHERE t.provider = $1
              AND t.external_id = $4 || CASE WHEN $5 > 0 THEN lpad(n::text, $5, '0') ELSE n::text END)
)SQL",
                             5,
                             {TEXTOID, INT8OID, INT8OID, TEXTOID, INT4OID},
                             nullptr};

// Sets the bits of the numbers lo..hi of `block` present in the probed table.
void probe_block(KeptPlan &probe, Datum provider, const Pattern &pattern, const Block &block,
                 int64 lo, int64 window_from, uint64_t *present) {
  int pad = block.length == pattern.width ? pattern.width : 0;
  Datum args[5] = {provider, Int64GetDatum(lo), Int64GetDatum(block.hi),
                   CStringGetTextDatum(pattern.prefix), Int32GetDatum(pad)};
  execute_kept(probe, args, nullptr, false, 0);
  for (uint64 i = 0; i < SPI_processed; ++i) {
    int64 bit = result_int64(i, 1) - window_from;
    present[bit >> 6] |= uint64_t{1} << (bit & 63);
  }
  SPI_freetuptable(SPI_tuptable);
}

// Receives the keys of a range read one by one, straight from the executor:
// no row is materialised for SPI. Returning false stops the read early.
struct KeyReader {
  DestReceiver receiver;  // first: Postgres sees a DestReceiver *
  const Pattern *pattern;
  int64 from;
  int64 to;
  uint64_t *present;
  const Block *block;  // null: a one-read of several lengths (visit_any)
  int64 budget;        // one-read: keys left before giving up
  int longer_run;      // block: consecutive longer ids
  // What stopped the read, if anything.
  bool over_budget;
  bool done;
  bool jump;
  int64 jump_to;
};

bool read_key(TupleTableSlot *slot, DestReceiver *self) {
  auto *reader = reinterpret_cast<KeyReader *>(self);
  bool isnull;
  Datum key = slot_getattr(slot, 1, &isnull);
  if (isnull) return true;
  varlena *text = pg_detoast_datum_packed(reinterpret_cast<varlena *>(DatumGetPointer(key)));
  const char *bytes = VARDATA_ANY(text);
  size_t len = VARSIZE_ANY_EXHDR(text);
  if (reader->block == nullptr) {
    gaps::visit_any(*reader->pattern, reader->from, reader->to, bytes, len, reader->present);
    if (--reader->budget > 0) return true;
    reader->over_budget = true;
    return false;
  }
  int64 seek_to = 0;
  Step step = gaps::visit_key(*reader->pattern, *reader->block, reader->from, bytes, len,
                              reader->present, &seek_to);
  if (step == Step::kDone) {
    reader->done = true;
    return false;
  }
  if (step == Step::kNext) {
    reader->longer_run = 0;
    return true;
  }
  // A short run of longer ids is cheaper to read through than to jump over.
  if (++reader->longer_run < kSeekAfter) return true;
  reader->jump = true;
  reader->jump_to = seek_to;
  return false;
}

void reader_startup(DestReceiver *, int, TupleDesc) {}
void reader_shutdown(DestReceiver *) {}
void reader_destroy(DestReceiver *) {}

// Reads provider's keys in [lower, upper], in index order, into reader.
void read_range(KeptPlan &plan, Datum provider, const char *lower, const char *upper,
                KeyReader *reader) {
  ParamListInfo params = makeParamList(3);
  Datum values[3] = {provider, CStringGetTextDatum(lower), CStringGetTextDatum(upper)};
  for (int i = 0; i < 3; ++i) {
    params->params[i].value = values[i];
    params->params[i].isnull = false;
    params->params[i].pflags = PARAM_FLAG_CONST;
    params->params[i].ptype = plan.argtypes[i];
  }
  reader->receiver.receiveSlot = read_key;
  reader->receiver.rStartup = reader_startup;
  reader->receiver.rShutdown = reader_shutdown;
  reader->receiver.rDestroy = reader_destroy;
  reader->receiver.mydest = DestNone;
  reader->over_budget = reader->done = reader->jump = false;
  reader->longer_run = 0;
  SPIExecuteOptions options{};
  options.params = params;
  options.dest = &reader->receiver;
  int rc = SPI_execute_plan_extended(kept_plan(plan), &options);
  if (rc < 0) elog(ERROR, "pg_inbox: statement failed: %s", SPI_result_code_string(rc));
}

// Sets the bit of every id of [from, to] present in one table (events or
// tombstones). Call inside spi_call.
void mark_present(KeptPlan &range, KeptPlan &probe, Datum provider, const Pattern &pattern,
                  int64 from, int64 to, uint64_t *present) {
  Block blocks[gaps::kMaxBlocks];
  int nblocks = gaps::split_blocks(pattern, from, to, blocks);
  char lower[gaps::kMaxPrefixBytes + 64];
  char upper[gaps::kMaxPrefixBytes + 64];
  KeyReader reader{};
  reader.pattern = &pattern;
  reader.from = from;
  reader.to = to;
  reader.present = present;

  // Several lengths: first one read of the key range from the smallest first
  // id to the largest last one, each key classified by its own length. It
  // gives up after kUnionBudget keys per id (longer ids dominate the range);
  // what it marked stays marked, and the per-length reads below follow.
  if (nblocks > 1) {
    char candidate[gaps::kMaxPrefixBytes + 64];
    gaps::format_id(pattern, blocks[0].lo, blocks[0].length, lower);
    gaps::format_id(pattern, blocks[0].hi, blocks[0].length, upper);
    for (int b = 1; b < nblocks; ++b) {
      gaps::format_id(pattern, blocks[b].lo, blocks[b].length, candidate);
      if (strcmp(candidate, lower) < 0) strlcpy(lower, candidate, sizeof(lower));
      gaps::format_id(pattern, blocks[b].hi, blocks[b].length, candidate);
      if (strcmp(candidate, upper) > 0) strlcpy(upper, candidate, sizeof(upper));
    }
    reader.block = nullptr;
    reader.budget = kUnionBudget * (to - from + 1) + kUnionSlack;
    read_range(range, provider, lower, upper, &reader);
    if (!reader.over_budget) return;
  }

  // One range per digit length: ids of one length sort as their numbers.
  for (int b = 0; b < nblocks; ++b) {
    const Block &block = blocks[b];
    reader.block = &block;
    gaps::format_id(pattern, block.lo, block.length, lower);
    gaps::format_id(pattern, block.hi, block.length, upper);
    int jumps = 0;
    for (;;) {
      read_range(range, provider, lower, upper, &reader);
      if (!reader.jump) break;  // the range is done
      // Everything below jump_to is settled. Jumping often: probe the rest.
      if (++jumps > kProbeAfterJumps && jumps * kIdsPerJump > reader.jump_to - block.lo) {
        probe_block(probe, provider, pattern, block, reader.jump_to, from, present);
        break;
      }
      gaps::format_id(pattern, reader.jump_to, block.length, lower);
    }
  }
}

}  // namespace

void mark_window(Datum provider, const Pattern &pattern, int64 from, int64 to, uint64_t *present) {
  mark_present(events_range, events_probe, provider, pattern, from, to, present);
  mark_present(tombstones_range, tombstones_probe, provider, pattern, from, to, present);
}

Datum id_text(const Pattern &pattern, int64 number) {
  char id[gaps::kMaxPrefixBytes + 64];
  int length =
      gaps::digit_count(number) > pattern.width ? gaps::digit_count(number) : pattern.width;
  size_t len = gaps::format_id(pattern, number, length, id);
  return PointerGetDatum(cstring_to_text_with_len(id, static_cast<int>(len)));
}

}  // namespace pg_inbox
