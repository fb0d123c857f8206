#include "gaps_source.hpp"

#include "boundary.hpp"
#include "spi.hpp"

namespace pg_inbox {
namespace {

KeptPlan source_plan = {R"SQL(
SELECT s.kind, s.pattern, s.start_at, s.grace, s.scanned_to, s.high_number,
       s.event_watermark, s.listed_watermark, p.name IS NOT NULL
FROM (SELECT $1::text AS name) q
LEFT JOIN inbox.providers p ON p.name = q.name
LEFT JOIN inbox.gap_sources s ON s.provider = q.name
)SQL",
                        1,
                        {TEXTOID},
                        nullptr};

}  // namespace

std::string provider_arg(FunctionCallInfo fcinfo) {
  if (PG_ARGISNULL(0))
    throw InboxError(ERRCODE_NULL_VALUE_NOT_ALLOWED, "provider must not be null");
  std::string provider =
      pg_call([&] { return (const char *)text_to_cstring(PG_GETARG_TEXT_PP(0)); });
  if (provider.empty())
    throw InboxError(ERRCODE_INVALID_PARAMETER_VALUE, "provider must not be empty");
  return provider;
}

Source fetch_source(const std::string &provider) {
  Source source = spi_call([&] {
    Datum name = CStringGetTextDatum(provider.c_str());
    execute_kept(source_plan, &name, nullptr, false, 0);
    if (!result_bool(0, 9)) raise_unknown_provider(name);
    Source s{};
    const char *kind = result_text(0, 1);
    if (kind == nullptr) return s;
    s.kind = strcmp(kind, "sequence") == 0 ? SourceKind::kSequence : SourceKind::kListed;
    const char *pattern = result_text(0, 2);
    if (pattern) strlcpy(s.pattern, pattern, sizeof(s.pattern));
    bool isnull;
    s.start_at = result_int64(0, 3, &isnull);
    s.has_start_at = !isnull;
    s.grace = result_value(0, 4, &isnull);
    s.scanned_to = result_int64(0, 5, &isnull);
    s.has_scanned_to = !isnull;
    s.high_number = result_int64(0, 6, &isnull);
    s.has_high = !isnull;
    s.event_watermark = result_int64(0, 7);
    s.listed_watermark = result_int64(0, 8);
    return s;
  });
  if (source.kind == SourceKind::kNone)
    throw InboxError(ERRCODE_UNDEFINED_OBJECT, "provider \"" + provider + "\" has no id source",
                     "Configure one: SELECT inbox.set_id_source('" + provider +
                         "', 'sequence', 'evt_{n}'); or 'listed'.");
  return source;
}

gaps::Pattern source_pattern(const Source &source, const std::string &provider) {
  gaps::Pattern pattern;
  const char *why = nullptr;
  if (!gaps::parse_pattern(source.pattern, strlen(source.pattern), &pattern, &why))
    throw InboxError(ERRCODE_INVALID_PARAMETER_VALUE,
                     "malformed id pattern of provider \"" + provider + "\"", why);
  return pattern;
}

}  // namespace pg_inbox

using namespace pg_inbox;

// inbox._id_pattern_error(pattern): why a sequence pattern is malformed, or
// NULL when it is fine. set_id_source asks it, so the grammar the scans parse
// (gaps::parse_pattern) is the only one.
INBOX_SQL_FUNCTION(inbox_id_pattern_error) {
  if (PG_ARGISNULL(0)) return pg_call([] { return CStringGetTextDatum("the pattern is null"); });
  struct Bytes {
    const char *data;
    size_t len;
  };
  Bytes bytes = pg_call([&] {
    text *arg = PG_GETARG_TEXT_PP(0);
    return Bytes{VARDATA_ANY(arg), VARSIZE_ANY_EXHDR(arg)};
  });
  gaps::Pattern pattern;
  const char *why = nullptr;
  if (gaps::parse_pattern(bytes.data, bytes.len, &pattern, &why)) {
    fcinfo->isnull = true;
    return (Datum)0;
  }
  return pg_call([&] { return CStringGetTextDatum(why); });
}
