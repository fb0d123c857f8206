#include "intake/group_commit.h"

#include "common/log.h"

#include <algorithm>

namespace inbox {
namespace {

using Clock = std::chrono::steady_clock;

Outcome parse_outcome(const std::string& s) {
  if (s == "inserted") return Outcome::inserted;
  if (s == "updated") return Outcome::updated;
  if (s == "duplicate") return Outcome::duplicate;
  return Outcome::unavailable;
}

// Errors that say nothing about the data: the same call may work later.
bool transient(const DbCall& c) {
  if (c.connection_lost || c.sqlstate.size() != 5) return true;
  std::string cls = c.sqlstate.substr(0, 2);
  return cls == "08" || cls == "40" || cls == "53" || cls == "55" || cls == "57" || cls == "58" ||
         cls == "XX" || c.sqlstate == "26000";
}

// Errors caused by this one event's data: 22 data exception, 23 constraint.
bool bad_data(const DbCall& c) {
  return c.sqlstate.rfind("22", 0) == 0 || c.sqlstate.rfind("23", 0) == 0;
}

// What a failed call means for its one event. 54000 (program limit: the
// payload over pg_inbox.max_payload_size) is definitive: 413, never 503.
// 42704 unknown provider: the config names a provider the database has not
// registered. Not the sender's fault; 503 so nothing is lost meanwhile.
EventResult classify(const DbCall& c) {
  std::string why = (c.sqlstate.empty() ? std::string() : c.sqlstate + ": ") + c.message;
  if (c.sqlstate == "54000") return {Outcome::too_large, why};
  if (bad_data(c)) return {Outcome::invalid, why};
  return {Outcome::unavailable, why};
}

}  // namespace

const char* outcome_name(Outcome o) {
  switch (o) {
    case Outcome::inserted: return "inserted";
    case Outcome::updated: return "updated";
    case Outcome::duplicate: return "duplicate";
    case Outcome::invalid: return "invalid";
    case Outcome::too_large: return "too_large";
    case Outcome::unavailable: return "unavailable";
  }
  return "unknown";
}

GroupCommit::Arrival::Arrival(GroupCommit& gc) : gc_(gc) { gc_.arriving_.fetch_add(1); }

GroupCommit::Arrival::~Arrival() {
  if (submitted_) return;
  // Refused before submitting: a flusher waiting for us should stop waiting.
  if (gc_.arriving_.fetch_sub(1) == 1) {
    std::lock_guard<std::mutex> lock(gc_.mu_);
    if (gc_.gathering_) gc_.gather_cv_.notify_one();
  }
}

GroupCommit::GroupCommit(DbPool& pool, Metrics& metrics, GroupCommitOptions options)
    : pool_(pool), metrics_(metrics), options_(options) {
  for (int i = 0; i < options_.flushers; ++i) flushers_.emplace_back([this] { flusher_loop(); });
  deadline_thread_ = std::thread([this] { deadline_loop(); });
}

GroupCommit::~GroupCommit() { stop(); }

void GroupCommit::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  work_cv_.notify_all();
  gather_cv_.notify_all();
  for (auto& t : flushers_)
    if (t.joinable()) t.join();
  {
    std::lock_guard<std::mutex> lock(mu_);
    deadline_stop_ = true;
  }
  deadline_cv_.notify_all();
  if (deadline_thread_.joinable()) deadline_thread_.join();
}

