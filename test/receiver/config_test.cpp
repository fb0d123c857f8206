// The TOML config: defaults, secrets from the environment, and errors that
// name the key at fault. Also checks every example config parses.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <unistd.h>

#include "common/config.h"
#include "intake/providers/provider.h"
#include "test_support.h"

using namespace inbox;
using inbox::test::run_command;

namespace {

std::string error_of(const std::string& toml) {
  try {
    Config c = parse_config(toml);
    apply_schemes(c);  // which schemes exist is intake's (schemes.cpp)
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(Config, FullExampleWithDefaults) {
  setenv("INBOX_TEST_SECRET_NEXT", "from-env", 1);
  Config c = parse_config(R"(
listen = "0.0.0.0:9000"
database_url = "postgresql://inbox@db/app"
[batching]
enabled = false
[[provider]]
name = "github"
scheme = "github"
secrets = ["inline-secret", { env = "INBOX_TEST_SECRET_NEXT" }]
[[provider]]
name = "stripe-eu"
scheme = "stripe"
secrets = ["whsec_x"]
tolerance_seconds = 600
[[provider]]
name = "acme"
scheme = "hmac"
secrets = ["k"]
signature_header = "X-Acme-Signature"
algorithm = "sha1"
id_json_pointer = "/event/id"
)");
  apply_schemes(c);
  EXPECT_EQ(c.listen, "0.0.0.0:9000");
  EXPECT_FALSE(c.batching);
  EXPECT_EQ(c.max_body_bytes, 1u << 20);
  ASSERT_EQ(c.providers.size(), 3u);
  EXPECT_EQ(c.providers[0].secrets, (std::vector<std::string>{"inline-secret", "from-env"}));
  EXPECT_EQ(c.providers[0].id_header, "X-GitHub-Delivery");
  EXPECT_EQ(c.providers[1].id_json_pointer, "/id");
  EXPECT_EQ(c.providers[1].tolerance_seconds, 600);
  EXPECT_EQ(c.providers[2].algorithm, "sha1");
  EXPECT_EQ(c.providers[2].encoding, "hex");
}

TEST(Config, ErrorsNameTheProblem) {
  const std::string base = "[[provider]]\nname = \"gh\"\nscheme = \"github\"\n";
  EXPECT_NE(error_of(base + "secret = [\"x\"]\n").find("unknown key \"secret\""), std::string::npos);
  EXPECT_NE(error_of(base).find("\"secrets\" is required"), std::string::npos);
  EXPECT_NE(error_of(base + "secrets = []\n").find("non-empty"), std::string::npos);
  EXPECT_NE(error_of(base + "secrets = [{ env = \"INBOX_TEST_UNSET_VAR\" }]\n").find("INBOX_TEST_UNSET_VAR"),
            std::string::npos);
  EXPECT_NE(error_of("[[provider]]\nname = \"GitHub\"\nscheme = \"github\"\nsecrets = [\"x\"]\n").find("[a-z0-9_-]"),
            std::string::npos);
  EXPECT_NE(error_of("[[provider]]\nname = \"x\"\nscheme = \"paypal\"\nsecrets = [\"x\"]\n").find("scheme"),
            std::string::npos);
  EXPECT_NE(error_of("[[provider]]\nname = \"x\"\nscheme = \"hmac\"\nsecrets = [\"x\"]\n").find("signature_header"),
            std::string::npos);
  EXPECT_NE(error_of(base + "secrets = [\"x\"]\nprefix = \"sha1=\"\n").find("only applies"), std::string::npos);
  EXPECT_NE(error_of(base + "secrets = [\"x\"]\n" + base + "secrets = [\"y\"]\n").find("twice"), std::string::npos);
  EXPECT_NE(error_of("listen = 8080\n" + base + "secrets = [\"x\"]\n").find("\"listen\" must be a string"),
            std::string::npos);
  EXPECT_NE(error_of("[database]\npool_size = 0\n" + base + "secrets = [\"x\"]\n").find("pool_size"),
            std::string::npos);
  EXPECT_NE(error_of("[database]\nstats_interval_ms = 50\n" + base + "secrets = [\"x\"]\n").find("stats_interval_ms"),
            std::string::npos);
  EXPECT_EQ(error_of("[database]\nstats_interval_ms = 0\n" + base + "secrets = [\"x\"]\n"), "");
  EXPECT_NE(error_of("listen = \n").find("config:1"), std::string::npos);  // TOML syntax, with position
  EXPECT_NE(error_of("").find("no [[provider]]"), std::string::npos);
}

TEST(Config, DatabaseUrlFromEnvironment) {
  const std::string providers = "[[provider]]\nname = \"gh\"\nscheme = \"github\"\nsecrets = [\"x\"]\n";
  setenv("INBOX_TEST_DB_URL", "postgresql://u@h/d", 1);
  EXPECT_EQ(parse_config("database_url = { env = \"INBOX_TEST_DB_URL\" }\n" + providers).database_url,
            "postgresql://u@h/d");
  EXPECT_NE(error_of("database_url = { env = \"INBOX_TEST_UNSET_VAR\" }\n" + providers).find("INBOX_TEST_UNSET_VAR"),
            std::string::npos);
}

TEST(Config, StandardSecretMustBeWhsecBase64) {
  Config c = parse_config("[[provider]]\nname = \"sw\"\nscheme = \"standard\"\nsecrets = [\"whsec_***\"]\n");
  EXPECT_THROW(make_provider(c.providers[0]), ConfigError);
}

// Every file in examples/ must load (with its env secrets set).
TEST(Config, ExamplesParse) {
  namespace fs = std::filesystem;
  fs::path dir = fs::path(INBOX_SOURCE_DIR) / "examples";
  if (!fs::exists(dir)) GTEST_SKIP() << "no examples/";
  for (const char* v : {"GITHUB_WEBHOOK_SECRET", "GITHUB_WEBHOOK_SECRET_NEXT", "STRIPE_WEBHOOK_SECRET",
                        "SHOPIFY_API_SECRET", "SLACK_SIGNING_SECRET", "SVIX_WEBHOOK_SECRET",
                        "ACME_WEBHOOK_SECRET", "INBOX_DATABASE_URL"})
    setenv(v, "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", 1);
  int n = 0;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.path().extension() != ".toml") continue;
    ++n;
    SCOPED_TRACE(entry.path().string());
    Config c = load_config(entry.path().string());
    for (const auto& p : c.providers) EXPECT_NO_THROW(make_provider(p));
  }
  EXPECT_GT(n, 0);
}

// check-config lists every error in one run, every unset variable included.
TEST(Config, EveryErrorInOneRun) {
  unsetenv("INBOX_TEST_UNSET_DB");
  unsetenv("INBOX_TEST_UNSET_A");
  unsetenv("INBOX_TEST_UNSET_B");
  std::string e = error_of(
      "database_url = { env = \"INBOX_TEST_UNSET_DB\" }\n[http]\nthreads = -1\n"
      "[[provider]]\nname = \"a\"\nscheme = \"github\"\nsecrets = [{ env = \"INBOX_TEST_UNSET_A\" }]\n"
      "[[provider]]\nname = \"b\"\nscheme = \"stripe\"\nsecrets = [{ env = \"INBOX_TEST_UNSET_B\" }]\n");
  for (const char* part : {"INBOX_TEST_UNSET_DB", "INBOX_TEST_UNSET_A", "INBOX_TEST_UNSET_B", "\"threads\""})
    EXPECT_NE(e.find(part), std::string::npos) << part << " missing from: " << e;
}

// Money defaults: check-config registers payment providers (stripe) with
// on_lease_expiry => 'hold' and says why; other providers keep the default.
TEST(Cli, CheckConfigHoldsPaymentProviders) {
  const std::string path = "/tmp/inbox-cli-money-" + std::to_string(::getpid()) + ".toml";
  std::ofstream(path) << "database_url = \"postgresql://x@127.0.0.1/db\"\n"
                      << "[[provider]]\nname = \"payments\"\nscheme = \"stripe\"\nsecrets = [\"whsec_a\"]\n"
                      << "[[provider]]\nname = \"code\"\nscheme = \"github\"\nsecrets = [\"b\"]\n";
  int rc = -1;
  std::string out = run_command(std::string(INBOX_RECEIVER_BIN) + " check-config --config " + path + " 2>&1", &rc);
  std::remove(path.c_str());
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("SELECT inbox.register_provider('payments', on_lease_expiry => 'hold');"), std::string::npos)
      << out;
  EXPECT_NE(out.find("SELECT inbox.register_provider('code');"), std::string::npos) << out;
  EXPECT_NE(out.find("the charge may already have run"), std::string::npos) << out;

