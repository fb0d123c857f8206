#include "intake/sign_command.h"

#include <ctime>
#include <random>

#include "common/json_util.h"
#include "intake/providers/provider.h"

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

// body<TAB>name<TAB>value... per line: what bench/receiver/events.lua reads.
static void append_tsv(std::string& out, const SignedRequest& r) {
  out += r.body;
  for (const auto& [k, v] : r.headers) out += "\t" + k + "\t" + v;
  out += "\n";
}

std::string sign_delivery(const Config& config, const SignOptions& o) {
  const ProviderConfig* pc = config.find_provider(o.provider);
  if (!pc) throw ConfigError("no provider named \"" + o.provider + "\" in the config");
  if (pc->secrets.empty())
    throw ConfigError("provider \"" + o.provider + "\": none of its secrets' environment variables is set");
  auto provider = make_provider(*pc);
  std::int64_t now = o.now ? o.now : static_cast<std::int64_t>(std::time(nullptr));
  auto signed_for = [&](const std::string& id) {
    std::string body = o.body;
    if (body.empty())
      body = pc->id_json_pointer.empty() ? "{\"type\":\"inbox.test\",\"id\":" + json_quote(id) + "}"
                                         : body_with_id_at(pc->id_json_pointer, id);
    return provider->sign(body, id, now);
  };
  std::string id = o.id.empty() ? random_id() : o.id;
  if (o.format == "tsv") {
    std::string out;
    if (o.count <= 1) append_tsv(out, signed_for(id));
    for (long i = 1; o.count > 1 && i <= o.count; ++i) append_tsv(out, signed_for(id + "-" + std::to_string(i)));
    return out;
  }
  SignedRequest r = signed_for(id);
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
