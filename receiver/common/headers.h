// Request headers as received: names compared without case, values raw
// (never percent-decoded), in arrival order per name.
#pragma once

#include <algorithm>
#include <cctype>
#include <map>
#include <string>

namespace inbox {

// ASCII folding only: header names are tokens, and std::tolower's locale
// call per character was a measurable share of a request (bench/receiver).
struct CaseInsensitiveLess {
  static unsigned char fold(char c) {
    unsigned char u = static_cast<unsigned char>(c);
    return u >= 'A' && u <= 'Z' ? static_cast<unsigned char>(u | 0x20) : u;
  }
  bool operator()(const std::string& a, const std::string& b) const {
    std::size_t n = std::min(a.size(), b.size());
    for (std::size_t i = 0; i < n; ++i) {
      unsigned char x = fold(a[i]), y = fold(b[i]);
      if (x != y) return x < y;
    }
    return a.size() < b.size();
  }
};

using Headers = std::multimap<std::string, std::string, CaseInsensitiveLess>;

}  // namespace inbox
