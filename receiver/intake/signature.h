// HMAC, encodings and the constant-time compare every provider scheme uses.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace inbox {

enum class HmacAlgorithm { sha1, sha256, sha512 };

std::optional<HmacAlgorithm> parse_algorithm(std::string_view name);

// Raw MAC bytes of `data` under `key`.
std::string hmac(HmacAlgorithm alg, std::string_view key, std::string_view data);

// Raw SHA-256 of `data` (32 bytes): the body's digest for the delivery log.
std::string sha256(std::string_view data);

std::string hex_encode(std::string_view bytes);
// nullopt on odd length or a non-hex digit; accepts upper and lower case.
std::optional<std::string> hex_decode(std::string_view hex);

std::string base64_encode(std::string_view bytes);
// Standard alphabet with padding; nullopt on anything malformed.
std::optional<std::string> base64_decode(std::string_view b64);

// Compares MAC bytes without leaking where they differ (CRYPTO_memcmp).
// Different lengths compare unequal; the length itself is not secret.
bool constant_time_equal(std::string_view a, std::string_view b);

}  // namespace inbox
