// The admin listener of `serve`: /status, /status.json, /metrics, /healthz,
// /readyz on admin_listen, none of it behind the public port's routes; the
// bearer token; the status read as a login with inbox_monitor rights only.
#include <fstream>
#include <mutex>

#include <thread>

#include "alert_stand_ins.h"
#include "common/json_util.h"
#include "test_support.h"

namespace inbox::test {
namespace {

std::string monitor_url() { return member_login_url("inbox_monitor_test", "inbox_monitor"); }

HttpResult get_with(int port, const std::string& path, const std::string& token) {
  httplib::Client c("127.0.0.1", port);
  httplib::Headers h;
  if (!token.empty()) h.emplace("Authorization", "Bearer " + token);
  auto r = c.Get(path.c_str(), h);
  HttpResult out;
  if (r) out.status = r->status, out.body = r->body;
  return out;
}

TEST(Admin, StatusMetricsAndHealthOnTheAdminListenerOnly) {
  REQUIRE_DATABASE();
  int port = unused_loopback_port(), admin = unused_loopback_port();
  DelayProxy proxy("127.0.0.1", database_port());  // counts the status page's reads
  std::string path = "/tmp/inbox-admin-" + run_id() + ".toml";
  {
    std::ofstream f(path);
    f << "listen = \"127.0.0.1:" << port << "\"\nadmin_listen = \"127.0.0.1:" << admin << "\"\n"
      << "database_url = " << toml_string(receiver_database_url()) << "\n"
      << "[admin]\ntoken = \"s3cret\"\ncache_ms = 10000\ndatabase_url = "
      << toml_string(monitor_url() + " port=" + std::to_string(proxy.port())) << "\n"
      << "[[provider]]\nname = \"t_github\"\nscheme = \"github\"\nsecrets = [\"s\"]\n";
  }
  pid_t pid = spawn_serve(path, "/tmp/inbox-admin-" + run_id() + ".log", port);
  ASSERT_GT(pid, 0);
  EXPECT_EQ(get(admin, "/healthz").status, 200) << "health needs no token";
  EXPECT_EQ(get(admin, "/readyz").status, 200);
  EXPECT_EQ(get(admin, "/status").status, 401);
  EXPECT_EQ(get_with(admin, "/status", "wrong").status, 401);
  HttpResult page = get_with(admin, "/status", "s3cret");
  EXPECT_EQ(page.status, 200);
  EXPECT_NE(page.body.find("<title>pg_inbox status</title>"), std::string::npos);
  EXPECT_NE(page.body.find("data-provider=\"t_github\""), std::string::npos) << page.body;
  EXPECT_EQ(page.body.find("<script"), std::string::npos) << "no scripts";
  EXPECT_EQ(page.body.find("src=\"http"), std::string::npos) << "no external assets";
  EXPECT_NE(page.body.find("http-equiv=\"refresh\""), std::string::npos) << "refreshes itself";
  HttpResult json = get_with(admin, "/status.json", "s3cret");
  EXPECT_EQ(json.status, 200);
  EXPECT_TRUE(is_valid_json(json.body));
  EXPECT_NE(json.body.find("\"series\""), std::string::npos);
  HttpResult metrics = get_with(admin, "/metrics", "s3cret");
  EXPECT_NE(metrics.body.find("inbox_provider_verdict{provider=\"t_github\""), std::string::npos) << metrics.body;
  EXPECT_NE(metrics.body.find("inbox_firing_checks{severity=\"P1\"}"), std::string::npos);
  EXPECT_NE(metrics.body.find("inbox_receiver_requests_total"), std::string::npos) << "and the process's own";
  // Cached: a burst of scrapes reads the database at most once.
  long before = proxy.client_chunks();
  EXPECT_GT(before, 0) << "the reads so far went through the proxy";
  for (int i = 0; i < 20; ++i) get_with(admin, "/metrics", "s3cret");
  EXPECT_LE(proxy.client_chunks() - before, 1) << "20 scrapes within cache_ms: at most one read";
  // Nothing of it on the public port.
  EXPECT_EQ(get(port, "/status").status, 404);
  EXPECT_EQ(get(port, "/metrics").status, 404) << "with admin_listen set, metrics are on the admin listener only";
  EXPECT_EQ(get(port, "/healthz").status, 200) << "load balancers still probe the public port";
  terminate_and_wait(pid);
}

}  // namespace
}  // namespace inbox::test
