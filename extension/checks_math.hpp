// The arithmetic of the anomaly checks: learned bands (median +- k * MAD),
// the hysteresis state machine (fire after M of the last N evaluations out of
// range, resolve after K in range) and latency histograms.
// Pure C++, no Postgres headers: noexcept, no allocation, testable alone.
#pragma once

#include <cstddef>
#include <cstdint>

namespace pg_inbox::checks {

// A learned range. Valid only when enough samples were given.
struct Band {
  double lo;
  double hi;
  double median;
  double spread;  // k times the noise estimate: hi - median
};

// median +- k * max(1.4826 * MAD, sqrt(|median|), 1). The sqrt floor is the
// Poisson noise of a count: a flat history (MAD 0) must not make every
// wobble of a count fire. Sorts samples in place. False when fewer than
// min_samples finite samples (or k is not positive).
bool learned_band(double *samples, size_t n, double k, size_t min_samples, Band *out) noexcept;

// Median of the first n values (sorted in place); NaN when n is 0.
double median_in_place(double *values, size_t n) noexcept;

// The hysteresis step. recent holds the out-of-range flags of the last
// evaluations, newest last, this one included (at most N of them).
struct Transition {
  bool firing;    // state after this evaluation
  int ok_streak;  // consecutive in-range evaluations, this one included
  bool started;   // ok -> firing now
  bool resolved;  // firing -> ok now
};
Transition step(bool was_firing, const bool *recent, size_t n_recent, int ok_streak, int fire_after,
                int resolve_after) noexcept;

// Latency histograms: bucket i (1-based) holds durations below 2^(i/4) ms,
// four buckets per doubling (19% steps), 120 buckets (about 10 days).
constexpr int kHistBuckets = 120;
int hist_bucket(double seconds) noexcept;
// Upper edge, in seconds, of the bucket holding the q-quantile (0 < q <= 1);
// negative when the histogram is empty.
double hist_percentile(const int32_t *counts, size_t n, double q) noexcept;

}  // namespace pg_inbox::checks
