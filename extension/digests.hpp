// OpenSSL message digests, each algorithm looked up once per backend.
// PostgreSQL's md5() and its cryptohash API have OpenSSL 3 look the
// algorithm up again for every digest, which costs several times the
// hashing of a short text (bench/README.md, eleventh session).
#pragma once

#include <openssl/evp.h>

#include <initializer_list>
#include <memory>
#include <string_view>

namespace pg_inbox {

// NULL where OpenSSL does not provide the algorithm (MD5 under FIPS).
const EVP_MD *md5_algorithm();
const EVP_MD *sha256_algorithm();

// A digest context, freed with its scope (OpenSSL's memory, not palloc).
struct DigestContextFree {
  void operator()(EVP_MD_CTX *context) const { EVP_MD_CTX_free(context); }
};
using DigestContext = std::unique_ptr<EVP_MD_CTX, DigestContextFree>;

// The digest of the concatenated parts into out, which holds exactly the
// algorithm's digest size. False when the algorithm is missing (NULL) or
// OpenSSL fails; the context is reset and can be used again.
bool digest_parts(EVP_MD_CTX *context, const EVP_MD *algorithm,
                  std::initializer_list<std::string_view> parts, unsigned char *out,
                  unsigned int size);

}  // namespace pg_inbox
