#include "common/log.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <ctime>

#include "common/json_util.h"

namespace inbox {

static std::atomic<bool> g_request_logging{true};

void set_request_logging(bool on) { g_request_logging = on; }
bool request_logging() { return g_request_logging; }

static std::string timestamp() {
  auto now = std::chrono::system_clock::now();
  std::time_t secs = std::chrono::system_clock::to_time_t(now);
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[96];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<int>(ms));
  return buf;
}

void log_line(const char* level, const std::string& msg, const std::vector<LogField>& fields) {
  std::string line = "{\"ts\":\"" + timestamp() + "\",\"level\":\"" + level + "\",\"msg\":" +
                     json_quote(is_valid_utf8(msg) ? msg : "(invalid utf-8)");
  for (const LogField& f : fields) {
    line += ',' + json_quote(f.key) + ':';
    line += f.quoted ? json_quote(is_valid_utf8(f.value) ? f.value : "(invalid utf-8)") : f.value;
  }
  line += "}\n";
  // One write(2) per line: lines from concurrent threads never interleave.
  const char* p = line.data();
  size_t left = line.size();
  while (left > 0) {
    ssize_t n = ::write(STDOUT_FILENO, p, left);
    if (n <= 0) break;
    p += n;
    left -= static_cast<size_t>(n);
  }
}

}  // namespace inbox
