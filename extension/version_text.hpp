// Versions of events (issue 12, docs/ordering.md): the text of a provider's
// version field turned into a decimal number that orders like the version.
// Pure C++, no Postgres headers.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace pg_inbox {

// Longest version text considered; longer strings are no version.
constexpr std::size_t kMaxVersionTextBytes = 64;

// A plain decimal ("1700000000", "-3", "12.50"): itself. An RFC 3339
// timestamp ("2026-12-01T14:00:03.877041743-04:00", "T" or a space, "Z" or
// an offset): its Unix epoch in seconds, every fractional digit kept
// (nanoseconds exact). Anything else: nothing. The result is the text of a
// Postgres numeric.
std::optional<std::string> version_from_text(std::string_view text);

}  // namespace pg_inbox
