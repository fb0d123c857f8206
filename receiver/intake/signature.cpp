#include "intake/signature.h"

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/params.h>

#include <stdexcept>
#include <vector>

namespace inbox {

std::optional<HmacAlgorithm> parse_algorithm(std::string_view name) {
  if (name == "sha1") return HmacAlgorithm::sha1;
  if (name == "sha256") return HmacAlgorithm::sha256;
  if (name == "sha512") return HmacAlgorithm::sha512;
  return std::nullopt;
}

namespace {

// HMAC() in OpenSSL 3 fetches the MAC and digest implementations on every
// call, a measurable share of a delivery (bench/receiver). Each thread keeps
// a few contexts already keyed; EVP_MAC_init with no key restarts one from
// its stored key. Bounded: the keys are the configured secrets.
class MacCache {
 public:
  ~MacCache() {
    for (Entry& e : entries_) EVP_MAC_CTX_free(e.ctx);
    EVP_MAC_free(mac_);
  }

  // A context ready for update/final, or nullptr (caller falls back).
  EVP_MAC_CTX* get(HmacAlgorithm alg, std::string_view key) {
    for (Entry& e : entries_)
      if (e.alg == alg && e.key == key) return EVP_MAC_init(e.ctx, nullptr, 0, nullptr) ? e.ctx : nullptr;
    if (entries_.size() >= kMaxEntries) return nullptr;
    if (!mac_ && !(mac_ = EVP_MAC_fetch(nullptr, "HMAC", nullptr))) return nullptr;
    EVP_MAC_CTX* ctx = EVP_MAC_CTX_new(mac_);
    if (!ctx) return nullptr;
    char* digest = const_cast<char*>(alg == HmacAlgorithm::sha1     ? "SHA1"
                                     : alg == HmacAlgorithm::sha256 ? "SHA256"
                                                                    : "SHA512");
    OSSL_PARAM params[] = {OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest, 0),
                           OSSL_PARAM_construct_end()};
    if (!EVP_MAC_init(ctx, reinterpret_cast<const unsigned char*>(key.data()), key.size(), params)) {
      EVP_MAC_CTX_free(ctx);
      return nullptr;
    }
    entries_.push_back({alg, std::string(key), ctx});
    return ctx;
  }

 private:
  static constexpr std::size_t kMaxEntries = 16;
  struct Entry {
    HmacAlgorithm alg;
    std::string key;
    EVP_MAC_CTX* ctx;
  };
  EVP_MAC* mac_ = nullptr;
  std::vector<Entry> entries_;
};

}  // namespace

std::string hmac(HmacAlgorithm alg, std::string_view key, std::string_view data) {
  thread_local MacCache cache;
  unsigned char out[EVP_MAX_MD_SIZE];
  if (EVP_MAC_CTX* ctx = cache.get(alg, key)) {
    std::size_t len = 0;
    if (EVP_MAC_update(ctx, reinterpret_cast<const unsigned char*>(data.data()), data.size()) &&
        EVP_MAC_final(ctx, out, &len, sizeof out))
      return std::string(reinterpret_cast<char*>(out), len);
  }
  const EVP_MD* md = alg == HmacAlgorithm::sha1     ? EVP_sha1()
                     : alg == HmacAlgorithm::sha256 ? EVP_sha256()
                                                    : EVP_sha512();
  unsigned int len = 0;
  // One-shot HMAC(): no context to leak.
  if (!HMAC(md, key.data(), static_cast<int>(key.size()),
            reinterpret_cast<const unsigned char*>(data.data()), data.size(), out, &len)) {
    throw std::runtime_error("HMAC failed");
  }
  return std::string(reinterpret_cast<char*>(out), len);
}

std::string sha256(std::string_view data) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (!EVP_Digest(data.data(), data.size(), out, &len, EVP_sha256(), nullptr))
    throw std::runtime_error("SHA-256 failed");
  return std::string(reinterpret_cast<char*>(out), len);
}

std::string hex_encode(std::string_view bytes) {
  static const char digits[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char c : bytes) {
    out.push_back(digits[c >> 4]);
    out.push_back(digits[c & 0xf]);
  }
  return out;
}

static int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::optional<std::string> hex_decode(std::string_view hex) {
  if (hex.size() % 2 != 0) return std::nullopt;
  std::string out;
  out.reserve(hex.size() / 2);
  for (size_t i = 0; i < hex.size(); i += 2) {
    int hi = hex_value(hex[i]), lo = hex_value(hex[i + 1]);
    if (hi < 0 || lo < 0) return std::nullopt;
    out.push_back(static_cast<char>(hi << 4 | lo));
  }
  return out;
}

std::string base64_encode(std::string_view bytes) {
  std::string out(4 * ((bytes.size() + 2) / 3), '\0');
  int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                          reinterpret_cast<const unsigned char*>(bytes.data()),
                          static_cast<int>(bytes.size()));
  out.resize(static_cast<size_t>(n));
  return out;
}

std::optional<std::string> base64_decode(std::string_view b64) {
  if (b64.empty()) return std::string();
  if (b64.size() % 4 != 0) return std::nullopt;
  for (char c : b64) {
    bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
              c == '+' || c == '/' || c == '=';
    if (!ok) return std::nullopt;  // EVP_DecodeBlock would skip whitespace silently
  }
  std::string out(3 * b64.size() / 4, '\0');
  int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                          reinterpret_cast<const unsigned char*>(b64.data()),
                          static_cast<int>(b64.size()));
  if (n < 0) return std::nullopt;
  // EVP_DecodeBlock counts padding as zero bytes; drop them.
  size_t pad = 0;
  if (b64.back() == '=') pad++;
  if (b64.size() > 1 && b64[b64.size() - 2] == '=') pad++;
  out.resize(static_cast<size_t>(n) - pad);
  return out;
}

bool constant_time_equal(std::string_view a, std::string_view b) {
  if (a.size() != b.size() || a.empty()) return false;
  return CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

}  // namespace inbox
