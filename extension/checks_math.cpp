#include "checks_math.hpp"

#include <algorithm>
#include <cmath>

namespace pg_inbox::checks {

double median_in_place(double *values, size_t n) noexcept {
  if (n == 0) return std::nan("");
  std::sort(values, values + n);
  return n % 2 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2.0;
}

bool learned_band(double *samples, size_t n, double k, size_t min_samples, Band *out) noexcept {
  // NaNs (missing windows) go to the end and are not counted.
  size_t finite = static_cast<size_t>(
      std::partition(samples, samples + n, [](double v) { return std::isfinite(v); }) - samples);
  if (finite == 0 || finite < min_samples || !(k > 0)) return false;
  double median = median_in_place(samples, finite);
  for (size_t i = 0; i < finite; ++i) samples[i] = std::fabs(samples[i] - median);
  double mad = median_in_place(samples, finite);
  double noise = std::max({1.4826 * mad, std::sqrt(std::fabs(median)), 1.0});
  out->median = median;
  out->spread = k * noise;
  out->lo = median - out->spread;
  out->hi = median + out->spread;
  return true;
}

Transition step(bool was_firing, const bool *recent, size_t n_recent, int ok_streak, int fire_after,
                int resolve_after) noexcept {
  Transition t{was_firing, 0, false, false};
  bool out_now = n_recent > 0 && recent[n_recent - 1];
  t.ok_streak = out_now ? 0 : ok_streak + 1;
  if (!was_firing) {
    int out = 0;
    for (size_t i = 0; i < n_recent; ++i) out += recent[i] ? 1 : 0;
    if (out >= fire_after && out_now) {
      t.firing = true;
      t.started = true;
    }
  } else if (t.ok_streak >= resolve_after) {
    t.firing = false;
    t.resolved = true;
  }
  return t;
}

int hist_bucket(double seconds) noexcept {
  if (!(seconds > 0)) return 1;
  double ms = seconds * 1000.0;
  if (ms < 1.0) return 1;
  double b = std::floor(4.0 * std::log2(ms)) + 1.0;
  if (b > kHistBuckets) return kHistBuckets;
  return b < 1 ? 1 : static_cast<int>(b);
}

double hist_percentile(const int32_t *counts, size_t n, double q) noexcept {
  int64_t total = 0;
  for (size_t i = 0; i < n; ++i) total += counts[i] > 0 ? counts[i] : 0;
  if (total == 0 || !(q > 0) || q > 1) return -1.0;
  // The rank of the quantile, 1-based: ceil(q * total).
  auto rank = static_cast<int64_t>(std::ceil(q * static_cast<double>(total)));
  int64_t seen = 0;
  for (size_t i = 0; i < n; ++i) {
    seen += counts[i] > 0 ? counts[i] : 0;
    if (seen >= rank) return std::exp2(static_cast<double>(i + 1) / 4.0) / 1000.0;
  }
  return std::exp2(static_cast<double>(n) / 4.0) / 1000.0;
}

}  // namespace pg_inbox::checks
