// One alert as the sender handles it: a row of inbox.alerts, or one of the
// sidecar's own (database unreachable, 5xx answers), and what makes two
// alerts "the same".
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace inbox {

struct Alert {
  std::int64_t id = 0;    // inbox.alerts.id; 0 for the sidecar's own
  std::string key;        // alert_key(check, provider, state)
  std::string check;
  std::string provider;   // "*": not about one provider
  std::string state;      // firing, resolved
  std::string severity;   // P0..P3
  bool data_loss = false;
  std::string since;      // RFC 3339: when the episode started firing
  std::string at;         // RFC 3339: when this alert was raised
  std::optional<double> value, range_lo, range_hi;
  std::string summary;    // one line a person can read
};

// The same definition as the SQL function inbox.alert_key (a test compares them).
std::string alert_key(const std::string& check, const std::string& provider, const std::string& state);

// Now as RFC 3339 UTC with milliseconds: "2026-01-05T12:00:00.123Z".
std::string rfc3339_now();

}  // namespace inbox
