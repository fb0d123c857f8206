// Advisory lock keys of the scheduled jobs, (class, object) pairs taken with
// pg_try_advisory_xact_lock(int, int). The classes spell "pinb", "pinc" (and
// "pind", inbox.run_job's, which only SQL takes: sql/src/60_schedule.sql) so
// they do not collide with an application's single-key locks by accident.
#pragma once

namespace pg_inbox {

constexpr int kLockClassReconcile = 0x70696e62;  // object: kLockReconcilePass
constexpr int kLockClassGapScan = 0x70696e63;    // object: hashtext(provider)
constexpr int kLockReconcilePass = 1;

}  // namespace pg_inbox
