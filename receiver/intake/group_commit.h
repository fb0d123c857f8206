// Group commit: requests that arrive together share one inbox.ingest_batch
// call (one statement, one transaction). Each request is answered only after
// that commit, with its own outcome.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "intake/db_pool.h"
#include "common/metrics.h"

namespace inbox {

enum class Outcome { inserted, updated, duplicate, invalid, unavailable };

struct EventResult {
  Outcome outcome = Outcome::unavailable;
  std::string detail;  // why, for invalid / unavailable (logged, sent to the provider)
};

struct GroupCommitOptions {
  std::size_t max_events = 64;                   // 1 = one transaction per request
  std::chrono::microseconds max_wait{200};       // gather window after the first event
  int flushers = 4;                              // concurrent transactions
  std::chrono::milliseconds deadline{5000};      // answer 503 if not committed by then
};

class GroupCommit {
 public:
  GroupCommit(DbPool& pool, Metrics& metrics, GroupCommitOptions options);
  ~GroupCommit();
  GroupCommit(const GroupCommit&) = delete;
  GroupCommit& operator=(const GroupCommit&) = delete;

  // Held by a request from routing until it submits (or is refused): while
  // any are held, a flusher may wait out the gather window for them; when
  // none are, it commits at once instead of idling.
  class Arrival {
   public:
    explicit Arrival(GroupCommit& gc);
    ~Arrival();
    Arrival(const Arrival&) = delete;
    Arrival& operator=(const Arrival&) = delete;

   private:
    friend class GroupCommit;
    GroupCommit& gc_;
    bool submitted_ = false;
  };

  // Blocks until the event's transaction committed or failed, or the deadline.
  EventResult submit(Event event, Arrival& arrival);

  // Stops taking events, commits everything already queued, joins the flushers.
  void stop();

 private:
  struct Slot {
    Event event;
    std::promise<EventResult> promise;
    std::atomic<bool> abandoned{false};
    std::chrono::steady_clock::time_point enqueued;
  };
  using SlotPtr = std::shared_ptr<Slot>;

  void flusher_loop();
  void run_batch(std::vector<SlotPtr>& batch);
  EventResult run_one(DbPool::Lease& conn, const Event& e, std::chrono::steady_clock::time_point deadline);

  DbPool& pool_;
  Metrics& metrics_;
  GroupCommitOptions options_;

  std::mutex mu_;
  std::condition_variable work_cv_;    // idle flushers
  std::condition_variable gather_cv_;  // the one flusher inside its gather window
  std::deque<SlotPtr> queue_;
  bool gathering_ = false;
  int committing_ = 0;  // flushers inside a transaction right now
  bool stopping_ = false;
  std::atomic<int> arriving_{0};
  std::vector<std::thread> flushers_;
};

const char* outcome_name(Outcome o);

}  // namespace inbox
