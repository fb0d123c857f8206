// The status page (server-rendered HTML: no scripts, no external assets,
// inline SVG charts, reloads itself) and the health gauges for /metrics,
// both from one status document (admin/status_source.h).
#pragma once

#include <string>

#include "admin/status_source.h"

namespace inbox {

std::string render_status_html(const StatusSnapshot& s, int refresh_s);

// Prometheus gauges: verdict per provider, firing checks by severity, oldest
// pending age, open gaps, held, dead (24 h).
std::string render_health_metrics(const StatusSnapshot& s);

}  // namespace inbox
