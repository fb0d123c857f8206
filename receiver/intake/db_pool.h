// A bounded pool of database sessions for intake, each with the ingest
// statements prepared once (common/pg_session: deadlines, reconnect).
#pragma once

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "common/pg_session.h"

namespace inbox {

// One event as handed to inbox.ingest / inbox.ingest_batch.
struct Event {
  std::string provider;
  std::string external_id;
  std::string payload_json;
  std::string headers_json;
  // For the delivery log (issue 12): SHA-256 of the raw body as received
  // (32 bytes) and the scheme that verified its signature; empty: not known
  // (the database then hashes the stored JSON).
  std::string body_sha256;
  std::string scheme;
};

// The raw result of one database call; group_commit decides what it means.
struct DbCall {
  bool ok = false;
  std::vector<std::string> outcomes;  // "inserted" | "updated" | "duplicate", in input order
  std::string sqlstate;               // empty when the failure was client-side
  std::string message;                // for the log only
  bool connection_lost = false;
  bool timed_out = false;
};

class DbConnection {
 public:
  using Clock = std::chrono::steady_clock;
  explicit DbConnection(const DbSettings& settings);

  bool ensure(std::string& error) { return session_.ensure(error); }
  DbCall ingest_batch(const std::vector<const Event*>& events, Clock::time_point deadline);
  DbCall ingest_one(const Event& event, Clock::time_point deadline);
  // A round trip, for /readyz.
  bool ping(std::string& error, Clock::time_point deadline);
  // inbox.ingest_batch on empty arrays: the function exists and this role
  // may call it (what /readyz checks).
  bool probe(std::string& error, Clock::time_point deadline);

 private:
  DbCall finish(PgCall call);
  PgSession session_;
};

class DbPool {
 public:
  DbPool(DbSettings settings, std::size_t size);

  // Returns its connection to the pool when destroyed.
  class Lease {
   public:
    Lease(DbPool& pool, std::unique_ptr<DbConnection> c) : pool_(&pool), conn_(std::move(c)) {}
    Lease(Lease&&) = default;
    Lease& operator=(Lease&&) = delete;
    ~Lease() {
      if (conn_) pool_->release(std::move(conn_));
    }
    DbConnection* operator->() { return conn_.get(); }

   private:
    DbPool* pool_;
    std::unique_ptr<DbConnection> conn_;
  };

  std::optional<Lease> acquire(std::chrono::steady_clock::time_point deadline);

 private:
  void release(std::unique_ptr<DbConnection> c);

  DbSettings settings_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::unique_ptr<DbConnection>> idle_;
};

}  // namespace inbox
