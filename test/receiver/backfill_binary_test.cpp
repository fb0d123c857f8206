// The built binary: check-config names what is wrong with a backfill table,
// and `backfill` without --once polls until SIGTERM and exits cleanly.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <thread>

#include "stand_in_api.h"
#include "test_support.h"

using namespace inbox::test;
using namespace std::chrono_literals;

namespace {

class BackfillBinaryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = "/tmp/inbox-backfill-bin-" + run_id();
    std::system(("mkdir -p " + dir_).c_str());
  }
  void TearDown() override { std::system(("rm -rf " + dir_).c_str()); }

  std::string write(const std::string& name, const std::string& backfill_table, const std::string& db_url,
                    const std::string& top = "") {
    std::string path = dir_ + "/" + name;
    std::ofstream(path) << "database_url = " << toml_string(db_url) << "\n"
                        << top << "[[provider]]\nname = " << toml_string(provider_) << "\nscheme = \"stripe\"\n"
                        << "secrets = [\"s\"]\n"
                        << backfill_table;
    return path;
  }

  std::string check_config(const std::string& path, int* rc) {
    return run_command(std::string(INBOX_RECEIVER_BIN) + " check-config --config " + path + " 2>&1", rc);
  }

  std::string dir_;
  std::string provider_ = "t_bfb_" + run_id();
};

TEST_F(BackfillBinaryTest, CheckConfigNamesBackfillErrors) {
  int rc = -1;
  std::string out = check_config(write("no-url.toml", "[provider.backfill]\nauth_header = \"A\"\nauth_value = \"v\"\n",
                                       "postgresql://x@127.0.0.1/db"),
                                 &rc);
  EXPECT_EQ(rc, 1);
  EXPECT_NE(out.find("provider \"" + provider_ + "\" [backfill]: \"url\" is required"), std::string::npos) << out;

  out = check_config(write("no-id.toml", "[provider.backfill]\nurl = \"https://api.example.com/v1/events\"\n",
                           "postgresql://x@127.0.0.1/db"),
                     &rc);
  EXPECT_EQ(rc, 1);
  EXPECT_NE(out.find("\"url\" must contain {id}"), std::string::npos) << out;

  out = check_config(write("ok.toml",
                           "[provider.backfill]\nurl = \"https://api.example.com/v1/events/{id}?key=k\"\n"
                           "auth_header = \"Authorization\"\nauth_value = \"Bearer sk_secret_value\"\n",
                           "postgresql://x@127.0.0.1/db"),
                     &rc);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("backfill " + provider_ + ": GET https://api.example.com/v1/events/{id} with header Authorization"),
            std::string::npos)
      << out;
  EXPECT_EQ(out.find("sk_secret_value"), std::string::npos);
  EXPECT_EQ(out.find("key=k"), std::string::npos);
}

TEST_F(BackfillBinaryTest, PollsUntilSigterm) {
  REQUIRE_DATABASE();
  Db db;
  db.exec("SELECT inbox.register_provider(" + db.quote(provider_) + ")");
  StandInApi api;
  api.event("evt_poll", "{\"id\":\"evt_poll\"}");
  std::string config = write("poll.toml",
                             "[provider.backfill]\nurl = " + toml_string(api.url_template()) + "\n",
                             worker_database_url(), "[backfill]\npoll_interval_ms = 50\n");
  std::string log = dir_ + "/backfill.log";
  pid_t pid = fork();
  if (pid == 0) {
    if (!freopen(log.c_str(), "w", stdout)) _exit(126);
    execl(INBOX_RECEIVER_BIN, INBOX_RECEIVER_BIN, "backfill", "--config", config.c_str(), nullptr);
    _exit(127);
  }
  // A request appears after the worker started: the next poll takes it.
  std::this_thread::sleep_for(200ms);
  db.exec("INSERT INTO inbox.backfill_requests (provider, external_id) VALUES (" + db.quote(provider_) +
          ", 'evt_poll')");
  for (int i = 0; i < 100 && db.count(provider_, "evt_poll") == 0; ++i) std::this_thread::sleep_for(50ms);
  EXPECT_EQ(db.count(provider_, "evt_poll"), 1);

  int status = terminate_and_wait(pid);
  ASSERT_NE(status, -1) << "no exit within 10 s of SIGTERM";
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  std::string text = read_file(log);
  EXPECT_NE(text.find("\"outcome\":\"fetched\""), std::string::npos) << text;
  EXPECT_NE(text.find("\"msg\":\"stopped\""), std::string::npos) << text;
}

}  // namespace
