// Issue 4 end to end: a provider sends a numbered stream of signed
// deliveries through the real HTTP path (some dropped, some duplicated, some
// late, in shuffled order); inbox.scan_gaps finds the holes; the built
// `inbox-receiver backfill --once` fetches them from the stand-in API or
// tombstones the ids the provider never sent. At the end every sent event is
// present exactly once and a rescan flags nothing.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "intake/http_server.h"
#include "stand_in_api.h"
#include "test_support.h"

using namespace inbox;
using namespace inbox::test;

namespace {

constexpr int kStream = 120;
const std::set<int> kNeverSent = {13, 77, 101};  // 101 answers 410, the others 404
constexpr int kFlaky = 34;                       // dropped; the API answers 500 once, then 200

bool dropped(int n) { return n % 17 == 0; }
bool late(int n) { return n % 23 == 0; }
bool duplicated(int n) { return n % 5 == 0; }
std::string id_of(int n) { return "evt_" + std::to_string(n); }
std::string body_of(int n, const char* from) {
  return "{\"id\":\"" + id_of(n) + "\",\"object\":\"event\",\"n\":" + std::to_string(n) + ",\"from\":\"" + from +
         "\"}";
}

long json_int(Db& db, const std::string& json, const char* key) {
  return std::stol(*db.scalar("SELECT (" + db.quote(json) + "::jsonb ->> " + db.quote(key) + ")"));
}

TEST(BackfillEndToEnd, NumberedStreamEndsExactlyOnce) {
  REQUIRE_DATABASE();
  Db db;
  const std::string provider = "t_bfe_" + run_id();
  const std::string p = db.quote(provider);
  db.exec("SELECT inbox.register_provider(" + p + ")");
  db.exec("SELECT inbox.set_id_source(" + p + ", 'sequence', 'evt_{n}', 1, grace => '0 seconds')");

  // The provider's "get event" API knows every event it sent.
  StandInApi api;
  for (int n = 1; n <= kStream; ++n)
    if (!kNeverSent.count(n)) api.event(id_of(n), body_of(n, "api"));
  api.always(id_of(101), {410, "{\"error\":\"deleted\"}", "", 0});
  api.script(id_of(kFlaky), {{500, "{}", "", 0}});

  // The receiver, with the provider as a Stripe-style sender.
  Config rc = test_config();
  ProviderConfig pc = test_provider("stripe");
  pc.name = provider;
  rc.providers.push_back(pc);
  Receiver receiver(rc);
  int port = receiver.start();
  auto sign = signer("stripe", kNewSecret);
  auto deliver = [&](int n) {
    HttpResult r = post(port, "/webhooks/" + provider, sign->sign(body_of(n, "webhook"), id_of(n), unix_now()));
    EXPECT_EQ(r.status, 200) << id_of(n) << ": " << r.body;
  };

  // The stream: shuffled, every 17th dropped, every 23rd held back, every 5th twice.
  std::vector<int> now_list, later_list;
  int sent = 0, dropped_count = 0;
  for (int n = 1; n <= kStream; ++n) {
    if (kNeverSent.count(n)) continue;
    ++sent;
    if (dropped(n)) {
      ++dropped_count;
      continue;
    }
    auto& list = late(n) ? later_list : now_list;
    list.push_back(n);
    if (duplicated(n)) list.push_back(n);
  }
  std::mt19937 rng(42);
  std::shuffle(now_list.begin(), now_list.end(), rng);
  for (int n : now_list) deliver(n);
  int late_count = static_cast<int>(std::set<int>(later_list.begin(), later_list.end()).size());
  ASSERT_EQ(dropped_count, 7);
  ASSERT_EQ(late_count, 5);

  // First scan: the dropped, the late and the never-sent are gaps; with a
  // zero grace period they are backfill requests at once.
  std::string scan = *db.scalar("SELECT inbox.scan_gaps(" + p + ")::text");
  EXPECT_EQ(json_int(db, scan, "new_gaps"), dropped_count + late_count + 3) << scan;
  EXPECT_EQ(json_int(db, scan, "requested"), dropped_count + late_count + 3) << scan;

  // The late retries arrive (after the scan, still through HTTP): the next
  // scan closes their gaps and their requests.
  std::shuffle(later_list.begin(), later_list.end(), rng);
  for (int n : later_list) deliver(n);
  scan = *db.scalar("SELECT inbox.scan_gaps(" + p + ")::text");
  EXPECT_EQ(json_int(db, scan, "resolved"), late_count) << scan;
  receiver.stop();

  // The worker, as deployed: the built binary, --once, a login with inbox_worker only.
  const std::string dir = "/tmp/inbox-backfill-e2e-" + run_id();
  std::system(("mkdir -p " + dir).c_str());
  const std::string config = dir + "/backfill.toml";
  setenv("INBOX_TEST_BACKFILL_TOKEN", "Bearer e2e-token-for-tests", 1);
  std::ofstream(config) << "database_url = " << toml_string(worker_database_url())
                        << "\n[backfill]\nbatch_size = 4\n"
                        << "[[provider]]\nname = " << toml_string(provider) << "\nscheme = \"stripe\"\n"
                        << "secrets = [" << toml_string(kNewSecret) << "]\n"
                        << "[provider.backfill]\nurl = " << toml_string(api.url_template()) << "\n"
                        << "auth_header = \"Authorization\"\nauth_value = { env = \"INBOX_TEST_BACKFILL_TOKEN\" }\n"
                        << "timeout_ms = 2000\n";
  const std::string once = std::string(INBOX_RECEIVER_BIN) + " backfill --once --config " + config + " 2>&1";
  int code = -1;
  std::string out = run_command(once, &code);
  EXPECT_EQ(code, 0) << out;
  EXPECT_NE(out.find("\"fetched\":6,\"not_found\":3,\"retried\":1"), std::string::npos) << out;
  // No secret and no payload in the log.
  EXPECT_EQ(out.find("e2e-token-for-tests"), std::string::npos);
  EXPECT_EQ(out.find("\"object\""), std::string::npos);

  // The API was asked only for the events that never arrived.
  std::set<std::string> asked;
  for (const auto& c : api.calls()) {
    asked.insert(c.id);
    EXPECT_EQ(c.authorization, "Bearer e2e-token-for-tests");
  }
  std::set<std::string> expected;
  for (int n = 1; n <= kStream; ++n)
    if (dropped(n) || kNeverSent.count(n)) expected.insert(id_of(n));
  EXPECT_EQ(asked, expected);

  // The 500 was retried with a backoff: bring it forward instead of waiting.
  db.exec("UPDATE inbox.backfill_requests SET next_attempt_at = now() WHERE provider = " + p +
          " AND status = 'pending'");
  out = run_command(once, &code);
  EXPECT_EQ(code, 0) << out;
  EXPECT_NE(out.find("\"fetched\":1,\"not_found\":0,\"retried\":0"), std::string::npos) << out;
  // Drained: a third run has nothing to do.
  out = run_command(once, &code);
  EXPECT_NE(out.find("\"fetched\":0,\"not_found\":0,\"retried\":0,\"gave_up\":0,\"lost\":0"), std::string::npos)
      << out;
  std::system(("rm -rf " + dir).c_str());

  // Every sent event exactly once; the dropped ones say they were backfilled.
  EXPECT_EQ(*db.scalar("SELECT count(*) FROM inbox.events WHERE provider = " + p), std::to_string(sent));
  for (int n = 1; n <= kStream; ++n)
    EXPECT_EQ(db.count(provider, id_of(n)), kNeverSent.count(n) ? 0 : 1) << id_of(n);
  EXPECT_EQ(*db.scalar("SELECT string_agg(external_id, ',' ORDER BY (substr(external_id, 5))::int) "
                       "FROM inbox.events WHERE provider = " + p + " AND source = 'backfill'"),
            "evt_17,evt_34,evt_51,evt_68,evt_85,evt_102,evt_119");
  EXPECT_EQ(*db.scalar("SELECT count(*) FROM inbox.events WHERE provider = " + p +
                       " AND source = 'backfill' AND payload ->> 'from' <> 'api'"),
            "0");
  // Duplicates were deliveries, not rows.
  EXPECT_EQ(*db.scalar("SELECT delivery_count FROM inbox.events WHERE provider = " + p + " AND external_id = 'evt_10'"),
            "2");
  // The never-sent ids are tombstoned with the API's answer as the reason.
  EXPECT_EQ(*db.scalar("SELECT string_agg(external_id || ': ' || reason, '; ' ORDER BY external_id) "
                       "FROM inbox.tombstones WHERE provider = " + p),
            "evt_101: HTTP 410 from GET /v1/events/evt_101; evt_13: HTTP 404 from GET /v1/events/evt_13; "
            "evt_77: HTTP 404 from GET /v1/events/evt_77");
  EXPECT_EQ(*db.scalar("SELECT string_agg(status || '=' || n, ',' ORDER BY status) FROM "
                       "(SELECT status, count(*) n FROM inbox.backfill_requests WHERE provider = " + p +
                       " GROUP BY status) s"),
            "arrived=5,fetched=7,not_found=3");

  // A rescan of the whole stream flags nothing, and find_gaps agrees.
  db.exec("UPDATE inbox.gap_sources SET scanned_to = NULL WHERE provider = " + p);
  scan = *db.scalar("SELECT inbox.scan_gaps(" + p + ")::text");
  EXPECT_EQ(json_int(db, scan, "new_gaps"), 0) << scan;
  EXPECT_EQ(json_int(db, scan, "open"), 0) << scan;
  EXPECT_EQ(*db.scalar("SELECT count(*) FROM inbox.find_gaps(" + p + ", 1, " + std::to_string(kStream) + ")"), "0");
}

}  // namespace
