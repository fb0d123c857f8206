// The delivery log's chain (issue 12): what a call's row hashes. Pure C++:
// the same encoding as inbox._batch_message() in
// sql/src/15_delivery_log.sql, which inbox.verify_log recomputes.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace pg_inbox {

using Sha256 = std::array<unsigned char, 32>;

// One delivery of a call's row of inbox.delivery_batches, as hashed.
struct ChainFields {
  int stripe = 0;
  int64_t seq = 0;  // the call's row
  int item = 0;     // the delivery's place in the call, from 1
  std::optional<int64_t> event_id;
  std::optional<int32_t> delivery;
  int64_t received_unix_us = 0;  // received_at, microseconds since 1970
  std::string_view provider, external_id, source, outcome;
  bool payload_kept = false;
  bool payload_differs = false;
  Sha256 body_sha256{};
  std::string_view body_hashed;  // "raw" or "jsonb"
  std::optional<std::string_view> signature_scheme;
  std::optional<Sha256> headers_sha256;
};

// One delivery's line of the bytes a call's row hashes after the previous
// row's hash (the lines joined by '\n'): fields joined by '|', text as
// "<bytes>:<text>", NULL as "~", hashes in lowercase hex.
std::string chain_message(const ChainFields &row);

std::string hex(const Sha256 &digest);

}  // namespace pg_inbox
