// `inbox-receiver sign`: prints a correctly signed test delivery.
#pragma once

#include <cstdint>
#include <string>

#include "common/config.h"

namespace inbox {

struct SignOptions {
  std::string provider;  // a [[provider]] name from the config
  std::string body;      // empty: a small JSON event carrying `id`
  std::string id;        // empty: a random evt_... id
  std::string url = "http://127.0.0.1:8080";
  std::string format = "curl";  // curl | headers | tsv (one delivery per line, for load tests)
  long count = 1;               // > 1: ids are <id>-1 .. <id>-N
  std::int64_t now = 0;         // 0: the current time
};

// The text to print; throws ConfigError for an unknown provider.
std::string sign_delivery(const Config& config, const SignOptions& options);

// {"a":{"b":"<id>"}} for pointer /a/b: a body whose pointer finds the id.
std::string body_with_id_at(const std::string& pointer, const std::string& id);

}  // namespace inbox
