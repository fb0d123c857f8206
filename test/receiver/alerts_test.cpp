// The alert sender with real processes, a real Postgres and local stand-in
// targets: once across replicas and restarts, P0 from every replica, fail
// open when the store is down or slower than the claim timeout, per-entry
// windows, retries per target, and the payloads (Standard Webhooks test
// vector, Alertmanager's OpenAPI schema).
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <mutex>
#include <thread>

#include "alert_stand_ins.h"
#include "alerts/alert.h"
#include "alerts/alert_payloads.h"
#include "test_support.h"

namespace inbox::test {
namespace {

using namespace std::chrono_literals;

// A login with inbox_alerter only.
std::string alerter_url() { return member_login_url("inbox_alerter_test", "inbox_alerter"); }

struct SenderOptions {
  std::string database_url;  // empty: the alerter login
  std::vector<std::string> target_urls;
  int claim_timeout_ms = 1500;
  int window_p2_s = 3600;
  int statement_timeout_ms = 3000;
  int database_unreachable_s = 60;
  int retry_base_ms = 100;
};

std::string write_config(const SenderOptions& o, const std::string& tag) {
  std::string path = "/tmp/inbox-alerts-" + run_id() + "-" + tag + ".toml";
  std::ofstream f(path);
  f << "listen = \"127.0.0.1:0\"\n"
    << "database_url = " << toml_string(o.database_url.empty() ? alerter_url() : o.database_url) << "\n"
    << "[database]\nstatement_timeout_ms = " << o.statement_timeout_ms << "\nconnect_timeout_s = 2\n"
    << "[alerts]\npoll_interval_ms = 100\nclaim_timeout_ms = " << o.claim_timeout_ms
    << "\nwindow_p2_s = " << o.window_p2_s << "\ndatabase_unreachable_s = " << o.database_unreachable_s
    << "\nretry_base_ms = " << o.retry_base_ms << "\nretry_max_ms = 400\nretry_attempts = 4\n";
  int i = 0;
  for (const std::string& url : o.target_urls)
    f << "[[alert_target]]\nname = \"t" << ++i << "\"\nkind = \"webhook\"\nurl = " << toml_string(url)
      << "\nsecret = \"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw\"\ntimeout_ms = 1000\n";
  f << "[[alert_target]]\nname = \"log\"\nkind = \"log\"\n";
  f << "[[provider]]\nname = \"t_alerts\"\nscheme = \"github\"\nsecrets = [\"s\"]\n";
  return path;
}

// A config whose only HTTP target is `target`.
std::string config_for(const StandInTarget& target, const std::string& tag) {
  SenderOptions o;
  o.target_urls = {target.url()};
  return write_config(o, tag);
}

// `inbox-receiver alerts` as a process of its own; stdout to a log file.
struct SenderProcess {
  pid_t pid = -1;
  std::string log;
  SenderProcess(const std::string& config, const std::string& tag) {
    log = "/tmp/inbox-alerts-" + run_id() + "-" + tag + ".log";
    pid = fork();
    if (pid == 0) {
      if (!freopen(log.c_str(), "w", stdout)) _exit(126);
      execl(INBOX_RECEIVER_BIN, INBOX_RECEIVER_BIN, "alerts", "--config", config.c_str(), nullptr);
      _exit(127);
    }
    for (int i = 0; i < 100 && read_file(log).find("alert sender started") == std::string::npos; ++i)
      std::this_thread::sleep_for(50ms);
  }
  ~SenderProcess() { stop(); }
  void stop() {
    if (pid > 0) terminate_and_wait(pid);
    pid = -1;
  }
  std::string output() const { return read_file(log); }
};

// An alert row as the checks write it (inbox._write_alert), with our own key.
void insert_alert(Db& db, const std::string& key, const std::string& severity, const std::string& state = "firing") {
  db.exec("INSERT INTO inbox.alerts (key, check_name, provider, state, severity, data_loss, since, value, summary) "
          "VALUES (" + db.quote(key) + ", 'test_check', 't_alerts', " + db.quote(state) + ", " + db.quote(severity) +
          ", false, now(), 1, " + db.quote("test alert " + key) + ")");
}

// The rows the tests insert (keys "t-<run>-..."), deleted before and after
// each test: a sender looks at every alert of its lookback, and another
// test's hundreds would only slow it down.
struct CleanAlertRows {
  CleanAlertRows() { clean(); }
  ~CleanAlertRows() { clean(); }
  static void clean() { Db().exec("DELETE FROM inbox.alerts WHERE key LIKE 't-%'"); }
};

// The key as it appears in a webhook body.
std::string in_body(const std::string& key) { return "\"key\":\"" + key + "\""; }

TEST(AlertsConfig, KeysAreCheckedAndNamed) {
  const std::string base = "[[provider]]\nname = \"g\"\nscheme = \"github\"\nsecrets = [\"s\"]\n";
  Config c = parse_config("admin_listen = \"127.0.0.1:9\"\n[alerts]\nclaim_timeout_ms = 700\nwindow_p1_s = 1000\n"
                   "[[alert_target]]\nname = \"am\"\nkind = \"alertmanager\"\nurl = \"http://am:9093/api/v2/alerts\"\n"
                   "min_severity = \"P1\"\n" + base, "t");
  EXPECT_EQ(c.admin.listen, "127.0.0.1:9");
  EXPECT_EQ(c.alerts.claim_timeout_ms, 700);
  EXPECT_EQ(c.alerts.window_s[1], 1000);
  EXPECT_EQ(c.alerts.window_s[2], 3600);
  ASSERT_EQ(c.alert_targets.size(), 1u);
  EXPECT_EQ(c.alert_targets[0].min_severity, "P1");
  auto error_of = [&](const std::string& text) {
    try {
      parse_config(text + base, "t");
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  EXPECT_EQ(error_of("[[alert_target]]\nname = \"x\"\nkind = \"email\"\n"),
            "alert_target \"x\": \"kind\" must be slack, webhook, alertmanager or log");
  EXPECT_EQ(error_of("[[alert_target]]\nname = \"x\"\nkind = \"slack\"\n"), "alert_target \"x\": \"url\" is required");
  EXPECT_EQ(error_of("[[alert_target]]\nname = \"x\"\nkind = \"log\"\nurl = \"http://a/b\"\n"),
            "alert_target \"x\": kind \"log\" takes no \"url\" or \"secret\"");
  EXPECT_EQ(error_of("[[alert_target]]\nname = \"x\"\nkind = \"webhook\"\nurl = \"http://a/b\"\nsecret = \"plain\"\n"),
            "alert_target \"x\": \"secret\" is a Standard Webhooks key (whsec_...)");
  EXPECT_EQ(error_of("[[alert_target]]\nname = \"x\"\nkind = \"slack\"\nurl = \"http://a/b\"\nsecret = \"whsec_x\"\n"),
            "alert_target \"x\": \"secret\" only applies to kind \"webhook\"");
  EXPECT_EQ(error_of("[[alert_target]]\nname = \"x\"\nkind = \"slack\"\nurl = \"ftp://a/b\"\n").rfind("alert_target \"x\": ", 0), 0u);
  EXPECT_EQ(error_of("[[alert_target]]\nname = \"x\"\nkind = \"log\"\nmin_severity = \"P9\"\n"),
            "alert_target \"x\": \"min_severity\" must be P0, P1, P2 or P3");
  EXPECT_EQ(error_of("[alerts]\nenabled = true\n"), "[alerts] enabled = true, but no [[alert_target]] is configured");
  EXPECT_EQ(error_of("[alerts]\nclaim_timeout_ms = 0\n"), "[alerts]: \"claim_timeout_ms\" must be between 10 and 60000");
  EXPECT_EQ(error_of("[alerts]\nerror_rate = 2.0\n"), "[alerts]: \"error_rate\" must be a number in (0, 1]");
  EXPECT_EQ(error_of("[alerts]\nwindow_p0_s = 1\n"), "[alerts]: unknown key \"window_p0_s\"");
  EXPECT_EQ(error_of("[alerts]\nwindow_p3_s = 600\n"),
            "[alerts]: \"lookback_s\" (900) must be shorter than \"window_p3_s\" (600), or a replica started later "
            "resends alerts whose window ended");
  EXPECT_EQ(error_of("[admin]\ntokn = \"x\"\n"), "[admin]: unknown key \"tokn\"");
  EXPECT_EQ(error_of("admin_listen = \"nowhere\"\n"), "\"admin_listen\" must be host:port, e.g. \"127.0.0.1:9090\"");
}

TEST(AlertPayloads, StandardWebhooksSignatureMatchesTheSpecExample) {
  // The example of the Standard Webhooks specification.
  HeaderList h = standard_webhooks_headers("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "msg_p5jXN8AQM9LWM0D4loKWxJek",
                                           1614265330, "{\"test\": 2432232314}");
  ASSERT_EQ(h.size(), 3u);
  EXPECT_EQ(h[0].second, "msg_p5jXN8AQM9LWM0D4loKWxJek");
  EXPECT_EQ(h[1].second, "1614265330");
  EXPECT_EQ(h[2].second, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=");
  EXPECT_TRUE(standard_webhooks_headers("not-a-key", "m", 1, "{}").empty());
  EXPECT_TRUE(standard_webhooks_headers("whsec_!!!", "m", 1, "{}").empty());
}

TEST(AlertPayloads, AlertmanagerPayloadMatchesItsOpenApiSchema) {
  Alert a;
  a.id = 7;
  a.key = alert_key("dead_new", "stripe", "firing");
  a.check = "dead_new";
  a.provider = "stripe";
  a.state = "firing";
  a.severity = "P1";
  a.data_loss = true;
  a.since = "2026-01-05T12:00:00.123456+00:00";
  a.at = rfc3339_now();
  a.value = 3;
  a.summary = "P1 dead_new firing for stripe: 3 events \"quoted\" <tag>";
  for (const char* state : {"firing", "resolved"}) {
    a.state = state;
    std::string path = "/tmp/inbox-alerts-" + run_id() + "-am-" + state + ".json";
    std::ofstream(path) << alertmanager_payload(a, "http://status.example/status", 3600);
    int rc = 0;
    std::string out = run_command("python3 " INBOX_SOURCE_DIR "/test/alerts/validate_alertmanager.py " INBOX_SOURCE_DIR
                                  "/test/alerts/alertmanager-openapi.yaml " + path + " " + std::string(state) + " 2>&1",
                                  &rc);
    EXPECT_EQ(rc, 0) << out;
  }
  // A payload that breaks the schema is refused (the validator can fail).
  std::string bad = "/tmp/inbox-alerts-" + run_id() + "-am-bad.json";
  std::ofstream(bad) << "[{\"labels\":{\"alertname\":3}}]";
  int rc = 0;
  run_command("python3 " INBOX_SOURCE_DIR "/test/alerts/validate_alertmanager.py " INBOX_SOURCE_DIR
              "/test/alerts/alertmanager-openapi.yaml " + bad + " firing 2>&1",
              &rc);
  EXPECT_NE(rc, 0);
}

TEST(AlertPayloads, SlackAndWebhookBodiesAreJson) {
  Alert a;
  a.key = "k/\"x\"/firing";
  a.check = "c";
  a.provider = "*";
  a.state = "firing";
  a.severity = "P0";
  a.at = rfc3339_now();
  a.summary = "line\nbreak \"and\" \\ backslash";
  EXPECT_EQ(slack_payload(a), "{\"text\":\":rotating_light: P0 c firing\\nline\\nbreak \\\"and\\\" \\\\ backslash\"}");
  EXPECT_NE(webhook_payload(a).find("\"value\":null,\"range\":[null,null]"), std::string::npos);
  EXPECT_EQ(alert_message_id(a).find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-"),
            std::string::npos);
}

TEST(Alerts, KeyIsTheSqlDefinition) {
  REQUIRE_DATABASE();
  Db db;
  for (auto [c, p, s] : {std::tuple<std::string, std::string, std::string>{"dead_new", "stripe", "firing"},
                         {"stats_stale", "*", "resolved"}, {"receiver_database_unreachable", "*", "firing"}})
    EXPECT_EQ(alert_key(c, p, s), *db.scalar("SELECT inbox.alert_key(" + db.quote(c) + ", " + db.quote(p) + ", " +
                                             db.quote(s) + ")"));
}

TEST(Alerts, TwoReplicasAndAThirdStartedLaterDeliverOnce) {
  REQUIRE_DATABASE();
  CleanAlertRows rows;
  Db db;
  StandInTarget target;
  std::string config = config_for(target, "replicas");
  SenderProcess a(config, "replica-a"), b(config, "replica-b");
  const std::string key = unique_id("once") + "/t_alerts/firing";
  insert_alert(db, key, "P2");
  EXPECT_EQ(target.wait_for(in_body(key), 1, 5000), 1);
  std::this_thread::sleep_for(1000ms);  // both replicas have looked at it by now
  {
    SenderProcess c(config, "replica-c");  // "after a deploy": reads the same recent rows
    std::this_thread::sleep_for(1500ms);
    EXPECT_NE(c.output().find("alert deduplicated"), std::string::npos) << c.output();
  }
  EXPECT_EQ(target.count(in_body(key)), 1) << "one delivery across three replicas";
  // Another key still goes out, once.
  const std::string other = unique_id("other") + "/t_alerts/firing";
  insert_alert(db, other, "P2");
  EXPECT_EQ(target.wait_for(in_body(other), 1, 5000), 1);
  std::this_thread::sleep_for(800ms);
  EXPECT_EQ(target.count(in_body(other)), 1);
  // Signed: the Standard Webhooks headers are there.
  for (const auto& p : target.posts())
    if (p.body.find(in_body(other)) != std::string::npos) {
      EXPECT_EQ(p.headers.count("webhook-signature"), 1u);
      EXPECT_EQ(p.headers.find("webhook-signature")->second.rfind("v1,", 0), 0u);
    }
}

TEST(Alerts, P0IsDeliveredByEveryReplica) {
  REQUIRE_DATABASE();
  CleanAlertRows rows;
  Db db;
  StandInTarget target;
  std::string config = config_for(target, "p0");
  SenderProcess a(config, "p0-a"), b(config, "p0-b");
  const std::string key = unique_id("p0") + "/t_alerts/firing";
  insert_alert(db, key, "P0");
  EXPECT_EQ(target.wait_for(in_body(key), 2, 5000), 2);
  std::this_thread::sleep_for(500ms);
  EXPECT_EQ(target.count(in_body(key)), 2) << "once per replica, no more";
  // A replica started later does not page again: the P0 was recorded as sent.
  SenderProcess c(config, "p0-c");
  std::this_thread::sleep_for(1500ms);
  EXPECT_EQ(target.count(in_body(key)), 2) << c.output();
}

TEST(Alerts, StoreDownStillDeliversTheSidecarsOwnAlert) {
  StandInTarget target;
  SenderOptions o;
  o.target_urls = {target.url()};
  o.database_url = "postgresql://nobody@127.0.0.1:" + std::to_string(unused_loopback_port()) + "/none";
  o.database_unreachable_s = 1;
  SenderProcess p(write_config(o, "down"), "down");
  const std::string key = in_body("receiver_database_unreachable/*/firing");
  EXPECT_EQ(target.wait_for(key, 1, 8000), 1) << p.output();
  std::this_thread::sleep_for(1000ms);
  EXPECT_EQ(target.count(key), 1) << "deduplicated by the process while the store is down";
  EXPECT_NE(p.output().find("alert claim failed open"), std::string::npos) << p.output();
}

TEST(Alerts, StoreSlowerThanTheClaimTimeoutStillDelivers) {
  REQUIRE_DATABASE();
  CleanAlertRows rows;
  Db db;
  StandInTarget target;
  DelayProxy proxy("127.0.0.1", database_port());
  SenderOptions o;
  o.target_urls = {target.url()};
  o.database_url = alerter_url() + " port=" + std::to_string(proxy.port());
  o.claim_timeout_ms = 500;
  o.statement_timeout_ms = 8000;  // the reader waits for the slow store; the claim does not
  SenderProcess p(write_config(o, "slow"), "slow");
  std::this_thread::sleep_for(500ms);
  proxy.set_delay_ms(1200);
  const std::string key = unique_id("slow") + "/t_alerts/firing";
  auto started = std::chrono::steady_clock::now();
  insert_alert(db, key, "P2");
  EXPECT_EQ(target.wait_for(in_body(key), 1, 10000), 1) << p.output();
  EXPECT_LT(std::chrono::steady_clock::now() - started, 8s);
  std::string out = p.output();
  EXPECT_NE(out.find("alert claim failed open"), std::string::npos) << out;
  EXPECT_NE(out.find("no answer within 500 ms"), std::string::npos) << out;
  proxy.set_delay_ms(0);
}

TEST(Alerts, ALongWindowSurvivesOtherKeysExpiringAndARestartDoesNotResend) {
  REQUIRE_DATABASE();
  CleanAlertRows rows;
  Db db;
  StandInTarget target;
  std::string config = config_for(target, "windows");
  const std::string tag = unique_id("win");
  const std::string long_key = tag + "-long/t_alerts/firing";  // P1: 24 h
  {
    SenderProcess p(config, "windows-1");
    insert_alert(db, long_key, "P1");
    ASSERT_EQ(target.wait_for(in_body(long_key), 1, 5000), 1);
    db.exec("INSERT INTO inbox.alerts (key, check_name, provider, state, severity, data_loss, summary) "
            "SELECT '" + tag + "-early-' || i || '/t_alerts/firing', 'c', 't_alerts', 'firing', 'P2', false, 's' "
            "FROM generate_series(1, 300) i");
    ASSERT_EQ(target.wait_for("-early-", 300, 20000), 300);
  }
  // 70 minutes pass: the early P2 claims (1 h) expire, the P1 claim (24 h) does not, and
  // the early alerts leave the lookback.
  db.exec("UPDATE inbox.alert_claims SET claimed_at = claimed_at - interval '70 minutes', "
          "expires_at = expires_at - interval '70 minutes' WHERE key LIKE '" + tag + "%'");
  db.exec("UPDATE inbox.alerts SET created_at = created_at - interval '70 minutes' WHERE key LIKE '" + tag + "%'");
  // 600 other alerts arrive; their claims clean up the expired entries.
  SenderProcess p(config, "windows-2");  // a restart
  db.exec("INSERT INTO inbox.alerts (key, check_name, provider, state, severity, data_loss, summary) "
          "SELECT '" + tag + "-late-' || i || '/t_alerts/firing', 'c', 't_alerts', 'firing', 'P2', false, 's' "
          "FROM generate_series(1, 600) i");
  ASSERT_EQ(target.wait_for("-late-", 600, 30000), 600);
  EXPECT_EQ(*db.scalar("SELECT count(*) FROM inbox.alert_claims WHERE key LIKE '" + tag + "-early-%'"), "0")
      << "expired entries are cleaned up";
  EXPECT_EQ(*db.scalar("SELECT count(*) FROM inbox.alert_claims WHERE key = '" + long_key +
                       "' AND expires_at > now() + interval '22 hours'"),
            "1")
      << "the 24 h entry survived the cleanups";
  EXPECT_EQ(target.count("-early-"), 300) << "nothing older than the lookback is looked at again";
  // A restart inside the window: the same alert raised again is not sent; an expired key's is.
  insert_alert(db, long_key, "P1");
  insert_alert(db, tag + "-early-1/t_alerts/firing", "P2");
  EXPECT_EQ(target.wait_for(in_body(tag + "-early-1/t_alerts/firing"), 2, 5000), 2);
  std::this_thread::sleep_for(500ms);
  EXPECT_EQ(target.count(in_body(long_key)), 1) << "inside its 24 h window: not resent";
}

TEST(Alerts, UnreachableTargetDoesNotBlockOthersAndFailuresAreRetried) {
  REQUIRE_DATABASE();
  CleanAlertRows rows;
  Db db;
  StandInTarget flaky, good;
  flaky.fail_next(2, 503);
  SenderOptions o;
  o.target_urls = {"http://127.0.0.1:" + std::to_string(unused_loopback_port()) + "/gone", flaky.url(), good.url()};
  SenderProcess p(write_config(o, "targets"), "targets");
  const std::string key = unique_id("targets") + "/t_alerts/firing";
  auto started = std::chrono::steady_clock::now();
  insert_alert(db, key, "P2");
  EXPECT_EQ(good.wait_for(in_body(key), 1, 3000), 1);
  EXPECT_LT(std::chrono::steady_clock::now() - started, 2500ms) << "the dead target held up nobody";
  EXPECT_EQ(flaky.wait_for(in_body(key), 1, 5000), 1) << "delivered on the third attempt, after two 503s";
  std::this_thread::sleep_for(1500ms);
  std::string out = p.output();
  EXPECT_NE(out.find("\"alert delivery failed, will retry\""), std::string::npos) << out;
  EXPECT_NE(out.find("\"alert delivery gave up\""), std::string::npos) << "the dead target gives up after its attempts";
}

TEST(Alerts, ACheckThatFiresIsDeliveredEndToEnd) {
  REQUIRE_DATABASE();
  Db db;
  StandInTarget target;
  SenderProcess p(config_for(target, "e2e"), "e2e");
  // Statistics an hour old: stats_stale fires (as P0 here, so earlier runs' claims do not matter).
  db.exec("SELECT inbox.configure_check('stats_stale', severity => 'P0')");
  // Other tests refresh the statistics in this database: a newer row would
  // make them fresh again. The scan and reconcile times are set so that only
  // stats_stale changes state.
  db.exec("DELETE FROM inbox.stats_global WHERE minute > now() - interval '1 hour'");
  db.exec("INSERT INTO inbox.stats_global (minute, refreshed_at, last_gap_scan_at, last_reconcile_at) VALUES "
          "(date_trunc('minute', now() - interval '1 hour'), now() - interval '1 hour', now(), now()) "
          "ON CONFLICT (minute) DO UPDATE SET refreshed_at = EXCLUDED.refreshed_at, "
          "last_gap_scan_at = EXCLUDED.last_gap_scan_at, last_reconcile_at = EXCLUDED.last_reconcile_at");
  db.exec("UPDATE inbox.check_state SET firing = false, recent = '{}' WHERE check_name = 'stats_stale'");
  db.exec("UPDATE inbox.anomalies SET resolved_at = now() WHERE check_name = 'stats_stale' AND resolved_at IS NULL");
  int before = target.count(in_body("stats_stale/*/firing"));
  db.exec("SELECT inbox.run_checks()");
  EXPECT_EQ(target.wait_for(in_body("stats_stale/*/firing"), before + 1, 5000), before + 1) << p.output();
  db.exec("SELECT inbox.configure_check('stats_stale', reset => true)");
}

}  // namespace
}  // namespace inbox::test
