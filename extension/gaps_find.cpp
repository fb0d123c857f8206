// inbox.find_gaps: the expected ids of a window that are neither events nor
// tombstones, for a sequence source (numbers) or a listed one (timestamps).
#include <string>
#include <vector>

#include "boundary.hpp"
#include "gaps_marks.hpp"
#include "gaps_source.hpp"
#include "spi.hpp"

namespace pg_inbox {
namespace {

constexpr int64 kMaxListedWindowDays = 31;

KeptPlan listed_gaps_plan = {R"SQL(
SELECT l.external_id FROM inbox.listed_ids l
WHERE l.provider = $1 AND l.listed_at >= $2 AND l.listed_at < $3
  AND NOT EXISTS (SELECT 1 FROM inbox.events e
                  WHERE e.provider = l.provider AND e.external_id = l.external_id)
  AND NOT EXISTS (SELECT 1 FROM inbox.tombstones t
                  WHERE t.provider = l.provider AND t.external_id = l.external_id)
ORDER BY l.external_id
)SQL",
                             3,
                             {TEXTOID, TIMESTAMPTZOID, TIMESTAMPTZOID},
                             nullptr};

void check_window(int64 from, int64 to) {
  if (from < 0) throw InboxError(ERRCODE_INVALID_PARAMETER_VALUE, "from must not be negative");
  if (to > gaps::kMaxNumber)
    throw InboxError(ERRCODE_INVALID_PARAMETER_VALUE, "to must be at most 999999999999999999");
  if (from > to)
    throw InboxError(
        ERRCODE_INVALID_PARAMETER_VALUE,
        "from (" + std::to_string(from) + ") is after to (" + std::to_string(to) + ")");
  if (to - from + 1 > gaps::kMaxWindow)
    throw InboxError(ERRCODE_PROGRAM_LIMIT_EXCEEDED,
                     "window of " + std::to_string(to - from + 1) + " ids is over the maximum of " +
                         std::to_string(gaps::kMaxWindow),
                     "Split it into windows of at most 1000000 ids.");
}

}  // namespace
}  // namespace pg_inbox

using namespace pg_inbox;

INBOX_SQL_FUNCTION(inbox_find_gaps_sequence) {
  std::string provider = provider_arg(fcinfo);
  if (PG_ARGISNULL(1) || PG_ARGISNULL(2))
    throw InboxError(ERRCODE_NULL_VALUE_NOT_ALLOWED, "from and to must not be null");
  int64 from = PG_GETARG_INT64(1);
  int64 to = PG_GETARG_INT64(2);
  check_window(from, to);
  Source source = fetch_source(provider);
  if (source.kind != SourceKind::kSequence)
    throw InboxError(ERRCODE_WRONG_OBJECT_TYPE,
                     "provider \"" + provider + "\" has a listed id source: pass timestamps",
                     "inbox.find_gaps(provider, from timestamptz, to timestamptz)");
  gaps::Pattern pattern = source_pattern(source, provider);

  std::vector<uint64_t> present(static_cast<size_t>((to - from) / 64 + 1), 0);
  uint64_t *bits = present.data();
  pg_call([&] { InitMaterializedSRF(fcinfo, MAT_SRF_USE_EXPECTED_DESC); });
  spi_call([&] { mark_window(CStringGetTextDatum(provider.c_str()), pattern, from, to, bits); });
  pg_call([&] {
    auto *rsinfo = reinterpret_cast<ReturnSetInfo *>(fcinfo->resultinfo);
    bool isnull = false;
    for (int64 number = from; number <= to; ++number) {
      if (gaps::is_present(bits, number - from)) continue;
      Datum id = id_text(pattern, number);
      tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, &id, &isnull);
      pfree(DatumGetPointer(id));
    }
  });
  return (Datum)0;
}

INBOX_SQL_FUNCTION(inbox_find_gaps_listed) {
  std::string provider = provider_arg(fcinfo);
  if (PG_ARGISNULL(1) || PG_ARGISNULL(2))
    throw InboxError(ERRCODE_NULL_VALUE_NOT_ALLOWED, "from and to must not be null");
  TimestampTz from = PG_GETARG_TIMESTAMPTZ(1);
  TimestampTz to = PG_GETARG_TIMESTAMPTZ(2);
  if (TIMESTAMP_NOT_FINITE(from) || TIMESTAMP_NOT_FINITE(to))
    throw InboxError(ERRCODE_INVALID_PARAMETER_VALUE, "from and to must be finite");
  if (from > to) throw InboxError(ERRCODE_INVALID_PARAMETER_VALUE, "from is after to");
  if (to - from > kMaxListedWindowDays * USECS_PER_DAY)
    throw InboxError(
        ERRCODE_PROGRAM_LIMIT_EXCEEDED,
        "window is over the maximum of " + std::to_string(kMaxListedWindowDays) + " days");
  Source source = fetch_source(provider);
  if (source.kind != SourceKind::kListed)
    throw InboxError(ERRCODE_WRONG_OBJECT_TYPE,
                     "provider \"" + provider + "\" has a sequence id source: pass numbers",
                     "inbox.find_gaps(provider, from bigint, to bigint)");

  pg_call([&] { InitMaterializedSRF(fcinfo, MAT_SRF_USE_EXPECTED_DESC); });
  spi_call([&] {
    auto *rsinfo = reinterpret_cast<ReturnSetInfo *>(fcinfo->resultinfo);
    Datum args[3] = {CStringGetTextDatum(provider.c_str()), TimestampTzGetDatum(from),
                     TimestampTzGetDatum(to)};
    execute_kept(listed_gaps_plan, args, nullptr, false, 0);
    for (uint64 i = 0; i < SPI_processed; ++i) {
      bool isnull;
      Datum id = SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1, &isnull);
      tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, &id, &isnull);
    }
  });
  return (Datum)0;
}
