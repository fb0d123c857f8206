#include "backfill/backfill_fetch.h"

#include <simdjson.h>

#include <algorithm>

namespace inbox {

std::optional<int> parse_retry_after(const std::string& value) {
  if (value.empty() || value.size() > 9) return std::nullopt;
  for (char c : value)
    if (c < '0' || c > '9') return std::nullopt;
  return std::min(std::stoi(value), 3600);
}

ApiClient::ApiClient(const std::string& origin, const BackfillApiConfig& api)
    : api_(api), client_(std::make_unique<httplib::Client>(origin)) {
  const time_t sec = api_.timeout_ms / 1000;
  const time_t usec = (api_.timeout_ms % 1000) * 1000;
  client_->set_connection_timeout(sec, usec);
  client_->set_read_timeout(sec, usec);
  client_->set_write_timeout(sec, usec);
  client_->set_keep_alive(true);
  client_->set_tcp_nodelay(true);  // else delayed ACKs add ~40 ms per keep-alive request
  client_->set_follow_location(false);  // a redirect is an answer to look at, not to follow
}

namespace {

// A transport failure in words a person can act on.
std::string describe(httplib::Error e) {
  switch (e) {
    case httplib::Error::Connection: return "could not connect";
    case httplib::Error::ConnectionTimeout: return "connect timed out";
    case httplib::Error::Read: return "read failed or timed out";
    case httplib::Error::Write: return "write failed or timed out";
    case httplib::Error::SSLConnection: return "TLS handshake failed";
    case httplib::Error::SSLServerVerification: return "TLS certificate not trusted";
    default: return httplib::to_string(e);
  }
}

// The event out of a 200 body: all of it, or the value at the pointer.
bool extract_payload(const std::string& body, const std::string& pointer, std::string& out,
                     std::string& error) {
  thread_local simdjson::dom::parser parser;
  simdjson::dom::element doc;
  if (parser.parse(body.data(), body.size()).get(doc) != simdjson::SUCCESS) {
    error = "HTTP 200 with a body that is not JSON";
    return false;
  }
  if (pointer.empty()) {
    out = body;
    return true;
  }
  simdjson::dom::element v;
  if (doc.at_pointer(pointer).get(v) != simdjson::SUCCESS || v.is_null()) {
    error = "HTTP 200 without a value at " + pointer;
    return false;
  }
  out = simdjson::minify(v);
  return true;
}

}  // namespace

ApiAnswer ApiClient::get(const std::string& path) {
  ApiAnswer r;
  httplib::Headers headers = {{"Accept", "application/json"}};
  if (!api_.auth_header.empty()) headers.emplace(api_.auth_header, api_.auth_value);
  // The body is read through a receiver so a runaway answer is cut off.
  std::string body;
  bool too_big = false;
  httplib::Result res = client_->Get(
      path.c_str(), headers, [](const httplib::Response&) { return true; },
      [&](const char* data, size_t n) {
        if (body.size() + n > kMaxResponseBytes) return !(too_big = true);
        body.append(data, n);
        return true;
      });
  if (too_big) {
    r.error = "answer larger than " + std::to_string(kMaxResponseBytes >> 20) + " MiB";
    return r;
  }
  if (!res) {
    r.error = "no answer from the provider: " + describe(res.error());
    return r;
  }
  r.status = res->status;
  r.body = std::move(body);
  r.retry_after = res->get_header_value("Retry-After");
  return r;
}

BackfillFetcher::BackfillFetcher(const BackfillApiConfig& api)
    : api_(api), url_(parse_backfill_url(api.url)), client_(url_.origin, api) {}

FetchResult BackfillFetcher::fetch(const std::string& external_id) {
  FetchResult r;
  const std::string path = fill_path(url_.path_template, external_id);
  r.request = "GET " + path_for_humans(path);
  ApiAnswer a = client_.get(path);
  if (a.status == 0) {
    r.error = a.error;
    return r;
  }
  r.http_status = a.status;
  if (a.status == 200) {
    if (extract_payload(a.body, api_.payload_json_pointer, r.payload_json, r.error)) r.kind = FetchKind::found;
    return r;
  }
  if (a.status == 404 || a.status == 410) {
    r.kind = FetchKind::not_found;
    return r;
  }
  // 401/403 are configuration errors, 429/5xx transient: all retried by the SQL.
  r.error = "HTTP " + std::to_string(a.status);
  r.retry_after_s = parse_retry_after(a.retry_after);
  return r;
}

}  // namespace inbox
