#include "intake/providers/provider.h"

#include "common/json_util.h"

namespace inbox {

// inbox.ingest refuses longer ids; refusing here keeps the batch clean.
static constexpr std::size_t kMaxIdBytes = 255;

std::string Delivery::header(const std::string& name) const {
  auto it = headers.find(name);
  return it == headers.end() ? std::string() : it->second;
}

Check Provider::payload_json(const Delivery& d, std::string& out) const {
  if (!is_valid_json(d.body)) return Check::fail(400, "body is not valid JSON");
  out.assign(d.body);
  return Check::pass();
}

Check Provider::extract(const Delivery& d, Extracted& out) const {
  Check c = payload_json(d, out.payload_json);
  if (!c.ok()) return c;
  if ((out.handshake_reply = handshake_reply(out.payload_json))) return Check::pass();
  if (!config_.id_header.empty()) {
    out.external_id = id_from_header(d);
    if (out.external_id.empty())
      return Check::fail(400, "no event id: expected header " + config_.id_header);
  } else {
    switch (json_id_at(out.payload_json, config_.id_json_pointer, out.external_id)) {
      case JsonIdError::none:
        break;
      case JsonIdError::not_json:
        return Check::fail(400, "body is not valid JSON");
      case JsonIdError::missing:
        return Check::fail(400, "no event id: expected a string at JSON pointer " +
                                    config_.id_json_pointer);
      case JsonIdError::not_scalar:
        return Check::fail(400, "no event id: " + config_.id_json_pointer +
                                    " must be a string or an integer");
    }
    if (out.external_id.empty())
      return Check::fail(400, "no event id: " + config_.id_json_pointer + " is empty");
  }
  if (out.external_id.size() > kMaxIdBytes)
    return Check::fail(400, "event id longer than 255 bytes");
  if (!is_valid_utf8(out.external_id) || out.external_id.find('\0') != std::string::npos)
    return Check::fail(400, "event id is not valid UTF-8 text");
  return Check::pass();
}

Check Provider::check_timestamp(const std::string& header_name, const std::string& value,
                                std::int64_t now) const {
  if (value.empty() || value.size() > 18) return Check::fail(401, "bad or missing " + header_name);
  std::int64_t ts = 0;
  for (char c : value) {
    if (c < '0' || c > '9') return Check::fail(401, "bad " + header_name);
    ts = ts * 10 + (c - '0');
  }
  if (config_.tolerance_seconds == 0) return Check::pass();
  std::int64_t skew = now > ts ? now - ts : ts - now;
  if (skew > config_.tolerance_seconds)
    return Check::fail(401, header_name + " outside the " +
                                std::to_string(config_.tolerance_seconds) + " s tolerance");
  return Check::pass();
}

void Provider::add_id_header(SignedRequest& r, const std::string& id) const {
  if (!config_.id_header.empty()) r.headers.emplace_back(config_.id_header, id);
}

}  // namespace inbox
