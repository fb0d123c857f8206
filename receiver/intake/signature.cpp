#include "intake/signature.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <stdexcept>

namespace inbox {

std::optional<HmacAlgorithm> parse_algorithm(std::string_view name) {
  if (name == "sha1") return HmacAlgorithm::sha1;
  if (name == "sha256") return HmacAlgorithm::sha256;
  if (name == "sha512") return HmacAlgorithm::sha512;
  return std::nullopt;
}

std::string hmac(HmacAlgorithm alg, std::string_view key, std::string_view data) {
  const EVP_MD* md = alg == HmacAlgorithm::sha1     ? EVP_sha1()
                     : alg == HmacAlgorithm::sha256 ? EVP_sha256()
                                                    : EVP_sha512();
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  // One-shot HMAC(): no context to leak, about 1 µs for 1 KiB.
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
