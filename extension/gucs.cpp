#include "gucs.hpp"

#include "postgres.hpp"

namespace pg_inbox {

int guc_default_lease_s = 300;
int guc_max_attempts = 10;
int guc_backoff_base_ms = 10 * 1000;
int guc_backoff_max_s = 3600;
int guc_max_payload_kb = 1024;
bool guc_delivery_log = true;

void define_gucs() {
  DefineCustomIntVariable("pg_inbox.default_lease",
                          "Lease inbox.claim() grants when called without one.", nullptr,
                          &guc_default_lease_s, 300, 1, 7 * 24 * 3600, PGC_USERSET, GUC_UNIT_S,
                          nullptr, nullptr, nullptr);
  DefineCustomIntVariable("pg_inbox.max_attempts",
                          "Claims an event gets before inbox.fail() marks it dead, "
                          "unless its provider sets its own.",
                          nullptr, &guc_max_attempts, 10, 1, 1000, PGC_SUSET, 0, nullptr, nullptr,
                          nullptr);
  DefineCustomIntVariable("pg_inbox.backoff_base",
                          "First retry delay after inbox.fail(); doubles per attempt.", nullptr,
                          &guc_backoff_base_ms, 10 * 1000, 1, 24 * 3600 * 1000, PGC_SUSET,
                          GUC_UNIT_MS, nullptr, nullptr, nullptr);
  DefineCustomIntVariable("pg_inbox.backoff_max", "Longest retry delay after inbox.fail().",
                          nullptr, &guc_backoff_max_s, 3600, 1, 30 * 24 * 3600, PGC_SUSET,
                          GUC_UNIT_S, nullptr, nullptr, nullptr);
  // SUSET: the receiver role must not be able to raise its own limit.
  DefineCustomIntVariable("pg_inbox.max_payload_size",
                          "Largest payload (stored jsonb size) inbox.ingest() accepts.", nullptr,
                          &guc_max_payload_kb, 1024, 1, 256 * 1024, PGC_SUSET, GUC_UNIT_KB, nullptr,
                          nullptr, nullptr);
  // SUSET: the receiver role must not be able to stop its deliveries being
  // recorded. Off exists for measuring the log's cost (bench/core).
  DefineCustomBoolVariable(
      "pg_inbox.delivery_log", "Whether inbox.ingest() records every delivery in inbox.deliveries.",
      nullptr, &guc_delivery_log, true, PGC_SUSET, 0, nullptr, nullptr, nullptr);
  MarkGUCPrefixReserved("pg_inbox");
}

}  // namespace pg_inbox
