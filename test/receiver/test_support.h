// Shared helpers for the receiver tests: the test database, a receiver
// config with one provider per scheme, and small HTTP clients.
#pragma once

#include <sys/types.h>

#include <gtest/gtest.h>
#include <httplib.h>
#include <libpq-fe.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/config.h"
#include "intake/providers/provider.h"

namespace inbox::test {

// Superuser URL of a database with pg_inbox installed, or nullptr.
const char* database_url();

#define REQUIRE_DATABASE()                                                          \
  do {                                                                              \
    if (!::inbox::test::database_url())                                             \
      GTEST_SKIP() << "INBOX_TEST_DATABASE_URL is not set: no database to test with"; \
  } while (0)

// A superuser connection for setting up and checking rows.
class Db {
 public:
  Db();
  ~Db();
  Db(const Db&) = delete;
  Db& operator=(const Db&) = delete;
  void exec(const std::string& sql);
  // First column of the first row, nullopt when no row / NULL.
  std::optional<std::string> scalar(const std::string& sql);
  long count(const std::string& provider, const std::string& external_id);
  std::string quote(const std::string& s);

 private:
  PGconn* conn_;
};

// Creates the login role the receiver uses and registers the test providers
// (once per process). Returns the receiver's connection string.
std::string receiver_database_url();

// A login that is a member of inbox_worker and nothing else (the backfill
// worker's), created once per process; returns its connection string.
std::string worker_database_url();

// The test database's connection string for another login (same host, port, dbname).
std::string login_database_url(const std::string& user, const std::string& password);

// A prefix unique to this test process, for external ids.
const std::string& run_id();
std::string unique_id(const std::string& tag);

// The secrets every test provider is configured with: {new, old}.
extern const char* const kNewSecret;
extern const char* const kOldSecret;
extern const char* const kStandardNew;  // whsec_ secrets for scheme "standard"
extern const char* const kStandardOld;

// Provider named "t_<scheme>" with secrets {new, old}.
ProviderConfig test_provider(const std::string& scheme);
// A config with all six test providers, listening on 127.0.0.1:0.
Config test_config();

// A provider that signs with the given secrets (first one used).
std::unique_ptr<Provider> signer(const std::string& scheme, const std::string& secret);

std::int64_t unix_now();

struct HttpResult {
  int status = 0;  // 0: no answer (connection error)
  std::string body;
  std::string retry_after;
};

// A TCP connection to 127.0.0.1:port, or -1.
int connect_loopback(int port);

// Starts `inbox-receiver serve --config CONFIG` with stdout to LOG and waits
// (up to 5 s) until /healthz answers; returns the pid (-1 when it did not come up).
pid_t spawn_serve(const std::string& config, const std::string& log, int port);

HttpResult post(int port, const std::string& path, const SignedRequest& r);
HttpResult get(int port, const std::string& path);
// Sends raw bytes and returns the status of the first answer (0 if none).
int raw_status(int port, const std::string& bytes);

// Sends raw bytes, reads until the server closes (or 3 s pass) and returns
// the status of every answer found.
std::vector<int> raw_statuses(int port, const std::string& bytes);

// Runs a shell command; returns its stdout and sets *rc to its exit code.
std::string run_command(const std::string& cmd, int* rc);

// `s` as a TOML basic string.
std::string toml_string(const std::string& s);

// A loopback port nothing listens on right now (bound to 0, read, closed).
int unused_loopback_port();

// SIGTERM to pid, then waits up to 10 s. Returns the wait status, or -1 when
// the process had to be killed.
int terminate_and_wait(pid_t pid);

// A whole file as a string.
std::string read_file(const std::string& path);

// Header name that carries the signature for a scheme (to drop it in tests).
std::string signature_header(const std::string& scheme);

}  // namespace inbox::test