void GroupCommit::deadline_loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!deadline_stop_) {
    auto now = Clock::now();
    // Asleep at most one deadline: an event queued meanwhile is due no
    // earlier than that, so no submit ever has to wake this thread.
    auto next = now + std::max(options_.deadline, std::chrono::milliseconds(1));
    std::vector<SlotPtr> due;
    // The queue is in arrival order: the due events are a prefix. They
    // leave it here, so no flusher takes them.
    while (!queue_.empty() && queue_.front()->enqueued + options_.deadline <= now) {
      SlotPtr s = std::move(queue_.front());
      queue_.pop_front();
      if (s->counted) {
        queued_bytes_ -= s->bytes;
        s->counted = false;
      }
      s->event = Event{};  // nobody else holds it now
      due.push_back(std::move(s));
    }
    if (!queue_.empty()) next = std::min(next, queue_.front()->enqueued + options_.deadline);
    for (const std::vector<SlotPtr>* batch : batches_)
      for (const SlotPtr& s : *batch) {
        if (s->answered.load()) continue;
        auto d = s->enqueued + options_.deadline;
        if (d <= now) due.push_back(s);
        else next = std::min(next, d);
      }
    if (due.empty()) {
      deadline_cv_.wait_until(lock, next);
      continue;
    }
    lock.unlock();
    for (const SlotPtr& s : due) {
      if (!s->answered.exchange(true)) {
        Callback done = std::move(s->done);
        done({Outcome::unavailable, "database did not commit within the deadline"});
      }
    }
    lock.lock();
  }
}

GroupCommit::SlotPtr GroupCommit::submit_async(Event event, Arrival& arrival, Callback done) {
  auto slot = std::make_shared<Slot>();
  slot->bytes = event.provider.size() + event.external_id.size() + event.payload_json.size() +
                event.headers_json.size() + sizeof(Slot);
  slot->event = std::move(event);
  slot->done = std::move(done);
  slot->enqueued = Clock::now();
  std::string refused;
  {
    std::lock_guard<std::mutex> lock(mu_);
    arrival.submitted_ = true;
    int still_arriving = arriving_.fetch_sub(1) - 1;
    if (stopping_) {
      refused = "shutting down";
    } else if (queued_bytes_ + slot->bytes > options_.max_queued_bytes) {
      refused = "queue full";  // the database is behind: refuse now, not at the deadline
    } else {
      queued_bytes_ += slot->bytes;
      queue_.push_back(slot);
      if (!gathering_) work_cv_.notify_one();
      else if (queue_.size() >= options_.max_events || still_arriving == 0) gather_cv_.notify_one();
    }
  }
  if (!refused.empty()) {
    slot->counted = false;
    deliver(slot, {Outcome::unavailable, refused});
  }
  return slot;
}

bool GroupCommit::expire(const SlotPtr& slot) {
  if (slot->answered.exchange(true)) return false;
  std::lock_guard<std::mutex> lock(mu_);
  if (slot->counted) {  // still queued: give its memory back now
    queued_bytes_ -= slot->bytes;
    slot->counted = false;
    slot->event = Event{};
  }
  return true;
}

void GroupCommit::deliver(const SlotPtr& slot, EventResult result) {
  if (slot->answered.exchange(true)) return;
  Callback done = std::move(slot->done);
  done(std::move(result));
}

std::size_t GroupCommit::queued_bytes() {
  std::lock_guard<std::mutex> lock(mu_);
  return queued_bytes_;
}

EventResult GroupCommit::submit(Event event, Arrival& arrival) {
  auto promise = std::make_shared<std::promise<EventResult>>();
  auto future = promise->get_future();
  SlotPtr slot = submit_async(std::move(event), arrival, [promise](EventResult r) { promise->set_value(std::move(r)); });
  if (future.wait_until(slot->enqueued + options_.deadline) != std::future_status::ready && expire(slot))
    return {Outcome::unavailable, "database did not commit within the deadline"};
  return future.get();
}

