#include "intake/request_head.h"

#include <cstring>

namespace inbox {
namespace {

// RFC 9110 token characters: what a field name may hold.
bool tchar(unsigned char c) {
  if (c >= '0' && c <= '9') return true;
  if ((c | 0x20) >= 'a' && (c | 0x20) <= 'z') return true;
  return c && std::strchr("!#$%&'*+-.^_`|~", c) != nullptr;
}

bool iequals(const std::string& a, const char* b) {
  std::size_t n = std::strlen(b);
  if (a.size() != n) return false;
  for (std::size_t i = 0; i < n; ++i)
    if (std::tolower(static_cast<unsigned char>(a[i])) != b[i]) return false;
  return true;
}

HeadScan fail(HeadScan s, HeadStatus status, std::string why) {
  s.status = status;
  s.reason = std::move(why);
  s.headers.clear();
  return s;
}

}  // namespace

int head_status_code(HeadStatus s) {
  switch (s) {
    case HeadStatus::too_large: return 431;
    case HeadStatus::bad: return 400;
    case HeadStatus::transfer_encoding: return 411;
    default: return 0;
  }
}

HeadScan scan_head(char* data, std::size_t size, const HeadLimits& limits) {
  HeadScan s;
  // Pass 1: find the end of the head within the limits, counting lines, so
  // that a head that is too big is refused before it has all arrived.
  std::size_t limit = std::min(size, limits.max_bytes);
  std::size_t lines = 0, end = 0;
  for (std::size_t i = 0; i < limit; ++i) {
    if (data[i] != '\n') continue;
    if (i == 0 || data[i - 1] != '\r') return fail(std::move(s), HeadStatus::bad, "bare LF in the head");
    // An empty line (CRLF right after the previous line's CRLF) ends the head.
    if (i >= 3 && data[i - 2] == '\n' && lines > 0) {
      end = i + 1;
      break;
    }
    if (i == 1) return fail(std::move(s), HeadStatus::bad, "empty request line");
    if (++lines > limits.max_count + 1) return fail(std::move(s), HeadStatus::too_large, "too many header lines");
  }
  if (end == 0) {
    if (size >= limits.max_bytes) return fail(std::move(s), HeadStatus::too_large, "head larger than the limit");
    return s;  // need_more
  }

  // Pass 2: each header line, strictly.
  const char* first_content_length = nullptr;
  std::string content_length;
  bool transfer_encoding = false;
  std::size_t pos = static_cast<std::size_t>(static_cast<const char*>(std::memchr(data, '\n', end)) - data) + 1;
  while (pos < end - 2) {
    std::size_t eol = static_cast<std::size_t>(static_cast<const char*>(std::memchr(data + pos, '\n', end - pos)) - data) - 1;  // at '\r'
    char* line = data + pos;
    std::size_t len = eol - pos;
    pos = eol + 2;
    if (len == 0) break;
    if (line[0] == ' ' || line[0] == '\t') return fail(std::move(s), HeadStatus::bad, "obs-fold (a continued header line)");
    std::size_t colon = 0;
    while (colon < len && tchar(static_cast<unsigned char>(line[colon]))) ++colon;
    if (colon == 0 || colon == len || line[colon] != ':')
      return fail(std::move(s), HeadStatus::bad,
                  colon < len && (line[colon] == ' ' || line[colon] == '\t') ? "whitespace before a colon"
                                                                             : "bad header name");
    std::string name(line, colon);
    std::size_t vb = colon + 1, ve = len;
    while (vb < ve && (line[vb] == ' ' || line[vb] == '\t')) ++vb;
    while (ve > vb && (line[ve - 1] == ' ' || line[ve - 1] == '\t')) --ve;
    std::string value;
    value.reserve(ve - vb);
    for (std::size_t i = vb; i < ve; ++i) {
      unsigned char c = static_cast<unsigned char>(line[i]);
      if (c == 0) {
        // RFC 9110 5.5 allows replacing NUL with a space; we also keep a
        // visible mark in the stored value instead of refusing the event.
        line[i] = ' ';
        ++s.nul_bytes;
        value += "\\u0000";
      } else if ((c < 0x20 && c != '\t') || c == 0x7f) {
        return fail(std::move(s), HeadStatus::bad, "control character in a header value");
      } else {
        value.push_back(static_cast<char>(c));
      }
    }
    if (iequals(name, "transfer-encoding")) transfer_encoding = true;
    if (iequals(name, "content-length")) {
      if (first_content_length && value != content_length)
        return fail(std::move(s), HeadStatus::bad, "conflicting Content-Length headers");
      first_content_length = line;
      content_length = value;
    }
    s.headers.emplace(std::move(name), std::move(value));
  }
  if (transfer_encoding) return fail(std::move(s), HeadStatus::transfer_encoding, "Transfer-Encoding");
  s.status = HeadStatus::ok;
  s.head_bytes = end;
  return s;
}

}  // namespace inbox
