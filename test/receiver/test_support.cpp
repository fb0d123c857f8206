#include "test_support.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <fstream>
#include <iterator>
#include <thread>
#include <cstdlib>
#include <mutex>
#include <random>
#include <stdexcept>

namespace inbox::test {

const char* const kNewSecret = "new-secret-for-tests";
const char* const kOldSecret = "old-secret-for-tests";
const char* const kStandardNew = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const char* const kStandardOld = "whsec_c2VjcmV0LW9sZC1mb3ItdGVzdHMtMTIzNDU2Nzg=";

const char* database_url() {
  const char* u = std::getenv("INBOX_TEST_DATABASE_URL");
  return u && *u ? u : nullptr;
}

Db::Db() : conn_(PQconnectdb(database_url())) {
  if (PQstatus(conn_) != CONNECTION_OK)
    throw std::runtime_error(std::string("test database: ") + PQerrorMessage(conn_));
}

Db::~Db() { PQfinish(conn_); }

void Db::exec(const std::string& sql) {
  PGresult* r = PQexec(conn_, sql.c_str());
  auto st = PQresultStatus(r);
  std::string err = PQresultErrorMessage(r);
  PQclear(r);
  if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) throw std::runtime_error(sql + ": " + err);
}

std::optional<std::string> Db::scalar(const std::string& sql) {
  PGresult* r = PQexec(conn_, sql.c_str());
  if (PQresultStatus(r) != PGRES_TUPLES_OK) {
    std::string err = PQresultErrorMessage(r);
    PQclear(r);
    throw std::runtime_error(sql + ": " + err);
  }
  std::optional<std::string> out;
  if (PQntuples(r) > 0 && !PQgetisnull(r, 0, 0)) out = PQgetvalue(r, 0, 0);
  PQclear(r);
  return out;
}

std::string Db::quote(const std::string& s) {
  char* q = PQescapeLiteral(conn_, s.c_str(), s.size());
  std::string out = q;
  PQfreemem(q);
  return out;
}

long Db::count(const std::string& provider, const std::string& external_id) {
  return std::stol(*scalar("SELECT count(*) FROM inbox.events WHERE provider = " + quote(provider) +
                           " AND external_id = " + quote(external_id)));
}

std::string login_database_url(const std::string& user, const std::string& password) {
  // Same server and database as the superuser URL, as another role.
  char* err = nullptr;
  PQconninfoOption* opts = PQconninfoParse(database_url(), &err);
  if (!opts) throw std::runtime_error(err ? err : "bad INBOX_TEST_DATABASE_URL");
  std::string url;
  for (PQconninfoOption* o = opts; o->keyword; ++o) {
    std::string k = o->keyword;
    if (!o->val || k == "user" || k == "password") continue;
    std::string v = o->val;
    std::string escaped;
    for (char c : v) {
      if (c == '\'' || c == '\\') escaped.push_back('\\');
      escaped.push_back(c);
    }
    url += k + "='" + escaped + "' ";
  }
  PQconninfoFree(opts);
  return url + "user=" + user + " password=" + password;
}

std::string receiver_database_url() {
  static std::once_flag once;
  static std::string url;
  std::call_once(once, [] {
    Db db;
    db.exec(
        "DO $$ BEGIN CREATE ROLE inbox_receiver_test LOGIN PASSWORD 'inbox_receiver_test' "
        "IN ROLE inbox_receiver; EXCEPTION WHEN duplicate_object THEN NULL; END $$");
    for (const char* s : {"github", "stripe", "shopify", "slack", "standard", "hmac"})
      db.exec(std::string("SELECT inbox.register_provider('t_") + s + "')");
    url = login_database_url("inbox_receiver_test", "inbox_receiver_test");
  });
  return url;
}

std::string worker_database_url() {
  static std::once_flag once;
  std::call_once(once, [] {
    Db db;
    db.exec("DO $$ BEGIN CREATE ROLE inbox_backfill_test LOGIN PASSWORD 'inbox_backfill_test' "
            "IN ROLE inbox_worker; EXCEPTION WHEN duplicate_object THEN NULL; END $$");
  });
  return login_database_url("inbox_backfill_test", "inbox_backfill_test");
}

const std::string& run_id() {
  static const std::string id = [] {
    std::random_device rd;
    char buf[20];
    std::snprintf(buf, sizeof buf, "%08x", rd());
    return std::string(buf);
  }();
  return id;
}

std::string unique_id(const std::string& tag) {
  static std::atomic<int> n{0};
  return "t-" + run_id() + "-" + tag + "-" + std::to_string(++n);
}

ProviderConfig test_provider(const std::string& scheme) {
  ProviderConfig p;
  p.name = "t_" + scheme;
  p.scheme = scheme;
  if (scheme == "standard") p.secrets = {kStandardNew, kStandardOld};
  else p.secrets = {kNewSecret, kOldSecret};
  p.secret_names = {"inline #1", "inline #2"};
  if (scheme == "github") p.id_header = "X-GitHub-Delivery";
  if (scheme == "stripe") p.id_json_pointer = "/id";
  if (scheme == "shopify") p.id_header = "X-Shopify-Webhook-Id";
  if (scheme == "slack") p.id_json_pointer = "/event_id";
  if (scheme == "standard") p.id_header = "webhook-id";
  if (scheme == "hmac") {
    p.signature_header = "X-Signature";
    p.algorithm = "sha512";
    p.encoding = "base64";
    p.prefix = "sha512=";
    p.id_json_pointer = "/meta/event_id";
  }
  return p;
}

