// libFuzzer target: the request head as it comes off the socket, through
// scan_head (limits, framing, raw values) and, when that accepts it, Beast's
// request parser exactly as the listener feeds it.
#include <boost/beast/http.hpp>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "intake/request_head.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::vector<char> buf(data, data + size);
  inbox::HeadLimits limits{4096, 32};
  inbox::HeadScan scan = inbox::scan_head(buf.data(), buf.size(), limits);
  if (scan.status == inbox::HeadStatus::ok) {
    if (scan.head_bytes > size || scan.head_bytes > limits.max_bytes) __builtin_trap();
    if (scan.headers.size() > limits.max_count) __builtin_trap();
    for (const auto& [name, value] : scan.headers)
      if (name.empty() || name.find_first_of(" \t:\r\n") != std::string::npos ||
          value.find_first_of("\r\n") != std::string::npos || std::memchr(value.data(), 0, value.size()))
        __builtin_trap();
    namespace http = boost::beast::http;
    http::request_parser<http::string_body> parser;
    parser.header_limit(8192);
    parser.body_limit(1 << 20);
    parser.eager(false);
    boost::beast::error_code ec;
    parser.put(boost::asio::buffer(buf.data(), scan.head_bytes), ec);
  } else if (scan.status != inbox::HeadStatus::need_more && !scan.headers.empty()) {
    __builtin_trap();  // a refused head hands nothing on
  }
  return 0;
}