void GroupCommit::flusher_loop() {
  for (;;) {
    std::vector<SlotPtr> batch;
    {
      std::unique_lock<std::mutex> lock(mu_);
      work_cv_.wait(lock, [&] { return stopping_ || (!queue_.empty() && !gathering_); });
      if (queue_.empty()) return;  // stopping, and nothing left to commit
      // Gather: at most max_wait after the oldest event, at most max_events,
      // and only while more are likely: requests are on their way, or another
      // transaction is committing (its requests come back as new deliveries).
      // Alone and idle, an event is committed at once.
      gathering_ = true;
      auto until = queue_.front()->enqueued + options_.max_wait;
      while (!stopping_ && queue_.size() < options_.max_events &&
             (arriving_.load() > 0 || committing_ > 0) && Clock::now() < until)
        gather_cv_.wait_until(lock, until);
      std::size_t n = std::min(queue_.size(), options_.max_events);
      batch.assign(std::make_move_iterator(queue_.begin()),
                   std::make_move_iterator(queue_.begin() + static_cast<long>(n)));
      queue_.erase(queue_.begin(), queue_.begin() + static_cast<long>(n));
      for (auto& s : batch)
        if (s->counted) {
          queued_bytes_ -= s->bytes;
          s->counted = false;
        }
      gathering_ = false;
      ++committing_;
      batches_.push_back(&batch);  // the deadline thread watches it from now on
      if (!queue_.empty()) work_cv_.notify_one();
    }
    run_batch(batch);
    std::lock_guard<std::mutex> lock(mu_);
    batches_.erase(std::find(batches_.begin(), batches_.end(), &batch));
    // The last transaction ended and nobody is arriving: stop gathering.
    if (--committing_ == 0 && gathering_ && arriving_.load() == 0) gather_cv_.notify_one();
  }
}

EventResult GroupCommit::run_one(DbPool::Lease& conn, const Event& e, Clock::time_point deadline) {
  DbCall c = conn->ingest_one(e, deadline);
  if (c.ok && c.outcomes.size() == 1) return {parse_outcome(c.outcomes[0]), {}};
  metrics_.db_error("event");
  return classify(c);
}

// `batch` stays as it is until the flusher unregisters it: the deadline
// thread reads it meanwhile.
void GroupCommit::run_batch(const std::vector<SlotPtr>& batch) {
  std::vector<SlotPtr> live;
  for (const auto& s : batch)
    if (!s->answered.load()) live.push_back(s);
  if (live.empty()) return;

  auto fail_all = [&](const std::string& why) {
    failing_ = true;
    for (auto& s : live) deliver(s, {Outcome::unavailable, why});
  };
  const auto deadline = live.front()->enqueued + options_.deadline;
  auto lease = pool_.acquire(deadline);
  if (!lease) return fail_all("no database connection free within the deadline");
  std::string error;
  if (!(*lease)->ensure(error)) {
    metrics_.db_error("connect");
    return fail_all("database unreachable");
  }

  metrics_.batch(live.size());
  std::vector<const Event*> events;
  events.reserve(live.size());
  for (auto& s : live) events.push_back(&s->event);

  auto call = [&]() {
    if (events.size() == 1) return (*lease)->ingest_one(*events[0], deadline);
    return (*lease)->ingest_batch(events, deadline);
  };
  DbCall c = call();
  // A connection that died while idle (database restarted) fails its first
  // call; the upsert is idempotent, so one retry on a fresh connection is safe.
  if (!c.ok && c.connection_lost && !c.timed_out && Clock::now() < deadline && (*lease)->ensure(error))
    c = call();

  if (c.ok && c.outcomes.size() == live.size()) {
    failing_ = false;
    for (std::size_t i = 0; i < live.size(); ++i)
      deliver(live[i], {parse_outcome(c.outcomes[i]), {}});
    return;
  }
  metrics_.db_error("batch");
  if (c.ok || transient(c)) {
    log_line("warn", "ingest failed", {{"sqlstate", c.sqlstate}, {"error", c.message}});
    return fail_all((c.sqlstate.empty() ? std::string() : c.sqlstate + ": ") + c.message);
  }
  // One bad event fails the whole statement: retry them one by one so the
  // others still land and only the bad one is refused.
  if (live.size() == 1) {
    deliver(live[0], classify(c));
    return;
  }
  for (auto& s : live) deliver(s, run_one(*lease, s->event, deadline));
}

}  // namespace inbox
