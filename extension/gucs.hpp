// pg_inbox.* settings: the defaults the SQL functions fall back on.
#pragma once

namespace pg_inbox {

extern int guc_default_lease_s;  // pg_inbox.default_lease
extern int guc_max_attempts;     // pg_inbox.max_attempts
extern int guc_backoff_base_ms;  // pg_inbox.backoff_base
extern int guc_backoff_max_s;    // pg_inbox.backoff_max
extern int guc_max_payload_kb;   // pg_inbox.max_payload_size
extern bool guc_delivery_log;    // pg_inbox.delivery_log

void define_gucs();

}  // namespace pg_inbox
