#include "alerts/alert_payloads.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>

#include "common/json_util.h"

namespace inbox {
namespace {

std::string number_or_null(const std::optional<double>& v) {
  if (!v || !std::isfinite(*v)) return "null";
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", *v);
  return buf;
}

// json_quote needs valid UTF-8; everything here comes from the database or
// ourselves, but a summary is never worth a broken body.
std::string q(const std::string& s) { return json_quote(is_valid_utf8(s) ? s : std::string("(not UTF-8)")); }

std::string rfc3339_in(int seconds) {
  std::time_t t = std::time(nullptr) + seconds;
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string base64(const unsigned char* data, std::size_t n) {
  std::string out(4 * ((n + 2) / 3), '\0');
  int len = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()), data, static_cast<int>(n));
  out.resize(static_cast<std::size_t>(len));
  return out;
}

}  // namespace

std::string alert_message_id(const Alert& a) {
  if (a.id > 0) return "inbox-alert-" + std::to_string(a.id);
  std::string id = "inbox-alert-" + a.key + "-" + a.at;  // the sidecar's own
  for (char& c : id)
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-')) c = '-';
  return id;
}

std::string slack_payload(const Alert& a) {
  const bool firing = a.state == "firing";
  std::string title = std::string(firing ? ":rotating_light: " : ":white_check_mark: ") + a.severity + " " +
                      a.check + (firing ? " firing" : " resolved") +
                      (a.provider == "*" ? "" : " for " + a.provider);
  if (a.data_loss && firing) title += " (data loss)";
  return "{\"text\":" + q(title + "\n" + a.summary) + "}";
}

std::string webhook_payload(const Alert& a) {
  return "{\"type\":" + q("inbox.alert." + a.state) + ",\"timestamp\":" + q(a.at) + ",\"data\":{\"id\":" +
         (a.id > 0 ? std::to_string(a.id) : "null") + ",\"key\":" + q(a.key) + ",\"check\":" + q(a.check) +
         ",\"provider\":" + q(a.provider) + ",\"state\":" + q(a.state) + ",\"severity\":" + q(a.severity) +
         ",\"data_loss\":" + (a.data_loss ? "true" : "false") + ",\"since\":" + (a.since.empty() ? "null" : q(a.since)) +
         ",\"value\":" + number_or_null(a.value) + ",\"range\":[" + number_or_null(a.range_lo) + "," +
         number_or_null(a.range_hi) + "],\"summary\":" + q(a.summary) + "}}";
}

std::string alertmanager_payload(const Alert& a, const std::string& generator_url, int hold_s) {
  std::string out = "[{\"labels\":{\"alertname\":" + q(a.check) + ",\"provider\":" + q(a.provider) +
                    ",\"severity\":" + q(a.severity) + ",\"service\":\"pg_inbox\"},\"annotations\":{\"summary\":" +
                    q(a.summary) + ",\"data_loss\":" + q(a.data_loss ? "true" : "false") + "}";
  out += ",\"startsAt\":" + q(a.since.empty() ? a.at : a.since);
  out += ",\"endsAt\":" + q(a.state == "firing" ? rfc3339_in(hold_s) : rfc3339_in(0));
  if (!generator_url.empty()) out += ",\"generatorURL\":" + q(generator_url);
  return out + "}]";
}

HeaderList standard_webhooks_headers(const std::string& secret, const std::string& msg_id,
                                     std::int64_t timestamp, const std::string& body) {
  static const std::string kPrefix = "whsec_";
  if (secret.compare(0, kPrefix.size(), kPrefix) != 0) return {};
  std::string b64 = secret.substr(kPrefix.size());
  if (b64.empty() || b64.size() % 4 != 0) return {};
  std::string key(b64.size() / 4 * 3, '\0');
  int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(key.data()),
                          reinterpret_cast<const unsigned char*>(b64.data()), static_cast<int>(b64.size()));
  if (n < 0) return {};
  std::size_t pad = b64.size() - b64.find_last_not_of('=') - 1;  // DecodeBlock keeps the padding's zeros
  key.resize(static_cast<std::size_t>(n) - pad);
  std::string ts = std::to_string(timestamp);
  std::string signed_content = msg_id + "." + ts + "." + body;
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int mac_len = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
       reinterpret_cast<const unsigned char*>(signed_content.data()), signed_content.size(), mac, &mac_len);
  return {{"webhook-id", msg_id}, {"webhook-timestamp", ts}, {"webhook-signature", "v1," + base64(mac, mac_len)}};
}

}  // namespace inbox
