// Which expected ids of a sequence window exist, as events or tombstones.
//
// The window's expected ids are never materialised as rows: the
// (provider, external_id) index is read in key order over the window's range
// only, and each key sets one bit of a bitmap of the window
// (gaps_sequence.hpp). Cost: the window's bitmap plus the index entries in its
// range, independent of the table size. The SQL anti-join instead probes the
// index once per expected id.
#pragma once

#include <cstdint>

#include "gaps_sequence.hpp"
#include "postgres.hpp"

namespace pg_inbox {

// Sets bit (n - from) of `present` for every id n of [from, to] that is an
// event or a tombstone of provider. Call inside spi_call.
void mark_window(Datum provider, const gaps::Pattern &pattern, int64 from, int64 to,
                 uint64_t *present);

// The text of expected id `number`, palloc'd.
Datum id_text(const gaps::Pattern &pattern, int64 number);

}  // namespace pg_inbox
