// Tail listing for `sequence` id sources: the list_after_url key, and the
// worker asking a stand-in "list events" API on 127.0.0.1 for the ids after
// the highest one received while sequence_tail_silence fires (real database,
// a login with inbox_worker only), so a tail that never arrived is fetched.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "backfill/backfill.h"
#include "backfill/backfill_tail.h"
#include "intake/http_server.h"
#include "stand_in_api.h"
#include "test_support.h"

using namespace inbox;
using namespace inbox::test;

namespace {

const char* const kToken = "Bearer tail-token-for-tests";

std::string tail_toml(const std::string& keys) {
  return "database_url = \"postgresql://x@127.0.0.1/db\"\n"
         "[[provider]]\nname = \"shop\"\nscheme = \"stripe\"\nsecrets = [\"s\"]\n"
         "[provider.backfill]\nurl = \"https://api.example.com/v1/events/{id}\"\n" +
         keys;
}

std::string tail_error(const std::string& keys) {
  try {
    parse_config(tail_toml(keys));
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(TailConfig, KeysAndSharedListKeys) {
  Config c = parse_config(tail_toml(
      "list_after_url = \"https://api.example.com/v1/events?since_id={after_number}&limit=100&page={cursor}\"\n"
      "list_ids_json_pointer = \"/data\"\nlist_id_json_pointer = \"/id\"\nlist_cursor_json_pointer = \"/next\"\n"
      "list_interval_s = 60\nlist_max_pages = 7\n"));
  const BackfillApiConfig& b = *c.providers[0].backfill;
  EXPECT_EQ(b.list_after_url, "https://api.example.com/v1/events?since_id={after_number}&limit=100&page={cursor}");
  EXPECT_EQ(b.list_url, "");  // a tail listing needs no time-window listing
  EXPECT_EQ(b.list_ids_json_pointer, "/data");
  EXPECT_EQ(b.list_cursor_json_pointer, "/next");
  EXPECT_EQ(b.list_interval_s, 60);
  EXPECT_EQ(b.list_max_pages, 7);
  // Both list URLs at once, sharing the cursor pointer.
  Config both = parse_config(
      tail_toml("list_url = \"https://api.example.com/v1/events?from={from}&to={to}&c={cursor}\"\n"
                "list_after_url = \"https://api.example.com/v1/events?after={after}&c={cursor}\"\n"
                "list_cursor_json_pointer = \"/next\"\n"));
  EXPECT_NE(both.providers[0].backfill->list_after_url, "");
  EXPECT_EQ(parse_config(tail_toml("")).providers[0].backfill->list_after_url, "");
}

TEST(TailConfig, BadKeysAreClearErrors) {
  const std::string base = "list_after_url = \"https://api.example.com/v1/events?key=SECRETQ";
  EXPECT_NE(tail_error(base + "&x=1\"\n").find("must contain {after} or {after_number}"), std::string::npos);
  EXPECT_NE(tail_error(base + "&a={after}&from={from}\"\n").find("may not contain {from}"), std::string::npos);
  EXPECT_NE(tail_error(base + "&a={after}&id={id}\"\n").find("may not contain {id}"), std::string::npos);
  EXPECT_NE(tail_error(base + "&a={after}&c={cursor}\"\n")
                .find("\"list_after_url\" has {cursor} but \"list_cursor_json_pointer\" is not set"),
            std::string::npos);
  EXPECT_NE(tail_error(base + "&a={after}\"\nlist_cursor_json_pointer = \"/next\"\n")
                .find("\"list_cursor_json_pointer\" is set but \"list_after_url\" has no {cursor}"),
            std::string::npos);
  EXPECT_NE(tail_error("list_after_url = \"https://x/v1/{cursor}/events?a={after}\"\nlist_cursor_json_pointer = \"/n\"\n")
                .find("{cursor} must be in the query of \"list_after_url\""),
            std::string::npos);
  EXPECT_NE(tail_error("list_after_url = \"ftp://x/events?a={after}\"\n").find("http:// or https://"),
            std::string::npos);
  // The time-window keys belong to list_url; the shared ones need either URL.
  EXPECT_NE(tail_error(base + "&a={after}\"\nlist_window_s = 600\n").find("\"list_window_s\" needs \"list_url\""),
            std::string::npos);
  EXPECT_NE(tail_error(base + "&a={after}\"\nlist_time_format = \"unix\"\n").find("needs \"list_url\""),
            std::string::npos);
  EXPECT_NE(tail_error("list_max_pages = 3\n").find("\"list_max_pages\" needs \"list_url\" or \"list_after_url\""),
            std::string::npos);
  EXPECT_NE(tail_error(base + "&a={after}\"\nlist_interval_s = 5\n").find("between 10 and 86400"), std::string::npos);
  // No message quotes the URL: its query may carry an API key.
  for (const std::string& keys : {base + "&x=1\"\n", base + "&a={after}&c={cursor}\"\n",
                                  base + "&a={after}&from={from}\"\n"})
    EXPECT_EQ(tail_error(keys).find("SECRETQ"), std::string::npos) << tail_error(keys);
}

TEST(TailUrl, AfterAndCursorAreFilledIn) {
  const std::string t = "/v1/events?after={after}&n={after_number}&limit=2&cursor={cursor}";
  EXPECT_EQ(tail_page_path(t, "evt_10", "10", ""), "/v1/events?after=evt_10&n=10&limit=2");
  EXPECT_EQ(tail_page_path(t, "ord/0 1", "1", "c 2"), "/v1/events?after=ord%2F0%201&n=1&limit=2&cursor=c%202");
  EXPECT_EQ(tail_page_path("/v1/shops/{after_number}/events", "evt_7", "7", ""), "/v1/shops/7/events");
}

class TailTest : public ::testing::Test {
 protected:
  void SetUp() override {
    REQUIRE_DATABASE();
    static std::atomic<int> n{0};
    provider_ = "t_tl_" + run_id() + "_" + std::to_string(++n);
    db_ = std::make_unique<Db>();
    p_ = db_->quote(provider_);
    db_->exec("SELECT inbox.register_provider(" + p_ + ")");
    db_->exec("SELECT inbox.set_id_source(" + p_ + ", 'sequence', 'tl_evt_{n}', grace => '0 seconds')");
  }

  std::string id_of(int n) const { return "tl_evt_" + std::to_string(n); }

  Config config() const {
    Config c;
    c.database_url = worker_database_url();
    ProviderConfig p = test_provider("stripe");
    p.name = provider_;
    BackfillApiConfig b;
    b.url = api_.url_template();
    b.auth_header = "Authorization";
    b.auth_value = kToken;
    b.timeout_ms = 2000;
    b.list_after_url = api_.list_url("after={after}&limit=2&cursor={cursor}");
    b.list_ids_json_pointer = "/data";
    b.list_id_json_pointer = "/id";
    b.list_cursor_json_pointer = "/next";
    p.backfill = b;
    c.providers.push_back(p);
    return c;
  }

  BackfillStats round(const Config& c) {
    BackfillWorker worker(c);
    BackfillStats stats;
    std::string error;
    EXPECT_TRUE(worker.round(stats, error)) << error;
    return stats;
  }

  // Events 1..10 as received and scanned: the high mark is 10.
  void received_one_to_ten() {
    db_->exec("SELECT inbox.ingest(" + p_ + ", 'tl_evt_' || n, jsonb_build_object('n', n)) FROM generate_series(1, 10) n");
    db_->exec("SELECT inbox.scan_gaps(" + p_ + ")");
  }

  // The firing episode the checks open (run_checks, tested in pgTAP).
  void firing() {
    db_->exec("INSERT INTO inbox.anomalies (check_name, provider, severity, data_loss, first_seen_at, last_seen_at) "
              "VALUES ('sequence_tail_silence', " + p_ + ", 'P2', false, now(), now())");
  }

  std::string high() {
    return db_->scalar("SELECT high_number FROM inbox.gap_sources WHERE provider = " + p_).value_or("NULL");
  }

  // The provider's list API: the ids after ?after=, two per page, with a
  // cursor (the last id of the page) to the next page.
  void list_after(int last) {
    api_.on_list([this, last](const StandInApi::ListCall& call) -> StandInApi::Answer {
      auto after = call.params.find("after");
      if (after == call.params.end()) return {400, "{}", "", 0};
      auto cursor = call.params.find("cursor");
      const std::string& from = cursor == call.params.end() ? after->second : cursor->second;
      int n = std::stoi(from.substr(from.rfind('_') + 1)) + 1;
      std::string body = "{\"data\":[";
      for (int i = n; i < n + 2 && i <= last; ++i) body += (i > n ? "," : "") + std::string("{\"id\":\"") + id_of(i) + "\"}";
      body += "]";
      if (n + 1 < last) body += ",\"next\":\"" + id_of(n + 1) + "\"";
      return {200, body + "}", "", 0};
    });
  }

  std::string provider_, p_;
  std::unique_ptr<Db> db_;
  StandInApi api_;
};

TEST_F(TailTest, QuietCheckListsNothing) {
  received_one_to_ten();
  list_after(13);
  BackfillStats s = round(config());
  EXPECT_EQ(s.tail_raised, 0);
  EXPECT_EQ(s.list_errors, 0);
  EXPECT_EQ(api_.list_calls().size(), 0u) << "the tail is listed only while its check fires";
  EXPECT_EQ(high(), "10");
}

TEST_F(TailTest, FiringCheckRaisesTheHighMarkAcrossPages) {
  received_one_to_ten();
  firing();
  list_after(15);
  BackfillStats s = round(config());
  EXPECT_EQ(s.tail_raised, 5);
  EXPECT_EQ(s.list_errors, 0);
  EXPECT_EQ(high(), "15");
  auto calls = api_.list_calls();
  ASSERT_EQ(calls.size(), 3u);  // 11-12, 13-14, 15
  EXPECT_EQ(calls[0].params.at("after"), "tl_evt_10");
  EXPECT_EQ(calls[0].params.count("cursor"), 0u);  // first page: no cursor parameter
  EXPECT_EQ(calls[1].params.at("cursor"), "tl_evt_12");
  for (const auto& c : calls) EXPECT_EQ(c.authorization, kToken);
  // Within the same window no replica lists again.
  EXPECT_EQ(round(config()).tail_raised, 0);
  EXPECT_EQ(api_.list_calls().size(), 3u);
}

TEST_F(TailTest, IdsNotOfThePatternAreSkippedAndAFailingPageIsCounted) {
  received_one_to_ten();
  firing();
  std::atomic<int> page{0};
  api_.on_list([&page](const StandInApi::ListCall&) -> StandInApi::Answer {
    if (++page == 1) return {200, R"({"data":[{"id":"tl_evt_12"},{"id":"other_99"},{"id":"tl_evt_x"},{}],"next":"p2"})", "", 0};
    return {503, "{}", "", 0};
  });
  BackfillStats s = round(config());
  EXPECT_EQ(s.list_errors, 1);
  EXPECT_EQ(s.tail_raised, 2);  // the ids of the page before the failure count
  EXPECT_EQ(high(), "12");
}

// Replicas: only the one that claims the window calls the list API.
TEST_F(TailTest, OnlyOneReplicaListsPerWindow) {
  received_one_to_ten();
  firing();
  list_after(11);
  Config c = config();
  long long raised = 0;
  for (int i = 0; i < 3; ++i) raised += round(c).tail_raised;
  EXPECT_EQ(raised, 1);
  EXPECT_EQ(api_.list_calls().size(), 1u);
}

// Issue 8 end to end: events 1..10 arrive as webhooks; the provider sent
// 11..13 too, which never arrived. The tail check fires (real rollups and
// checks, with time moved on by an hour), `backfill --once` (the built
// binary, a login with inbox_worker only) lists the ids after tl_evt_10,
// scan_gaps records 11..13 as gaps and requests them, and the next
// `backfill --once` fetches them into inbox.events.
TEST_F(TailTest, EndToEndASilentTailIsFetched) {
  for (int i = 11; i <= 13; ++i)
    api_.event(id_of(i), "{\"id\":\"" + id_of(i) + "\",\"object\":\"event\",\"from\":\"api\"}");
  list_after(13);

  Config rc = test_config();
  ProviderConfig pc = test_provider("stripe");
  pc.name = provider_;
  rc.providers.push_back(pc);
  Receiver receiver(rc);
  int port = receiver.start();
  auto sign = signer("stripe", kNewSecret);
  for (int i = 1; i <= 10; ++i) {
    const std::string body = "{\"id\":\"" + id_of(i) + "\",\"object\":\"event\",\"from\":\"webhook\"}";
    EXPECT_EQ(post(port, "/webhooks/" + provider_, sign->sign(body, id_of(i), unix_now())).status, 200);
  }
  receiver.stop();
  db_->exec("SELECT inbox.scan_gaps(" + p_ + ")");
  EXPECT_EQ(high(), "10");

  // The rollups see the high mark rise, then (an hour later) stay.
  db_->exec("SELECT inbox.refresh_stats()");
  EXPECT_EQ(*db_->scalar("SELECT max(max_seq) FROM inbox.stats_minute WHERE provider = " + p_), "10");
  db_->exec("UPDATE inbox.stats_minute SET minute = minute - interval '1 hour' WHERE provider = " + p_);
  db_->exec("SELECT inbox.configure_check('sequence_tail_silence', " + p_ + ", fire_after => 1, window_size => 1)");
  db_->exec("SELECT inbox.run_checks()");
  ASSERT_EQ(*db_->scalar("SELECT count(*) FROM inbox.anomalies WHERE check_name = 'sequence_tail_silence' "
                         "AND provider = " + p_ + " AND resolved_at IS NULL"),
            "1");

  const std::string dir = "/tmp/inbox-tail-e2e-" + run_id();
  std::system(("mkdir -p " + dir).c_str());
  const std::string config = dir + "/tail.toml";
  setenv("INBOX_TEST_TAIL_TOKEN", kToken, 1);
  std::ofstream(config) << "database_url = " << toml_string(worker_database_url()) << "\n"
                        << "[[provider]]\nname = " << toml_string(provider_) << "\nscheme = \"stripe\"\n"
                        << "secrets = [" << toml_string(kNewSecret) << "]\n"
                        << "[provider.backfill]\nurl = " << toml_string(api_.url_template()) << "\n"
                        << "auth_header = \"Authorization\"\nauth_value = { env = \"INBOX_TEST_TAIL_TOKEN\" }\n"
                        << "timeout_ms = 2000\n"
                        << "list_after_url = " << toml_string(api_.list_url("after={after}&cursor={cursor}")) << "\n"
                        << "list_ids_json_pointer = \"/data\"\nlist_id_json_pointer = \"/id\"\n"
                        << "list_cursor_json_pointer = \"/next\"\n";
  const std::string once = std::string(INBOX_RECEIVER_BIN) + " backfill --once --config " + config + " 2>&1";
  int code = -1;
  std::string out = run_command(once, &code);
  EXPECT_EQ(code, 0) << out;
  EXPECT_NE(out.find("\"msg\":\"backfill tail list\",\"provider\":\"" + provider_ +
                     "\",\"outcome\":\"tail_listed\",\"after\":\"tl_evt_10\""),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("\"high\":13,\"raised_by\":3"), std::string::npos) << out;
  EXPECT_NE(out.find("\"tail_raised\":3"), std::string::npos) << out;
  EXPECT_EQ(high(), "13");

  // The scan sees the tail; zero grace: requested at once.
  std::string scan = *db_->scalar("SELECT inbox.scan_gaps(" + p_ + ")::text");
  EXPECT_EQ(*db_->scalar("SELECT (" + db_->quote(scan) + "::jsonb ->> 'requested')"), "3") << scan;
  EXPECT_EQ(*db_->scalar("SELECT string_agg(external_id, ',' ORDER BY external_id) FROM inbox.gaps WHERE provider = " +
                         p_),
            "tl_evt_11,tl_evt_12,tl_evt_13");

  out = run_command(once, &code);
  EXPECT_EQ(code, 0) << out;
  EXPECT_NE(out.find("\"fetched\":3,\"not_found\":0"), std::string::npos) << out;
  EXPECT_EQ(out.find("\"msg\":\"backfill tail list\""), std::string::npos) << "same window: not listed again\n" << out;
  EXPECT_EQ(out.find("tail-token-for-tests"), std::string::npos);
  EXPECT_EQ(out.find("\"object\""), std::string::npos);
  std::system(("rm -rf " + dir).c_str());

  EXPECT_EQ(*db_->scalar("SELECT count(*) FROM inbox.events WHERE provider = " + p_), "13");
  EXPECT_EQ(*db_->scalar("SELECT string_agg(external_id, ',' ORDER BY external_id) FROM inbox.events "
                         "WHERE provider = " + p_ + " AND source = 'backfill'"),
            "tl_evt_11,tl_evt_12,tl_evt_13");
  EXPECT_EQ(*db_->scalar("SELECT count(*) FROM inbox.gaps WHERE provider = " + p_ + " AND status <> 'resolved'"), "0");
  for (const auto& c : api_.list_calls()) EXPECT_EQ(c.authorization, kToken);
}

}  // namespace
