// The first look at a request head, on the raw bytes, before any HTTP
// library parses it: size and count limits (431), strict framing (400),
// Transfer-Encoding (411), and the header values exactly as sent.
// Pure: no I/O, so the fuzz target and the tests call it directly.
#pragma once

#include <cstddef>
#include <string>

#include "common/headers.h"

namespace inbox {

struct HeadLimits {
  std::size_t max_bytes = 16384;  // request line + headers + blank line
  std::size_t max_count = 100;    // header lines
};

enum class HeadStatus {
  need_more,        // no blank line yet, and no limit passed
  ok,               // head complete and acceptable for the parser
  too_large,        // 431: over max_bytes or max_count
  bad,              // 400: obs-fold, whitespace before a colon, bad name or value, bare LF,
                    //      conflicting Content-Length
  transfer_encoding // 411: any Transfer-Encoding (bodies need a Content-Length)
};

struct HeadScan {
  HeadStatus status = HeadStatus::need_more;
  std::size_t head_bytes = 0;  // through the blank line (when ok)
  Headers headers;             // raw values, surrounding spaces trimmed
  std::size_t nul_bytes = 0;   // NULs in values: stored as the text \u0000,
                               // replaced by a space in `data` for the parser
  std::string reason;          // why, for the log (never sent)
};

// Scans data[0, size). Writes only NUL -> ' ' inside header values.
HeadScan scan_head(char* data, std::size_t size, const HeadLimits& limits);

int head_status_code(HeadStatus s);  // 431, 400, 411; 0 for need_more/ok

}  // namespace inbox
