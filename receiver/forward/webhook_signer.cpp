#include "forward/webhook_signer.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "common/config.h"

namespace inbox {
namespace {

std::string base64(const unsigned char* data, size_t n) {
  std::string out(4 * ((n + 2) / 3), '\0');
  int len = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()), data, static_cast<int>(n));
  out.resize(static_cast<size_t>(len));
  return out;
}

}  // namespace

WebhookSigner::WebhookSigner(const std::string& secret) {
  const std::string b64 = secret.substr(6);
  if (secret.rfind("whsec_", 0) != 0 || b64.empty() || b64.size() % 4 != 0)
    throw ConfigError("a route secret must be whsec_ followed by base64");
  std::string raw(3 * b64.size() / 4, '\0');
  int len = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(raw.data()),
                            reinterpret_cast<const unsigned char*>(b64.data()), static_cast<int>(b64.size()));
  if (len < 0) throw ConfigError("a route secret must be whsec_ followed by base64");
  // EVP_DecodeBlock counts the padding as zero bytes: drop them.
  size_t pad = b64.size() >= 2 && b64[b64.size() - 2] == '=' ? 2 : (b64.back() == '=' ? 1 : 0);
  raw.resize(static_cast<size_t>(len) - pad);
  key_ = raw;
}

std::string WebhookSigner::sign(const std::string& id, std::int64_t timestamp, const std::string& body) const {
  std::string content = id + "." + std::to_string(timestamp) + "." + body;
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int mac_len = 0;
  HMAC(EVP_sha256(), key_.data(), static_cast<int>(key_.size()),
       reinterpret_cast<const unsigned char*>(content.data()), content.size(), mac, &mac_len);
  return "v1," + base64(mac, mac_len);
}

}  // namespace inbox