  // Without a payment provider there is nothing to explain.
  std::ofstream(path) << "database_url = \"postgresql://x@127.0.0.1/db\"\n"
                      << "[[provider]]\nname = \"code\"\nscheme = \"github\"\nsecrets = [\"b\"]\n";
  out = run_command(std::string(INBOX_RECEIVER_BIN) + " check-config --config " + path + " 2>&1", &rc);
  std::remove(path.c_str());
  EXPECT_EQ(rc, 0) << out;
  EXPECT_EQ(out.find("on_lease_expiry"), std::string::npos) << out;
}

// --version, and --help for every command (exit 0, the command's usage).
TEST(Cli, VersionAndHelpForEveryCommand) {
  int rc = -1;
  std::string out = run_command(std::string(INBOX_RECEIVER_BIN) + " --version", &rc);
  EXPECT_EQ(rc, 0);
  EXPECT_EQ(out.rfind("inbox-receiver ", 0), 0u) << out;
  // check-config: the parser's errors and each provider's scheme, in one run.
  const std::string bad = "/tmp/inbox-cli-bad-" + std::to_string(::getpid()) + ".toml";
  std::ofstream(bad) << "database_url = { env = \"INBOX_TEST_UNSET_DB\" }\n"
                     << "[[provider]]\nname = \"a\"\nscheme = \"paypal\"\nsecrets = [\"x\"]\n"
                     << "[[provider]]\nname = \"b\"\nscheme = \"github\"\nsecrets = [{ env = \"INBOX_TEST_UNSET_B\" }]\n";
  unsetenv("INBOX_TEST_UNSET_DB");
  unsetenv("INBOX_TEST_UNSET_B");
  out = run_command(std::string(INBOX_RECEIVER_BIN) + " check-config --config " + bad + " 2>&1", &rc);
  std::remove(bad.c_str());
  EXPECT_EQ(rc, 1);
  for (const char* part : {"INBOX_TEST_UNSET_DB", "\"scheme\" must be one of", "INBOX_TEST_UNSET_B"})
    EXPECT_NE(out.find(part), std::string::npos) << part << " missing from: " << out;
  for (const char* cmd : {"serve", "check-config", "sign", "backfill"}) {
    out = run_command(std::string(INBOX_RECEIVER_BIN) + " " + cmd + " --help", &rc);
    EXPECT_EQ(rc, 0) << cmd;
    EXPECT_NE(out.find(std::string("usage: inbox-receiver ") + cmd), std::string::npos) << out;
  }
}
