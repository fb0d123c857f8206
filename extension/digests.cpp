#include "digests.hpp"

namespace pg_inbox {
namespace {

// Fetched on first use and kept for the backend's life.
const EVP_MD *fetch(const char *name) {
#if OPENSSL_VERSION_NUMBER >= 0x30000000L
  return EVP_MD_fetch(nullptr, name, nullptr);
#else
  return EVP_get_digestbyname(name);
#endif
}

}  // namespace

const EVP_MD *md5_algorithm() {
  static const EVP_MD *const md5 = fetch("MD5");
  return md5;
}

const EVP_MD *sha256_algorithm() {
  static const EVP_MD *const sha256 = fetch("SHA256");
  return sha256;
}

bool digest_parts(EVP_MD_CTX *context, const EVP_MD *algorithm,
                  std::initializer_list<std::string_view> parts, unsigned char *out,
                  unsigned int size) {
  if (algorithm == nullptr || static_cast<unsigned int>(EVP_MD_size(algorithm)) != size ||
      EVP_DigestInit_ex(context, algorithm, nullptr) != 1)
    return false;
  for (std::string_view part : parts)
    if (EVP_DigestUpdate(context, part.data(), part.size()) != 1) return false;
  unsigned int length = 0;
  return EVP_DigestFinal_ex(context, out, &length) == 1 && length == size;
}

}  // namespace pg_inbox
