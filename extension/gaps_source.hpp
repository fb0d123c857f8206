// A provider's expected-id source (inbox.gap_sources) as find_gaps and
// scan_gaps read it, and the checks of their provider argument.
#pragma once

#include <string>

#include "gaps_sequence.hpp"
#include "postgres.hpp"

namespace pg_inbox {

enum class SourceKind { kNone, kSequence, kListed };

// A provider's source as stored; fixed-size so it can cross pg_call.
struct Source {
  SourceKind kind;
  char pattern[256];
  bool has_start_at;
  int64 start_at;
  Datum grace;  // Interval *, in the caller's context
  bool has_scanned_to;
  int64 scanned_to;
  bool has_high;
  int64 high_number;
  int64 event_watermark;
  int64 listed_watermark;
};

// Argument 0, the provider: not null, not empty.
std::string provider_arg(FunctionCallInfo fcinfo);

// The provider's source; raises for an unknown provider or one without a source.
Source fetch_source(const std::string &provider);

// The parsed pattern of a sequence source.
gaps::Pattern source_pattern(const Source &source, const std::string &provider);

}  // namespace pg_inbox
