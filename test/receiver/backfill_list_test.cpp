// Listing for `listed` id sources: the list_* keys of [provider.backfill],
// and the worker paging through a stand-in "list events" API on 127.0.0.1
// into inbox.listed_ids (real database, a login with inbox_worker only).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "backfill/backfill.h"
#include "backfill/backfill_list.h"
#include "backfill/backfill_tail.h"
#include "intake/http_server.h"
#include "stand_in_api.h"
#include "test_support.h"

using namespace inbox;
using namespace inbox::test;
using namespace std::chrono_literals;

namespace {

const char* const kToken = "Bearer list-token-for-tests";

std::string list_toml(const std::string& list_keys) {
  return "database_url = \"postgresql://x@127.0.0.1/db\"\n"
         "[[provider]]\nname = \"shop\"\nscheme = \"stripe\"\nsecrets = [\"s\"]\n"
         "[provider.backfill]\nurl = \"https://api.example.com/v1/events/{id}\"\n" +
         list_keys;
}

std::string list_error(const std::string& list_keys) {
  try {
    parse_config(list_toml(list_keys));
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(ListConfig, KeysAndDefaults) {
  Config c = parse_config(list_toml(
      "list_url = \"https://api.example.com/v1/events?from={from}&to={to}&after={cursor}\"\n"
      "list_time_format = \"rfc3339\"\nlist_ids_json_pointer = \"/data\"\nlist_id_json_pointer = \"/id\"\n"
      "list_cursor_json_pointer = \"/next\"\nlist_window_s = 7200\nlist_interval_s = 600\nlist_max_pages = 5\n"));
  const BackfillApiConfig& b = *c.providers[0].backfill;
  EXPECT_EQ(b.list_time_format, "rfc3339");
  EXPECT_EQ(b.list_ids_json_pointer, "/data");
  EXPECT_EQ(b.list_id_json_pointer, "/id");
  EXPECT_EQ(b.list_cursor_json_pointer, "/next");
  EXPECT_EQ(b.list_window_s, 7200);
  EXPECT_EQ(b.list_interval_s, 600);
  EXPECT_EQ(b.list_max_pages, 5);
  // Defaults: unix seconds, the element is the id, an hour every 5 minutes, 100 pages.
  Config d = parse_config(list_toml("list_url = \"https://api.example.com/v1/events?since={from}&until={to}\"\n"));
  const BackfillApiConfig& e = *d.providers[0].backfill;
  EXPECT_EQ(e.list_time_format, "unix");
  EXPECT_EQ(e.list_id_json_pointer, "");
  EXPECT_EQ(e.list_window_s, 3600);
  EXPECT_EQ(e.list_interval_s, 300);
  EXPECT_EQ(e.list_max_pages, 100);
  // No list_url: no listing.
  EXPECT_EQ(parse_config(list_toml("")).providers[0].backfill->list_url, "");
}

TEST(ListConfig, BadKeysAreClearErrors) {
  const std::string base = "list_url = \"https://api.example.com/v1/events?key=SECRETQ";
  EXPECT_NE(list_error(base + "&to={to}\"\n").find("must contain {from} and {to}"), std::string::npos);
  EXPECT_NE(list_error(base + "&from={from}\"\n").find("must contain {from} and {to}"), std::string::npos);
  EXPECT_NE(list_error(base + "&from={from}&to={to}&c={cursor}\"\n")
                .find("has {cursor} but \"list_cursor_json_pointer\" is not set"),
            std::string::npos);
  EXPECT_NE(list_error(base + "&from={from}&to={to}\"\nlist_cursor_json_pointer = \"/next\"\n")
                .find("\"list_cursor_json_pointer\" is set but \"list_url\" has no {cursor}"),
            std::string::npos);
  EXPECT_NE(list_error("list_url = \"https://x/v1/{cursor}/events?from={from}&to={to}\"\n"
                       "list_cursor_json_pointer = \"/next\"\n")
                .find("{cursor} must be in the query"),
            std::string::npos);
  EXPECT_NE(list_error(base + "&from={from}&to={to}&id={id}\"\n").find("may not contain {id}"), std::string::npos);
  EXPECT_NE(list_error(base + "&from={from}&to={to}\"\nlist_time_format = \"iso\"\n").find("unix or rfc3339"),
            std::string::npos);
  EXPECT_NE(list_error(base + "&from={from}&to={to}\"\nlist_ids_json_pointer = \"data\"\n").find("JSON pointer"),
            std::string::npos);
  EXPECT_NE(list_error(base + "&from={from}&to={to}\"\nlist_id_json_pointer = \"id\"\n").find("JSON pointer"),
            std::string::npos);
  EXPECT_NE(list_error(base + "&from={from}&to={to}\"\nlist_window_s = 600\nlist_interval_s = 900\n")
                .find("\"list_interval_s\" must not exceed \"list_window_s\""),
            std::string::npos);
  EXPECT_NE(list_error(base + "&from={from}&to={to}\"\nlist_max_pages = 0\n").find("between 1 and 10000"),
            std::string::npos);
  EXPECT_NE(list_error("list_url = \"ftp://x/events?from={from}&to={to}\"\n").find("http:// or https://"),
            std::string::npos);
  EXPECT_NE(list_error("list_window_s = 600\n").find("\"list_window_s\" needs \"list_url\""), std::string::npos);
  // No message quotes the URL: its query may carry an API key.
  for (const std::string& keys : {base + "&to={to}\"\n", base + "&from={from}&to={to}&c={cursor}\"\n",
                                  base + "&from={from}&to={to}\"\nlist_time_format = \"iso\"\n"})
    EXPECT_EQ(list_error(keys).find("SECRETQ"), std::string::npos) << list_error(keys);
}

TEST(ListUrl, WindowAndCursorAreFilledIn) {
  const std::string t = "/v1/events?from={from}&to={to}&limit=100&after={cursor}";
  EXPECT_EQ(list_page_path(t, "1", "2", ""), "/v1/events?from=1&to=2&limit=100");
  EXPECT_EQ(list_page_path(t, "1", "2", "c/2 x"), "/v1/events?from=1&to=2&limit=100&after=c%2F2%20x");
  EXPECT_EQ(list_page_path("/e?after={cursor}&from={from}&to={to}", "a", "b", ""), "/e?from=a&to=b");
  EXPECT_EQ(format_list_time(1764511200, "unix"), "1764511200");
  EXPECT_EQ(format_list_time(1764511200, "rfc3339"), "2025-11-30T14:00:00Z");
  EXPECT_EQ(list_page_path("/e?from={from}&to={to}", format_list_time(0, "rfc3339"), "x", ""),
            "/e?from=1970-01-01T00%3A00%3A00Z&to=x");
}

class ListTest : public ::testing::Test {
 protected:
  void SetUp() override {
    REQUIRE_DATABASE();
    static std::atomic<int> n{0};
    provider_ = "t_ls_" + run_id() + "_" + std::to_string(++n);
    db_ = std::make_unique<Db>();
    p_ = db_->quote(provider_);
    db_->exec("SELECT inbox.register_provider(" + p_ + ")");
    db_->exec("SELECT inbox.set_id_source(" + p_ + ", 'listed', grace => '0 seconds')");
  }

  Config config(const std::string& query, const std::string& cursor_pointer = "/next") const {
    Config c;
    c.database_url = worker_database_url();
    ProviderConfig p = test_provider("stripe");
    p.name = provider_;
    BackfillApiConfig b;
    b.url = api_.url_template();
    b.auth_header = "Authorization";
    b.auth_value = kToken;
    b.timeout_ms = 2000;
    b.list_url = api_.list_url(query);
    b.list_ids_json_pointer = "/data";
    b.list_id_json_pointer = "/id";
    b.list_cursor_json_pointer = cursor_pointer;
    p.backfill = b;
    c.providers.push_back(p);
    return c;
  }

  BackfillStats round(const Config& c, bool expect_ok = true) {
    BackfillWorker worker(c);
    BackfillStats stats;
    std::string error;
    EXPECT_EQ(worker.round(stats, error), expect_ok) << error;
    return stats;
  }

  std::string listed() {
    return db_->scalar("SELECT string_agg(external_id, ',' ORDER BY external_id) FROM inbox.listed_ids "
                       "WHERE provider = " + p_)
        .value_or("");
  }

  // `backfill --once` (the built binary) with a config file in `dir` for
  // this provider: the stand-in's fetch API, and the list URL `list_key`
  // (list_url or list_after_url) with `query`; the token comes from the
  // environment. The caller removes `dir`.
  std::string once_command(const std::string& dir, const char* list_key, const std::string& query,
                           const char* token) const {
    std::system(("mkdir -p " + dir).c_str());
    const std::string config = dir + "/backfill.toml";
    setenv("INBOX_TEST_LIST_TOKEN", token, 1);
    std::ofstream(config) << "database_url = " << toml_string(worker_database_url()) << "\n"
                          << "[[provider]]\nname = " << toml_string(provider_) << "\nscheme = \"stripe\"\n"
                          << "secrets = [" << toml_string(kNewSecret) << "]\n"
                          << "[provider.backfill]\nurl = " << toml_string(api_.url_template()) << "\n"
                          << "auth_header = \"Authorization\"\nauth_value = { env = \"INBOX_TEST_LIST_TOKEN\" }\n"
                          << "timeout_ms = 2000\n"
                          << list_key << " = " << toml_string(api_.list_url(query)) << "\n"
                          << "list_ids_json_pointer = \"/data\"\nlist_id_json_pointer = \"/id\"\n"
                          << "list_cursor_json_pointer = \"/next\"\n";
    return std::string(INBOX_RECEIVER_BIN) + " backfill --once --config " + config + " 2>&1";
  }

  // Page 1 (no cursor) lists a and b, page 2 (cursor c2) lists c and ends.
  void two_pages() {
    api_.on_list([](const StandInApi::ListCall& call) -> StandInApi::Answer {
      auto it = call.params.find("after");
      if (it == call.params.end())
        return {200, R"({"data":[{"id":"lst_a"},{"id":"lst_b","type":"x"}],"next":"c2"})", "", 0};
      if (it->second == "c2") return {200, R"({"data":[{"id":"lst_c"}],"next":null})", "", 0};
      return {400, "{}", "", 0};
    });
  }

  std::string provider_, p_;
  std::unique_ptr<Db> db_;
  StandInApi api_;
};

std::int64_t to_int(const std::string& s) { return std::stoll(s); }

TEST_F(ListTest, TwoPagesWithACursorAreLoaded) {
  two_pages();
  const std::int64_t before = unix_now();
  BackfillStats s = round(config("from={from}&to={to}&after={cursor}"));
  const std::int64_t after = unix_now();
  EXPECT_EQ(s.listed, 3);
  EXPECT_EQ(s.list_errors, 0);
  EXPECT_EQ(listed(), "lst_a,lst_b,lst_c");

  auto calls = api_.list_calls();
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(calls[0].params.count("after"), 0u);  // first page: no cursor parameter
  EXPECT_EQ(calls[1].params.at("after"), "c2");
  for (const auto& c : calls) {
    EXPECT_EQ(c.authorization, kToken);
    // The window: [now - 3600, now] in unix seconds, the same on every page.
    const std::int64_t from = to_int(c.params.at("from")), to = to_int(c.params.at("to"));
    EXPECT_EQ(to - from, 3600);
    EXPECT_GE(to, before);
    EXPECT_LE(to, after);
    EXPECT_EQ(c.params.at("to"), calls[0].params.at("to"));
  }

  // Listing again (a new window) adds nothing new: ids already listed are skipped.
  db_->exec("DELETE FROM inbox.job_windows WHERE job = 'list:' || " + p_);
  EXPECT_EQ(round(config("from={from}&to={to}&after={cursor}")).listed, 0);
  EXPECT_EQ(*db_->scalar("SELECT count(*) FROM inbox.listed_ids WHERE provider = " + p_), "3");
}

TEST_F(ListTest, Rfc3339WindowAndIdsAsElements) {
  api_.on_list([](const StandInApi::ListCall&) -> StandInApi::Answer {
    return {200, R"({"ids":["lst_x", 42, null, {"no":"id"}, ""]})", "", 0};
  });
  Config c = config("since={from}&until={to}", "");
  c.providers[0].backfill->list_time_format = "rfc3339";
  c.providers[0].backfill->list_window_s = 86400;
  c.providers[0].backfill->list_ids_json_pointer = "/ids";
  c.providers[0].backfill->list_id_json_pointer = "";
  BackfillStats s = round(c);
  EXPECT_EQ(s.listed, 2);
  EXPECT_EQ(listed(), "42,lst_x");  // integers are ids too; null, objects and "" are skipped
  auto calls = api_.list_calls();
  ASSERT_EQ(calls.size(), 1u);
  const std::string since = calls[0].params.at("since"), until = calls[0].params.at("until");
  ASSERT_EQ(since.size(), 20u) << since;
  EXPECT_EQ(since[10], 'T');
  EXPECT_EQ(since.back(), 'Z');
  // A day apart, ending now.
  EXPECT_EQ(*db_->scalar("SELECT extract(epoch FROM " + db_->quote(until) + "::timestamptz - " + db_->quote(since) +
                         "::timestamptz)::int"),
            "86400");
  EXPECT_EQ(*db_->scalar("SELECT abs(extract(epoch FROM now() - " + db_->quote(until) + "::timestamptz)) < 10"), "t");
}

// A page that fails stops this provider's listing for the round: what came
// before it is loaded, the failure is counted, and the next round lists again.
TEST_F(ListTest, FailingPageIsCountedAndTheLoopSurvives) {
  std::atomic<int> failures{1};
  api_.on_list([&failures](const StandInApi::ListCall& call) -> StandInApi::Answer {
    if (call.params.count("after") == 0) return {200, R"({"data":[{"id":"lst_1"}],"next":"p2"})", "", 0};
    if (failures.fetch_sub(1) > 0) return {500, R"({"error":"boom"})", "", 0};
    return {200, R"({"data":[{"id":"lst_2"}]})", "", 0};
  });
  Config c = config("from={from}&to={to}&after={cursor}");
  BackfillStats s = round(c);  // the drain still runs: the round is not a database failure
  EXPECT_EQ(s.list_errors, 1);
  EXPECT_EQ(s.listed, 1);
  EXPECT_EQ(listed(), "lst_1");

  // The loop (as in serve or `backfill` without --once) lists every
  // list_interval_s: the page fails once more, then the listing succeeds.
  failures = 1;
  c.providers[0].backfill->list_interval_s = 1;
  c.backfill.poll_interval_ms = 50;
  {
    BackfillThread worker(c, nullptr);
    for (int i = 0; i < 100 && listed() != "lst_1,lst_2"; ++i) std::this_thread::sleep_for(50ms);
  }
  EXPECT_EQ(listed(), "lst_1,lst_2");
  EXPECT_GE(api_.list_calls().size(), 6u);  // 2 + (2 failing, 2 succeeding)
}

TEST_F(ListTest, BadAnswersAndPageLimitStopTheListing) {
  std::atomic<int> page{0};
  api_.on_list([&page](const StandInApi::ListCall&) -> StandInApi::Answer {
    ++page;
    // Never a last page: a new cursor every time.
    return {200, "{\"data\":[{\"id\":\"lst_p" + std::to_string(page.load()) + "\"}],\"next\":\"n" +
                     std::to_string(page.load()) + "\"}",
            "", 0};
  });
  Config c = config("from={from}&to={to}&after={cursor}");
  c.providers[0].backfill->list_max_pages = 3;
  BackfillStats s = round(c);
  EXPECT_EQ(s.listed, 3);
  EXPECT_EQ(s.list_errors, 0);  // truncated: logged as a warning, the ids are kept
  EXPECT_EQ(api_.list_calls().size(), 3u);

  // A cursor that does not move, and answers that are not lists: errors, not loops.
  for (const char* body : {R"({"data":[],"next":"same"})", "<html>", R"({"data":{"id":"x"}})", R"({"other":[]})",
                           R"({"data":[],"next":{"a":1}})"}) {
    std::string b = body;
    api_.on_list([b](const StandInApi::ListCall&) -> StandInApi::Answer { return {200, b, "", 0}; });
    size_t calls = api_.list_calls().size();
    db_->exec("DELETE FROM inbox.job_windows WHERE job = 'list:' || " + p_);  // a new window each time
    EXPECT_EQ(round(c).list_errors, 1) << body;
    EXPECT_LE(api_.list_calls().size() - calls, 2u) << body;
  }
}

TEST_F(ListTest, ProviderWithoutAListedSourceIsNotListed) {
  two_pages();
  db_->exec("SELECT inbox.set_id_source(" + p_ + ", 'sequence', 'evt_{n}')");
  BackfillStats s = round(config("from={from}&to={to}&after={cursor}"));
  EXPECT_EQ(s.listed, 0);
  EXPECT_EQ(s.list_errors, 0);
  EXPECT_EQ(api_.list_calls().size(), 0u);
}

// Issue 4 end to end with a listed source: the provider lists A..J, only
// some arrive as webhooks; `backfill --once` (the built binary, a login with
// inbox_worker only) loads the list, scan_gaps requests the missing ones,
// the next `backfill --once` fetches them. Each listed id ends present once.
TEST_F(ListTest, EndToEndListedIdsEndExactlyOnce) {
  const std::vector<std::string> all = {"A", "B", "C", "D", "E", "F", "G", "H", "I", "J"};
  const std::set<std::string> delivered = {"A", "C", "D", "G", "J"};
  auto id_of = [](const std::string& x) { return "lst_evt_" + x; };
  auto body_of = [&](const std::string& x, const char* from) {
    return "{\"id\":\"" + id_of(x) + "\",\"object\":\"event\",\"from\":\"" + from + "\"}";
  };
  std::string page1 = "{\"data\":[", page2 = "{\"data\":[";
  for (size_t i = 0; i < all.size(); ++i) {
    std::string& page = i < 6 ? page1 : page2;
    if (page.back() != '[') page += ",";
    page += "{\"id\":\"" + id_of(all[i]) + "\"}";
    api_.event(id_of(all[i]), body_of(all[i], "api"));
  }
  page1 += "],\"next\":\"p2\"}";
  page2 += "]}";
  api_.on_list([page1, page2](const StandInApi::ListCall& call) -> StandInApi::Answer {
    return {200, call.params.count("after") ? page2 : page1, "", 0};
  });

  // Some are delivered through the real HTTP path, one of them twice.
  Config rc = test_config();
  ProviderConfig pc = test_provider("stripe");
  pc.name = provider_;
  rc.providers.push_back(pc);
  Receiver receiver(rc);
  int port = receiver.start();
  auto sign = signer("stripe", kNewSecret);
  for (const std::string& x : delivered) {
    HttpResult r = post(port, "/webhooks/" + provider_, sign->sign(body_of(x, "webhook"), id_of(x), unix_now()));
    EXPECT_EQ(r.status, 200) << r.body;
  }
  post(port, "/webhooks/" + provider_, sign->sign(body_of("A", "webhook"), id_of("A"), unix_now()));
  receiver.stop();

  const std::string dir = "/tmp/inbox-list-e2e-" + run_id();
  const std::string once = once_command(dir, "list_url", "from={from}&to={to}&after={cursor}", kToken);
  int code = -1;
  std::string out = run_command(once, &code);
  EXPECT_EQ(code, 0) << out;
  EXPECT_NE(out.find("\"msg\":\"backfill list\",\"provider\":\"" + provider_ + "\",\"outcome\":\"listed\""),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("\"fetched\":0,"), std::string::npos) << out;
  EXPECT_NE(out.find("\"listed\":10,\"list_errors\":0"), std::string::npos) << out;

  // The scan finds the five that never arrived; zero grace: requested at once.
  std::string scan = *db_->scalar("SELECT inbox.scan_gaps(" + p_ + ")::text");
  EXPECT_EQ(*db_->scalar("SELECT (" + db_->quote(scan) + "::jsonb ->> 'requested')"), "5") << scan;

  out = run_command(once, &code);
  EXPECT_EQ(code, 0) << out;
  EXPECT_NE(out.find("\"fetched\":5,\"not_found\":0"), std::string::npos) << out;
  EXPECT_NE(out.find("\"listed\":0,\"list_errors\":0"), std::string::npos) << out;
  // No secret and no payload in the log.
  EXPECT_EQ(out.find("list-token-for-tests"), std::string::npos);
  EXPECT_EQ(out.find("\"object\""), std::string::npos);

  // The second run was in the same listing window: it did not list again.
  EXPECT_EQ(out.find("\"msg\":\"backfill list\""), std::string::npos) << out;
  // A listing that fails (in a new window) is one log line, counted; the run still exits 0.
  db_->exec("DELETE FROM inbox.job_windows WHERE job = 'list:' || " + p_);
  api_.on_list([](const StandInApi::ListCall&) -> StandInApi::Answer { return {503, "{\"secret\":\"body\"}", "", 0}; });
  out = run_command(once, &code);
  EXPECT_EQ(code, 0) << out;
  EXPECT_NE(out.find("\"outcome\":\"list_error\""), std::string::npos) << out;
  EXPECT_NE(out.find("\"error\":\"HTTP 503 from GET /v1/events (page 1)\""), std::string::npos) << out;
  EXPECT_NE(out.find("\"list_errors\":1"), std::string::npos) << out;
  EXPECT_EQ(out.find("\"secret\""), std::string::npos) << out;
  EXPECT_EQ(out.find("list-token-for-tests"), std::string::npos);
  std::system(("rm -rf " + dir).c_str());

  for (const std::string& x : all) EXPECT_EQ(db_->count(provider_, id_of(x)), 1) << x;
  EXPECT_EQ(*db_->scalar("SELECT count(*) FROM inbox.events WHERE provider = " + p_), "10");
  EXPECT_EQ(*db_->scalar("SELECT string_agg(external_id, ',' ORDER BY external_id) FROM inbox.events "
                         "WHERE provider = " + p_ + " AND source = 'backfill'"),
            "lst_evt_B,lst_evt_E,lst_evt_F,lst_evt_H,lst_evt_I");
  for (const auto& c : api_.list_calls()) EXPECT_EQ(c.authorization, kToken);
  // Nothing is left: a rescan finds no gap.
  scan = *db_->scalar("SELECT inbox.scan_gaps(" + p_ + ")::text");
  EXPECT_EQ(*db_->scalar("SELECT (" + db_->quote(scan) + "::jsonb ->> 'open')"), "0") << scan;
  EXPECT_EQ(*db_->scalar("SELECT count(*) FROM inbox.find_gaps(" + p_ + ", now() - interval '1 hour', now() + "
                         "interval '1 minute')"),
            "0");
}

// Replicas: every worker lists on its own timer, but only the one that
// claims the provider's window in the database calls the list API.
TEST_F(ListTest, OnlyOneReplicaListsPerWindow) {
  two_pages();
  Config c = config("from={from}&to={to}&after={cursor}");
  std::vector<std::unique_ptr<BackfillWorker>> replicas;
  for (int i = 0; i < 3; ++i) replicas.push_back(std::make_unique<BackfillWorker>(c));
  BackfillStats total;
  for (auto& w : replicas) {
    BackfillStats stats;
    std::string error;
    EXPECT_TRUE(w->round(stats, error)) << error;
    total.listed += stats.listed;
  }
  EXPECT_EQ(total.listed, 3);
  EXPECT_EQ(api_.list_calls().size(), 2u) << "one listing of two pages, not three";
  // The next window is listed again, by one of them.
  db_->exec("DELETE FROM inbox.job_windows WHERE job = 'list:' || " + p_);
  for (int i = 0; i < 3; ++i) {
    BackfillWorker fresh(c);  // due at once (a worker lists on its first round)
    BackfillStats stats;
    std::string error;
    EXPECT_TRUE(fresh.round(stats, error)) << error;
  }
  EXPECT_EQ(api_.list_calls().size(), 4u);
}


// Tail listing for `sequence` id sources: the list_after_url key, and the
// worker asking the stand-in list API for the ids after the highest one
// received while sequence_tail_silence fires, so a tail that never arrived
// is fetched (issue 8).

const char* const kTailToken = "Bearer tail-token-for-tests";

TEST(TailConfig, KeysAndSharedListKeys) {
  Config c = parse_config(list_toml(
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
      list_toml("list_url = \"https://api.example.com/v1/events?from={from}&to={to}&c={cursor}\"\n"
                "list_after_url = \"https://api.example.com/v1/events?after={after}&c={cursor}\"\n"
                "list_cursor_json_pointer = \"/next\"\n"));
  EXPECT_NE(both.providers[0].backfill->list_after_url, "");
  EXPECT_EQ(parse_config(list_toml("")).providers[0].backfill->list_after_url, "");
}

TEST(TailConfig, BadKeysAreClearErrors) {
  const std::string base = "list_after_url = \"https://api.example.com/v1/events?key=SECRETQ";
  EXPECT_NE(list_error(base + "&x=1\"\n").find("must contain {after} or {after_number}"), std::string::npos);
  EXPECT_NE(list_error(base + "&a={after}&from={from}\"\n").find("may not contain {from}"), std::string::npos);
  EXPECT_NE(list_error(base + "&a={after}&id={id}\"\n").find("may not contain {id}"), std::string::npos);
  EXPECT_NE(list_error(base + "&a={after}&c={cursor}\"\n")
                .find("\"list_after_url\" has {cursor} but \"list_cursor_json_pointer\" is not set"),
            std::string::npos);
  EXPECT_NE(list_error(base + "&a={after}\"\nlist_cursor_json_pointer = \"/next\"\n")
                .find("\"list_cursor_json_pointer\" is set but \"list_after_url\" has no {cursor}"),
            std::string::npos);
  EXPECT_NE(list_error("list_after_url = \"https://x/v1/{cursor}/events?a={after}\"\nlist_cursor_json_pointer = \"/n\"\n")
                .find("{cursor} must be in the query of \"list_after_url\""),
            std::string::npos);
  EXPECT_NE(list_error("list_after_url = \"ftp://x/events?a={after}\"\n").find("http:// or https://"),
            std::string::npos);
  // The time-window keys belong to list_url; the shared ones need either URL.
  EXPECT_NE(list_error(base + "&a={after}\"\nlist_window_s = 600\n").find("\"list_window_s\" needs \"list_url\""),
            std::string::npos);
  EXPECT_NE(list_error(base + "&a={after}\"\nlist_time_format = \"unix\"\n").find("needs \"list_url\""),
            std::string::npos);
  EXPECT_NE(list_error("list_max_pages = 3\n").find("\"list_max_pages\" needs \"list_url\" or \"list_after_url\""),
            std::string::npos);
  EXPECT_NE(list_error(base + "&a={after}\"\nlist_interval_s = 5\n").find("between 10 and 86400"), std::string::npos);
  // No message quotes the URL: its query may carry an API key.
  for (const std::string& keys : {base + "&x=1\"\n", base + "&a={after}&c={cursor}\"\n",
                                  base + "&a={after}&from={from}\"\n"})
    EXPECT_EQ(list_error(keys).find("SECRETQ"), std::string::npos) << list_error(keys);
}

TEST(TailUrl, AfterAndCursorAreFilledIn) {
  const std::string t = "/v1/events?after={after}&n={after_number}&limit=2&cursor={cursor}";
  EXPECT_EQ(tail_page_path(t, "evt_10", "10", ""), "/v1/events?after=evt_10&n=10&limit=2");
  EXPECT_EQ(tail_page_path(t, "ord/0 1", "1", "c 2"), "/v1/events?after=ord%2F0%201&n=1&limit=2&cursor=c%202");
  EXPECT_EQ(tail_page_path("/v1/shops/{after_number}/events", "evt_7", "7", ""), "/v1/shops/7/events");
}

// The tail of a `sequence` source: the same provider and stand-in API as
// ListTest, with a sequence source and list_after_url instead of list_url.
class TailTest : public ListTest {
 protected:
  void SetUp() override {
    ListTest::SetUp();
    if (IsSkipped()) return;
    db_->exec("SELECT inbox.set_id_source(" + p_ + ", 'sequence', 'tl_evt_{n}', grace => '0 seconds')");
  }

  std::string id_of(int n) const { return "tl_evt_" + std::to_string(n); }

  Config tail_config() const {
    Config c = config("");
    BackfillApiConfig& b = *c.providers[0].backfill;
    b.list_url.clear();
    b.list_after_url = api_.list_url("after={after}&limit=2&cursor={cursor}");
    b.auth_value = kTailToken;
    return c;
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
};

TEST_F(TailTest, QuietCheckListsNothing) {
  received_one_to_ten();
  list_after(13);
  BackfillStats s = round(tail_config());
  EXPECT_EQ(s.tail_raised, 0);
  EXPECT_EQ(s.list_errors, 0);
  EXPECT_EQ(api_.list_calls().size(), 0u) << "the tail is listed only while its check fires";
  EXPECT_EQ(high(), "10");
}

TEST_F(TailTest, FiringCheckRaisesTheHighMarkAcrossPages) {
  received_one_to_ten();
  firing();
  list_after(15);
  BackfillStats s = round(tail_config());
  EXPECT_EQ(s.tail_raised, 5);
  EXPECT_EQ(s.list_errors, 0);
  EXPECT_EQ(high(), "15");
  auto calls = api_.list_calls();
  ASSERT_EQ(calls.size(), 3u);  // 11-12, 13-14, 15
  EXPECT_EQ(calls[0].params.at("after"), "tl_evt_10");
  EXPECT_EQ(calls[0].params.count("cursor"), 0u);  // first page: no cursor parameter
  EXPECT_EQ(calls[1].params.at("cursor"), "tl_evt_12");
  for (const auto& c : calls) EXPECT_EQ(c.authorization, kTailToken);
  // Within the same window no replica lists again.
  EXPECT_EQ(round(tail_config()).tail_raised, 0);
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
  BackfillStats s = round(tail_config());
  EXPECT_EQ(s.list_errors, 1);
  EXPECT_EQ(s.tail_raised, 2);  // the ids of the page before the failure count
  EXPECT_EQ(high(), "12");
}

// Replicas: only the one that claims the window calls the list API.
TEST_F(TailTest, OnlyOneReplicaListsPerWindow) {
  received_one_to_ten();
  firing();
  list_after(11);
  Config c = tail_config();
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
  const std::string once = once_command(dir, "list_after_url", "after={after}&cursor={cursor}", kTailToken);
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
  for (const auto& c : api_.list_calls()) EXPECT_EQ(c.authorization, kTailToken);
}

}  // namespace
