#include "log_chain.hpp"

namespace pg_inbox {
namespace {

void text_field(std::string &out, std::optional<std::string_view> value) {
  if (!value) {
    out += '~';
    return;
  }
  out += std::to_string(value->size());
  out += ':';
  out += *value;
}

}  // namespace

std::string hex(const Sha256 &digest) {
  static const char digits[] = "0123456789abcdef";
  std::string out;
  out.reserve(64);
  for (unsigned char byte : digest) {
    out += digits[byte >> 4];
    out += digits[byte & 15];
  }
  return out;
}

std::string chain_message(const ChainFields &row) {
  std::string out;
  out.reserve(256 + row.provider.size() + row.external_id.size());
  out += std::to_string(row.stripe) + '|' + std::to_string(row.seq) + '|' +
         std::to_string(row.item) + '|';
  out += row.event_id ? std::to_string(*row.event_id) : "~";
  out += '|';
  out += row.delivery ? std::to_string(*row.delivery) : "~";
  out += '|' + std::to_string(row.received_unix_us) + '|';
  text_field(out, row.provider);
  out += '|';
  text_field(out, row.external_id);
  out += '|';
  text_field(out, row.source);
  out += '|';
  out += row.outcome;
  out += row.payload_kept ? "|t" : "|f";
  out += row.payload_differs ? "|t|" : "|f|";
  out += hex(row.body_sha256);
  out += '|';
  out += row.body_hashed;
  out += '|';
  text_field(out, row.signature_scheme);
  out += '|';
  out += row.headers_sha256 ? hex(*row.headers_sha256) : "~";
  return out;
}

}  // namespace pg_inbox
