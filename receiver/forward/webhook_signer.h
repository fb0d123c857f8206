// Standard Webhooks signatures for outgoing deliveries
// (https://www.standardwebhooks.com): webhook-signature is
// "v1," + base64(HMAC-SHA256(key, "{webhook-id}.{webhook-timestamp}.{body}"))
// with key the base64 after "whsec_".
#pragma once

#include <cstdint>
#include <string>

namespace inbox {

class WebhookSigner {
 public:
  // Throws ConfigError when the secret is not whsec_<base64>.
  explicit WebhookSigner(const std::string& whsec_secret);
  std::string sign(const std::string& id, std::int64_t timestamp, const std::string& body) const;

 private:
  std::string key_;
};

}  // namespace inbox
