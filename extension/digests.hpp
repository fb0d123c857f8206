// OpenSSL message digests, each algorithm looked up once per backend.
// PostgreSQL's md5() and its cryptohash API have OpenSSL 3 look the
// algorithm up again for every digest, which costs several times the
// hashing of a short text (bench/README.md, eleventh session).
#pragma once

#include <openssl/evp.h>

#include <memory>

namespace pg_inbox {

// NULL where OpenSSL does not provide the algorithm (MD5 under FIPS).
const EVP_MD *md5_algorithm();
const EVP_MD *sha256_algorithm();

// A digest context, freed with its scope (OpenSSL's memory, not palloc).
struct DigestContextFree {
  void operator()(EVP_MD_CTX *context) const { EVP_MD_CTX_free(context); }
};
using DigestContext = std::unique_ptr<EVP_MD_CTX, DigestContextFree>;

}  // namespace pg_inbox
