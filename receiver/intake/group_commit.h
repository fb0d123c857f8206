// Group commit: requests that arrive together share one inbox.ingest_batch
// call (one statement, one transaction). Each request is answered only after
// that commit, with its own outcome.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "intake/db_pool.h"
#include "common/metrics.h"

namespace inbox {

// too_large: the database refused the payload for its size (SQLSTATE 54000,
// pg_inbox.max_payload_size): definitive, a retry can never succeed.
enum class Outcome { inserted, updated, duplicate, invalid, too_large, unavailable };

struct EventResult {
  Outcome outcome = Outcome::unavailable;
  std::string detail;  // why, for the log only (never sent to the sender)
};

struct GroupCommitOptions {
  std::size_t max_events = 64;                   // 1 = one transaction per request
  std::chrono::microseconds max_wait{200};       // gather window after the first event
  int flushers = 4;                              // concurrent transactions
  std::chrono::milliseconds deadline{5000};      // answer 503 if not committed by then
  std::size_t max_queued_bytes = 64 << 20;       // past it: 503 at once
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

  using Callback = std::function<void(EventResult)>;
  struct Slot;
  using SlotPtr = std::shared_ptr<Slot>;

  // Queues the event; `done` is called exactly once with its outcome: from
  // a flusher, at once when refused (stopping, queue full), or from the
  // deadline thread with `unavailable` when the deadline passes first
  // (whatever the database does), unless expire() was called first.
  SlotPtr submit_async(Event event, Arrival& arrival, Callback done);
  // True when the slot had no outcome yet: it never will (`done` is not
  // called), and its event is dropped.
  bool expire(const SlotPtr& slot);

  // Blocks until the event's transaction committed or failed, or the deadline.
  EventResult submit(Event event, Arrival& arrival);

  std::chrono::milliseconds deadline() const { return options_.deadline; }
  // True while the last ingest call failed for a reason not in the data
  // (database down, function missing, permissions): /readyz says 503.
  bool ingest_failing() const { return failing_.load(); }
  // Bytes of events queued and not yet taken by a flusher.
  std::size_t queued_bytes();

  // Stops taking events, commits everything already queued, joins the flushers.
  void stop();

 private:
  void flusher_loop();
  // Answers 503 for every slot past its deadline, queued or in a batch
  // whose transaction has not ended: one thread, asleep until the
  // earliest deadline (no timer per request).
  void deadline_loop();
  void deliver(const SlotPtr& slot, EventResult result);
  void run_batch(const std::vector<SlotPtr>& batch);
  EventResult run_one(DbPool::Lease& conn, const Event& e, std::chrono::steady_clock::time_point deadline);

  DbPool& pool_;
  Metrics& metrics_;
  GroupCommitOptions options_;

  std::mutex mu_;
  std::condition_variable work_cv_;    // idle flushers
  std::condition_variable gather_cv_;  // the one flusher inside its gather window
  std::deque<SlotPtr> queue_;
  std::size_t queued_bytes_ = 0;
  bool gathering_ = false;
  int committing_ = 0;  // flushers inside a transaction right now
  bool stopping_ = false;
  std::atomic<int> arriving_{0};
  std::atomic<bool> failing_{false};
  std::vector<std::thread> flushers_;
  std::vector<const std::vector<SlotPtr>*> batches_;  // being committed (mu_)
  std::condition_variable deadline_cv_;
  bool deadline_stop_ = false;
  std::thread deadline_thread_;
};

struct GroupCommit::Slot {
  Event event;
  Callback done;
  std::atomic<bool> answered{false};
  std::chrono::steady_clock::time_point enqueued;
  std::size_t bytes = 0;
  bool counted = true;  // in queued_bytes_ (guarded by the GroupCommit's mutex)
};

const char* outcome_name(Outcome o);

}  // namespace inbox
