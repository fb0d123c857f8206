// SHA-256 (FIPS 180-4), pure C++: the delivery log hashes bodies and chain
// links without calling Postgres (no error can longjmp out of it) and
// without a crypto library the extension would otherwise not need.
// inbox.verify_log recomputes every link with Postgres's sha256().
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace pg_inbox {

class Sha256Hasher {
 public:
  Sha256Hasher();
  void update(const void *data, std::size_t size);
  void update(std::string_view bytes) { update(bytes.data(), bytes.size()); }
  std::array<unsigned char, 32> finish();

 private:
  void block(const unsigned char *p);
  uint32_t state_[8];
  unsigned char buffer_[64];
  std::size_t buffered_ = 0;
  uint64_t total_ = 0;
};

std::array<unsigned char, 32> sha256(std::string_view bytes);

}  // namespace pg_inbox
