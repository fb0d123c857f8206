// Request headers as received: names compared without case, values raw
// (never percent-decoded), in arrival order per name.
#pragma once

#include <algorithm>
#include <cctype>
#include <map>
#include <string>

namespace inbox {

struct CaseInsensitiveLess {
  bool operator()(const std::string& a, const std::string& b) const {
    return std::lexicographical_compare(a.begin(), a.end(), b.begin(), b.end(), [](char x, char y) {
      return std::tolower(static_cast<unsigned char>(x)) < std::tolower(static_cast<unsigned char>(y));
    });
  }
};

using Headers = std::multimap<std::string, std::string, CaseInsensitiveLess>;

}  // namespace inbox
