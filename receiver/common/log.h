// One JSON object per line on stdout. Never pass secrets, payloads or
// header values here: the fields below are all that is logged.
#pragma once

#include <cstdio>
#include <string>
#include <utility>
#include <vector>

namespace inbox {

struct LogField {
  std::string key;
  std::string value;
  bool quoted = true;  // false for numbers
};

inline LogField num(std::string key, long long v) { return {std::move(key), std::to_string(v), false}; }
inline LogField num(std::string key, double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", v);
  return {std::move(key), buf, false};
}

// level: "info", "warn", "error".
void log_line(const char* level, const std::string& msg, const std::vector<LogField>& fields = {});

// Requests are logged unless turned off (the benchmark turns them off).
void set_request_logging(bool on);
bool request_logging();

}  // namespace inbox
