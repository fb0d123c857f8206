// libFuzzer target for one signature scheme (INBOX_FUZZ_SCHEME): the fuzz
// input, split at newlines, replaces the values of the headers a signed
// delivery carries (signature, timestamp, id) and then the body; verify()
// and, when it passes, extract() must never crash, hang or read out of
// bounds, whatever those headers hold.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "common/headers.h"
#include "intake/providers/provider.h"

namespace {

const inbox::Provider& provider() {
  static std::unique_ptr<inbox::Provider> p = [] {
    inbox::ProviderConfig c;
    c.name = "fuzz";
    c.scheme = INBOX_FUZZ_SCHEME;
    c.secrets = {c.scheme == "standard" ? "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw" : "fuzz-secret"};
    c.secret_names = {"inline #1"};
    if (c.scheme == "hmac") {
      c.signature_header = "X-Signature";
      c.algorithm = "sha256";
      c.encoding = "base64";
      c.prefix = "sha256=";
      c.id_header = "X-Id";
    }
    return inbox::make_provider(c);
  }();
  return *p;
}

}  // namespace

// With INBOX_FUZZ_SEED_DIR set, writes one valid input (the signed
// delivery's own header values and body) there, so a run starts from a
// signature that verifies instead of searching for one.
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  const char* dir = std::getenv("INBOX_FUZZ_SEED_DIR");
  if (!dir) return 0;
  inbox::SignedRequest r = provider().sign("{\"id\":\"evt_1\",\"event_id\":\"e1\"}", "evt_1", 1700000000);
  std::string seed;
  for (const auto& h : r.headers) seed += h.second + "\n";
  seed += r.body;
  std::ofstream(std::string(dir) + "/seed-valid") << seed;
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const inbox::Provider& p = provider();
  static const inbox::SignedRequest signed_request = p.sign("{\"id\":\"evt_1\",\"event_id\":\"e1\"}", "evt_1", 1700000000);
  std::string input(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> parts;
  std::size_t pos = 0;
  while (parts.size() < signed_request.headers.size() + 1) {
    std::size_t nl = input.find('\n', pos);
    parts.push_back(input.substr(pos, nl == std::string::npos ? std::string::npos : nl - pos));
    if (nl == std::string::npos) break;
    pos = nl + 1;
  }
  inbox::Headers headers;
  for (std::size_t i = 0; i < signed_request.headers.size(); ++i)
    headers.emplace(signed_request.headers[i].first,
                    i < parts.size() ? parts[i] : signed_request.headers[i].second);
  std::string body = parts.size() > signed_request.headers.size() ? parts.back() : signed_request.body;
  inbox::Delivery d{headers, body, 1700000000};
  inbox::Check check = p.verify(d);
  if (check.ok()) {
    inbox::Extracted x;
    p.extract(d, x);
  } else if (check.status != 400 && check.status != 401) {
    __builtin_trap();  // a refused signature is 401 (or 400), nothing else
  }
  return 0;
}
