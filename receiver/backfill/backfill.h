// The backfill worker: lists the ids of `listed` id sources (providers with
// a list_url) and the missing tail of `sequence` sources (list_after_url,
// while their sequence_tail_silence check fires), and drains
// inbox.backfill_requests for every provider with a [provider.backfill]
// table, one provider API call per request.
#pragma once

#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "backfill/backfill_fetch.h"
#include "backfill/backfill_list.h"
#include "backfill/backfill_queue.h"
#include "backfill/backfill_tail.h"
#include "common/config.h"
#include "common/metrics.h"

namespace inbox {

// A stop request that a sleeping loop wakes up for.
class StopSignal {
 public:
  void stop();
  bool stopped() const;
  // Sleeps up to `d`; true when stopped meanwhile (or before).
  bool wait_for(std::chrono::milliseconds d);

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stopped_ = false;
};

// What one drain did, by report outcome.
struct BackfillStats {
  long long fetched = 0;    // backfill_fetched: inserted, updated or duplicate
  long long not_found = 0;  // backfill_not_found: tombstoned (or closed as arrived)
  long long retried = 0;    // backfill_failed: 'retry'
  long long gave_up = 0;    // backfill_failed: 'gave_up'
  long long lost = 0;       // the lease was no longer ours: nothing changed
  long long handled() const { return fetched + not_found + retried + gave_up + lost; }
  // Listings (list_url): ids new in inbox.listed_ids, and listings that failed
  // (tail listings included).
  long long listed = 0;
  long long list_errors = 0;
  // Tail listings (list_after_url): how far they raised high marks in all.
  long long tail_raised = 0;
};

class BackfillWorker {
 public:
  // Throws ConfigError when no provider has a backfill API.
  explicit BackfillWorker(const Config& config, Metrics* metrics = nullptr);

  // Handles every due request of the configured providers, once each at
  // most; false (error set) when the database failed.
  bool drain(BackfillStats& stats, std::string& error, const StopSignal* stop = nullptr);

  // Lists every provider with a list_url whose list_interval_s has passed
  // (all of them on the first call), and the tail of every provider with a
  // list_after_url whose tail check fires; false (error set) when the
  // database failed. A failing page is logged and counted, not an error here.
  bool list_due(BackfillStats& stats, std::string& error, const StopSignal* stop = nullptr);

  // One round: list_due, then drain (also when listing failed).
  bool round(BackfillStats& stats, std::string& error, const StopSignal* stop = nullptr);

  // Rounds, with poll_interval_ms of sleep between them, until stopped.
  void run(StopSignal& stop);

 private:
  bool handle(const BackfillClaim& claim, BackfillFetcher& fetcher, BackfillStats& stats,
              std::string& error);

  BackfillConfig settings_;
  BackfillQueue queue_;
  std::map<std::string, std::unique_ptr<BackfillFetcher>> fetchers_;  // by provider name
  std::map<std::string, std::unique_ptr<BackfillLister>> listers_;    // those with a list_url
  std::map<std::string, std::unique_ptr<TailLister>> tail_listers_;   // those with a list_after_url
  Metrics* metrics_;
};

// The worker on its own thread (inside serve): started here, stopped and
// joined by the destructor.
class BackfillThread {
 public:
  BackfillThread(const Config& config, Metrics* metrics);
  ~BackfillThread();
  BackfillThread(const BackfillThread&) = delete;
  BackfillThread& operator=(const BackfillThread&) = delete;

 private:
  BackfillWorker worker_;
  StopSignal stop_;
  std::thread thread_;
};

// The settings the worker's database connection uses.
DbSettings backfill_db_settings(const Config& config);

}  // namespace inbox