Config test_config() {
  Config c;
  c.listen = "127.0.0.1:0";
  c.database_url = database_url() ? receiver_database_url() : "";
  c.http_threads = 2;
  c.pool_size = 2;
  c.deadline_ms = 3000;
  c.retry_after_s = 7;
  for (const char* s : {"github", "stripe", "shopify", "slack", "standard", "hmac"})
    c.providers.push_back(test_provider(s));
  return c;
}

std::unique_ptr<Provider> signer(const std::string& scheme, const std::string& secret) {
  ProviderConfig p = test_provider(scheme);
  p.secrets = {secret};
  p.secret_names = {"inline #1"};
  return make_provider(p);
}

std::int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

static HttpResult to_result(const httplib::Result& r) {
  HttpResult out;
  if (!r) return out;
  out.status = r->status;
  out.body = r->body;
  out.retry_after = r->get_header_value("Retry-After");
  return out;
}

HttpResult post(int port, const std::string& path, const SignedRequest& r) {
  httplib::Client cli("127.0.0.1", port);
  cli.set_read_timeout(30, 0);
  cli.set_connection_timeout(5, 0);
  httplib::Headers h;
  std::string content_type = "application/json";
  for (const auto& [k, v] : r.headers) {
    if (k == "Content-Type") content_type = v;
    else h.emplace(k, v);
  }
  return to_result(cli.Post(path.c_str(), h, r.body, content_type.c_str()));
}

HttpResult get(int port, const std::string& path) {
  httplib::Client cli("127.0.0.1", port);
  cli.set_connection_timeout(5, 0);
  cli.set_read_timeout(10, 0);
  return to_result(cli.Get(path.c_str()));
}

int connect_loopback(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

int raw_status(int port, const std::string& bytes) {
  int fd = connect_loopback(port);
  if (fd < 0) return 0;
  timeval tv{10, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  size_t sent = 0;
  while (sent < bytes.size()) {
    ssize_t n = ::send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) break;  // the server may answer and close before reading it all
    sent += static_cast<size_t>(n);
  }
  std::string answer;
  char buf[4096];
  while (answer.find("\r\n") == std::string::npos) {
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    answer.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  // "HTTP/1.1 411 Length Required"
  if (answer.size() < 12 || answer.compare(0, 5, "HTTP/") != 0) return 0;
  return std::stoi(answer.substr(9, 3));
}

std::vector<int> raw_statuses(int port, const std::string& bytes) {
  std::vector<int> out;
  int fd = connect_loopback(port);
  if (fd < 0) return out;
  timeval tv{3, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
  std::string answer;
  char buf[4096];
  for (;;) {
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;  // closed, reset or timed out
    answer.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  for (size_t at = answer.find("HTTP/1.1 "); at != std::string::npos; at = answer.find("HTTP/1.1 ", at + 1))
    out.push_back(std::stoi(answer.substr(at + 9, 3)));
  return out;
}

std::string run_command(const std::string& cmd, int* rc) {
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) {
    *rc = -1;
    return out;
  }
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  int status = pclose(p);
  *rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return out;
}

std::string toml_string(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out.push_back('\\');
    out.push_back(c);
  }
  return out + "\"";
}

std::string signature_header(const std::string& scheme) {
  if (scheme == "github") return "X-Hub-Signature-256";
  if (scheme == "stripe") return "Stripe-Signature";
  if (scheme == "shopify") return "X-Shopify-Hmac-Sha256";
  if (scheme == "slack") return "X-Slack-Signature";
  if (scheme == "standard") return "webhook-signature";
  return "X-Signature";
}

int unused_loopback_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  socklen_t len = sizeof addr;
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(fd);
  return ntohs(addr.sin_port);
}

int terminate_and_wait(pid_t pid) {
  kill(pid, SIGTERM);
  int status = 0;
  for (int i = 0; i < 200; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    if (waitpid(pid, &status, WNOHANG) == pid) return status;
  }
  kill(pid, SIGKILL);
  waitpid(pid, &status, 0);
  return -1;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

}  // namespace inbox::test

namespace inbox::test {

pid_t spawn_serve(const std::string& config, const std::string& log, int port) {
  pid_t pid = fork();
  if (pid == 0) {
    if (!freopen(log.c_str(), "w", stdout)) _exit(126);
    execl(INBOX_RECEIVER_BIN, INBOX_RECEIVER_BIN, "serve", "--config", config.c_str(), nullptr);
    _exit(127);
  }
  for (int i = 0; i < 100; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    if (get(port, "/healthz").status == 200) return pid;
  }
  terminate_and_wait(pid);
  return -1;
}

}  // namespace inbox::test
