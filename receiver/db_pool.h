// A bounded pool of libpq connections, each with the ingest statements
// prepared once. Connections that break are dropped and re-made on next use.
#pragma once

#include <libpq-fe.h>

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace inbox {

// One event as handed to inbox.ingest / inbox.ingest_batch.
struct Event {
  std::string provider;
  std::string external_id;
  std::string payload_json;
  std::string headers_json;
};

// The raw result of one database call; group_commit decides what it means.
struct DbCall {
  bool ok = false;
  std::vector<std::string> outcomes;  // "inserted" | "updated" | "duplicate", in input order
  std::string sqlstate;               // empty when the failure was client-side
  std::string message;
  bool connection_lost = false;
};

struct DbSettings {
  std::string url;  // libpq URI or key=value string; empty = PG* environment
  int connect_timeout_s = 3;
  int statement_timeout_ms = 3000;
};

class DbConnection {
 public:
  explicit DbConnection(const DbSettings& settings) : settings_(settings) {}

  // Connects and prepares the statements if needed; false (with a reason) if
  // the database cannot be reached. Retries at most every 200 ms.
  bool ensure(std::string& error);
  DbCall ingest_batch(const std::vector<const Event*>& events);
  DbCall ingest_one(const Event& event);
  // A round trip, for /readyz.
  bool ping(std::string& error);

 private:
  struct PgConnClose {
    void operator()(PGconn* c) const { PQfinish(c); }
  };
  DbCall finish(PGresult* res);

  const DbSettings& settings_;
  std::unique_ptr<PGconn, PgConnClose> conn_;
  std::chrono::steady_clock::time_point last_failure_{};
  std::string last_error_;
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
