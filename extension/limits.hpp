// Limits of the stored data that C++ checks before any statement runs.
// Pure C++, no Postgres headers.
#pragma once

#include <cstddef>

namespace pg_inbox {

// Longest external_id, in bytes: the one definition. SQL reads it through
// inbox._external_id_limit() (the tables' CHECKs, tombstone, add_listed);
// inbox.events' CHECK (inbox._event_row_valid, row_checks.cpp) reads it here.
constexpr std::size_t kMaxExternalIdBytes = 255;

}  // namespace pg_inbox
