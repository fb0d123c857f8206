#include "sign_command.h"

#include <ctime>
#include <random>

#include "json_util.h"
#include "providers/provider.h"

namespace inbox {
namespace {

std::string random_id() {
  std::random_device rd;
  std::uniform_int_distribution<std::uint64_t> dist;
  char buf[40];
  std::snprintf(buf, sizeof buf, "evt_%016llx", static_cast<unsigned long long>(dist(rd)));
  return buf;
}

// Single quotes for a POSIX shell: ' becomes '\''.
std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') out += "'\\''";
    else out.push_back(c);
  }
  return out + "'";
}

}  // namespace

std::string body_with_id_at(const std::string& pointer, const std::string& id) {
  // Split /a/b into tokens, unescaping ~1 and ~0 as RFC 6901 says.
  std::vector<std::string> tokens;
  size_t pos = 1;
  while (pos <= pointer.size()) {
    size_t slash = pointer.find('/', pos);
    if (slash == std::string::npos) slash = pointer.size();
    std::string t = pointer.substr(pos, slash - pos);
    for (size_t i; (i = t.find("~1")) != std::string::npos;) t.replace(i, 2, "/");
    for (size_t i; (i = t.find("~0")) != std::string::npos;) t.replace(i, 2, "~");
    tokens.push_back(t);
    pos = slash + 1;
  }
  std::string json = json_quote(id);
  for (auto it = tokens.rbegin(); it != tokens.rend(); ++it) json = "{" + json_quote(*it) + ":" + json + "}";
  if (tokens.size() == 1 && tokens[0] != "type")  // a recognisable test event
    json.insert(json.size() - 1, ",\"type\":\"inbox.test\"");
  return json;
}

std::string sign_delivery(const Config& config, const SignOptions& o) {
  const ProviderConfig* pc = config.find_provider(o.provider);
  if (!pc) throw ConfigError("no provider named \"" + o.provider + "\" in the config");
  auto provider = make_provider(*pc);
  std::string id = o.id.empty() ? random_id() : o.id;
  std::string body = o.body;
  if (body.empty())
    body = pc->id_json_pointer.empty() ? "{\"type\":\"inbox.test\",\"id\":" + json_quote(id) + "}"
                                       : body_with_id_at(pc->id_json_pointer, id);
  std::int64_t now = o.now ? o.now : static_cast<std::int64_t>(std::time(nullptr));
  SignedRequest r = provider->sign(body, id, now);
  std::string out;
  if (o.format == "headers") {
    for (const auto& [k, v] : r.headers) out += k + ": " + v + "\n";
    return out + "\n" + r.body + "\n";
  }
  std::string url = o.url;
  if (!url.empty() && url.back() == '/') url.pop_back();
  out = "curl -sS -X POST " + shell_quote(url + "/webhooks/" + pc->name);
  for (const auto& [k, v] : r.headers) out += " \\\n  -H " + shell_quote(k + ": " + v);
  return out + " \\\n  --data-binary " + shell_quote(r.body) + "\n";
}

}  // namespace inbox
