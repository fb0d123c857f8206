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

}  // namespace pg_inbox
