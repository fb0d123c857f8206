// Limits of the stored data that C++ checks before any statement runs.
// Pure C++, no Postgres headers.
#pragma once

#include <cstddef>

namespace pg_inbox {

// Longest external_id, in bytes. The definition is the SQL function
// inbox._external_id_limit(), which the tables' CHECKs use; this copy lets
// ingest refuse an id with its own message before the statement runs, and
// test/pgtap/10_ingest.sql fails if the two ever differ.
constexpr std::size_t kMaxExternalIdBytes = 255;

}  // namespace pg_inbox
