#include "intake/db_pool.h"

#include "intake/signature.h"

namespace inbox {
namespace {

// With the raw body's digest and the signature scheme for the delivery log
// (extension 0.2.0: upgrade the extension before the sidecar).
const PgStatement kIngestBatch = {
    "inbox_ingest_batch",
    "SELECT inbox.ingest_batch($1::text[], $2::text[], $3::jsonb[], $4::jsonb[], 'webhook', $5::bytea[], $6::text[])"};
const PgStatement kIngestOne = {
    "inbox_ingest", "SELECT inbox.ingest($1, $2, $3::jsonb, $4::jsonb, 'webhook', $5::bytea, $6)"};

// A bytea in hex input form, "\x..."; empty for an empty digest.
std::string bytea_hex(const std::string& bytes) { return bytes.empty() ? "" : "\\x" + hex_encode(bytes); }

// An array literal whose empty strings are NULL (the digest and scheme).
template <typename Get>
std::string array_with_nulls(const std::vector<const Event*>& events, Get get) {
  std::string out = "{";
  for (size_t i = 0; i < events.size(); ++i) {
    if (i > 0) out.push_back(',');
    std::string value = get(*events[i]);
    if (value.empty()) {
      out += "NULL";
      continue;
    }
    out.push_back('"');
    for (char c : value) {
      if (c == '"' || c == '\\') out.push_back('\\');
      out.push_back(c);
    }
    out.push_back('"');
  }
  out.push_back('}');
  return out;
}

// Outcomes are plain words, so the text[] output needs no unquoting.
std::vector<std::string> parse_text_array(const char* s) {
  std::vector<std::string> out;
  std::string cur;
  for (const char* p = s; *p; ++p) {
    if (*p == '{' || *p == '"') continue;
    if (*p == ',' || *p == '}') {
      out.push_back(cur);
      cur.clear();
    } else {
      cur.push_back(*p);
    }
  }
  return out;
}

}  // namespace

DbConnection::DbConnection(const DbSettings& settings) : session_(settings, {kIngestBatch, kIngestOne}) {}

DbCall DbConnection::finish(PgCall c) {
  DbCall call;
  if (c.ok && c.rows() == 1 && !c.is_null(0, 0)) {
    call.ok = true;
    const char* v = c.value(0, 0);
    if (*v == '{') call.outcomes = parse_text_array(v);
    else call.outcomes.emplace_back(v);
    return call;
  }
  call.sqlstate = c.sqlstate;
  call.message = c.ok ? "unexpected result" : c.message;
  call.connection_lost = c.connection_lost;
  call.timed_out = c.timed_out;
  return call;
}

DbCall DbConnection::ingest_batch(const std::vector<const Event*>& events, Clock::time_point deadline) {
  auto field = [&](auto member) {
    return pg_array_literal(events, [member](const Event* e) -> const std::string& { return e->*member; });
  };
  std::string providers = field(&Event::provider), ids = field(&Event::external_id),
              payloads = field(&Event::payload_json), headers = field(&Event::headers_json);
  std::string digests = array_with_nulls(events, [](const Event& e) { return bytea_hex(e.body_sha256); });
  std::string schemes = array_with_nulls(events, [](const Event& e) { return e.scheme; });
  return finish(session_.exec_prepared(
      kIngestBatch.name,
      {providers.c_str(), ids.c_str(), payloads.c_str(), headers.c_str(), digests.c_str(), schemes.c_str()},
      deadline));
}

DbCall DbConnection::ingest_one(const Event& e, Clock::time_point deadline) {
  std::string digest = bytea_hex(e.body_sha256);
  return finish(session_.exec_prepared(kIngestOne.name,
                                       {e.provider.c_str(), e.external_id.c_str(), e.payload_json.c_str(),
                                        e.headers_json.c_str(), digest.empty() ? nullptr : digest.c_str(),
                                        e.scheme.empty() ? nullptr : e.scheme.c_str()},
                                       deadline));
}

bool DbConnection::ping(std::string& error, Clock::time_point deadline) {
  PgCall c = session_.exec("SELECT 1", deadline);
  if (c.ok) return true;
  error = c.message;
  return false;
}

bool DbConnection::probe(std::string& error, Clock::time_point deadline) {
  PgCall c = session_.exec_prepared(kIngestBatch.name, {"{}", "{}", "{}", "{}", "{}", "{}"}, deadline);
  if (c.ok) return true;
  error = (c.sqlstate.empty() ? std::string() : c.sqlstate + ": ") + c.message;
  return false;
}

DbPool::DbPool(DbSettings settings, std::size_t size) : settings_(std::move(settings)) {
  for (std::size_t i = 0; i < size; ++i) idle_.push_back(std::make_unique<DbConnection>(settings_));
}

std::optional<DbPool::Lease> DbPool::acquire(std::chrono::steady_clock::time_point deadline) {
  std::unique_lock<std::mutex> lock(mu_);
  if (!cv_.wait_until(lock, deadline, [&] { return !idle_.empty(); })) return std::nullopt;
  auto c = std::move(idle_.back());
  idle_.pop_back();
  return std::optional<Lease>(std::in_place, *this, std::move(c));
}

void DbPool::release(std::unique_ptr<DbConnection> c) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    idle_.push_back(std::move(c));
  }
  cv_.notify_one();
}

}  // namespace inbox
