// A provider scheme: how one webhook sender signs its deliveries and where
// it puts the event's id. One subclass per scheme, one file each.
#pragma once

#include "common/headers.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/config.h"
#include "intake/signature.h"

namespace inbox {

// What the HTTP layer hands a provider: nothing here is parsed yet.
struct Delivery {
  const Headers& headers;
  std::string_view body;
  std::int64_t now;  // unix seconds; injected so tests can pin the clock

  // First value of a header (case-insensitive), "" when absent.
  std::string header(const std::string& name) const;
};

// The result of one step: ok, or the HTTP status and a message for the sender.
struct Check {
  int status = 0;
  std::string message;
  bool ok() const { return status == 0; }
  static Check pass() { return {}; }
  static Check fail(int status, std::string message) { return {status, std::move(message)}; }
};

struct Extracted {
  std::string external_id;
  std::string payload_json;
  // Set instead of an id when the delivery is a handshake to answer, not an
  // event to store (Slack's url_verification).
  std::optional<std::string> handshake_reply;
};

// A delivery signed the way the provider would sign it (for `sign` and tests).
struct SignedRequest {
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
};

class Provider {
 public:
  explicit Provider(ProviderConfig config) : config_(std::move(config)) {}
  virtual ~Provider() = default;
  Provider(const Provider&) = delete;
  Provider& operator=(const Provider&) = delete;

  const ProviderConfig& config() const { return config_; }
  const std::string& name() const { return config_.name; }

  // Step 1: signature over the raw bytes, then the timestamp tolerance.
  // Must not parse the body: an unverified body is never looked at.
  virtual Check verify(const Delivery& d) const = 0;

  // Step 2 (only after verify): the JSON to store and the external id.
  Check extract(const Delivery& d, Extracted& out) const;

  // A reply to send instead of storing the delivery; nullopt for events.
  virtual std::optional<std::string> handshake_reply(const std::string& /*payload_json*/) const {
    return std::nullopt;
  }

  // Signs `body` with the first secret, as the provider would at time `now`.
  virtual SignedRequest sign(std::string body, const std::string& id, std::int64_t now) const = 0;

 protected:
  // The body as JSON; form-posting schemes override this.
  virtual Check payload_json(const Delivery& d, std::string& out) const;
  virtual std::string id_from_header(const Delivery& d) const { return d.header(config_.id_header); }

  // True if any secret's MAC equals any of the candidate MACs (raw bytes).
  template <typename MacFn>
  bool any_secret_matches(MacFn mac_of_secret, const std::vector<std::string>& candidates) const {
    for (const std::string& secret : config_.secrets) {
      std::string mac = mac_of_secret(secret);
      for (const std::string& c : candidates)
        if (constant_time_equal(mac, c)) return true;
    }
    return false;
  }

  // Strict decimal unix seconds, within tolerance_seconds of now either way.
  Check check_timestamp(const std::string& header_name, const std::string& value,
                        std::int64_t now) const;

  // Puts the configured id header (if any) on a signed request.
  void add_id_header(SignedRequest& r, const std::string& id) const;

  ProviderConfig config_;
};

// Builds the provider for config.scheme, with the scheme's default id
// location filled in. Throws ConfigError for an unknown scheme or unusable
// secrets (e.g. bad whsec_). The schemes: intake/providers/schemes.cpp.
std::unique_ptr<Provider> make_provider(const ProviderConfig& config);

// Checks every provider's scheme and fills in each scheme's default id
// location (check-config shows them). Throws ConfigError.
void apply_schemes(Config& config);

}  // namespace inbox
