// Advisory lock keys of the scheduled jobs, (class, object) pairs taken with
// pg_try_advisory_xact_lock(int, int). The class spells "pinb".. "pind" so
// they do not collide with an application's single-key locks by accident.
#pragma once

namespace pg_inbox {

constexpr int kLockClassReconcile = 0x70696e62;  // object: kLockReconcilePass
constexpr int kLockClassGapScan = 0x70696e63;    // object: hashtext(provider)
constexpr int kLockClassJob = 0x70696e64;       // object: hashtext(job), inbox.run_job
constexpr int kLockReconcilePass = 1;

}  // namespace pg_inbox
