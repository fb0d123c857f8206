#include "admin/status_page.h"

#include <simdjson.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <optional>
#include <vector>

namespace inbox {
namespace {

using simdjson::dom::array;
using simdjson::dom::element;
using simdjson::dom::object;

std::string esc(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string fmt_number(double v) {
  char buf[32];
  if (std::fabs(v - std::round(v)) < 1e-9 && std::fabs(v) < 1e15) std::snprintf(buf, sizeof buf, "%.0f", v);
  else std::snprintf(buf, sizeof buf, "%.3g", v);
  return buf;
}

// A field as text: strings as they are, numbers short, null/absent as "-".
std::string text(const element& e) {
  switch (e.type()) {
    case simdjson::dom::element_type::STRING: return std::string(std::string_view(e));
    case simdjson::dom::element_type::INT64: return std::to_string(int64_t(e));
    case simdjson::dom::element_type::UINT64: return std::to_string(uint64_t(e));
    case simdjson::dom::element_type::DOUBLE: return fmt_number(double(e));
    case simdjson::dom::element_type::BOOL: return bool(e) ? "yes" : "no";
    default: return "-";
  }
}

std::string field(const element& obj, const char* key) {
  element v;
  if (obj[key].get(v) != simdjson::SUCCESS) return "-";
  return text(v);
}

double number(const element& obj, const char* key) {
  element v;
  if (obj[key].get(v) != simdjson::SUCCESS) return 0;
  double d = 0;
  if (v.get_double().get(d) == simdjson::SUCCESS) return d;
  int64_t i = 0;
  if (v.get_int64().get(i) == simdjson::SUCCESS) return static_cast<double>(i);
  return 0;
}

// "2026-12-01T06:46:58.703943+00:00" -> "2026-12-01 06:46:58 UTC".
std::string when(const std::string& ts) {
  if (ts.size() < 19 || ts[10] != 'T') return ts;
  return ts.substr(0, 10) + " " + ts.substr(11, 8) + " UTC";
}

// Postgres interval text ("1 day 02:00:00.5", "00:05:00") in seconds.
std::optional<double> interval_seconds(const std::string& s) {
  if (s.empty() || s == "-") return std::nullopt;
  double days = 0;
  std::string rest = s;
  size_t day = s.find(" day");
  if (day != std::string::npos) {
    days = std::atof(s.substr(0, day).c_str());
    size_t sp = s.find(' ', day + 1);
    rest = sp == std::string::npos ? "" : s.substr(sp + 1);
  }
  int h = 0, m = 0;
  double sec = 0;
  if (!rest.empty() && std::sscanf(rest.c_str(), "%d:%d:%lf", &h, &m, &sec) != 3) return std::nullopt;
  return days * 86400 + h * 3600 + m * 60 + sec;
}

std::string human_age(const std::string& interval) {
  std::optional<double> s = interval_seconds(interval);
  if (!s) return "-";
  if (*s < 120) return fmt_number(std::round(*s)) + " s";
  if (*s < 7200) return fmt_number(std::round(*s / 60)) + " min";
  if (*s < 172800) return fmt_number(std::round(*s / 3600)) + " h";
  return fmt_number(std::round(*s / 86400)) + " days";
}

// An inline SVG line chart of one series (nulls break the line).
std::string chart(const std::string& id, const std::string& title, const element& series, const char* key,
                  const std::string& unit) {
  std::vector<std::optional<double>> values;
  array arr;
  if (series[key].get_array().get(arr) == simdjson::SUCCESS)
    for (element v : arr) {
      double d = 0;
      int64_t i = 0;
      if (v.get_double().get(d) == simdjson::SUCCESS) values.push_back(d);
      else if (v.get_int64().get(i) == simdjson::SUCCESS) values.push_back(static_cast<double>(i));
      else values.push_back(std::nullopt);
    }
  double max = 0, total = 0;
  for (const auto& v : values)
    if (v) max = std::max(max, *v), total += *v;
  const double w = 480, h = 90, pad = 4;
  std::string lines, path;
  int points = 0;
  char last[64] = "";
  // A run of one point is a dot, or a lone bucket would not show.
  auto flush = [&] {
    if (points == 1) lines += std::string("<circle r=\"2\" ") + last + "/>";
    else if (points > 1) lines += "<polyline points=\"" + path + "\"/>";
    path.clear();
    points = 0;
  };
  const size_t n = std::max<size_t>(values.size(), 2);
  for (size_t i = 0; i < values.size(); ++i) {
    if (!values[i]) {
      flush();
      continue;
    }
    double x = pad + (w - 2 * pad) * static_cast<double>(i) / static_cast<double>(n - 1);
    double y = h - pad - (max > 0 ? (h - 2 * pad) * *values[i] / max : 0);
    char pt[48];
    std::snprintf(pt, sizeof pt, "%.1f,%.1f ", x, y);
    std::snprintf(last, sizeof last, "cx=\"%.1f\" cy=\"%.1f\"", x, y);
    path += pt;
    ++points;
  }
  flush();
  std::string summary = unit == "s" ? "peak " + fmt_number(max) + " s" : fmt_number(total) + " in 24 h, peak " +
                                                                            fmt_number(max) + " per 15 min";
  return "<figure class=\"chart\" id=\"" + id + "\"><figcaption>" + esc(title) + " <span class=\"muted\">" +
         esc(summary) + "</span></figcaption><svg viewBox=\"0 0 480 90\" width=\"480\" height=\"90\" role=\"img\" "
         "aria-label=\"" + esc(title) + "\"><rect x=\"0\" y=\"0\" width=\"480\" height=\"90\" class=\"bg\"/>" +
         lines + "</svg><div class=\"axis\"><span>24 h ago</span><span>now</span></div></figure>";
}

const char* kStyle =
    "body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#1d2330;background:#f6f7f9}"
    "h1{font-size:20px;margin:0 0 4px}h2{font-size:15px;margin:24px 0 8px}"
    ".headline{font-size:22px;font-weight:600;padding:12px 16px;border-radius:6px;margin:12px 0}"
    ".headline.ok{background:#dff3e4;color:#185c2c}.headline.degraded{background:#fff3cd;color:#6b4e00}"
    ".headline.losing,.headline.unknown{background:#fadbd8;color:#7d1d14}"
    "table{border-collapse:collapse;background:#fff;width:100%}th,td{text-align:left;padding:5px 8px;"
    "border-bottom:1px solid #e3e6ea;vertical-align:top}th{font-weight:600;background:#eef0f3}"
    ".verdict{font-weight:700;text-transform:uppercase;font-size:12px;padding:2px 6px;border-radius:4px}"
    ".verdict.ok{background:#dff3e4;color:#185c2c}.verdict.degraded{background:#fff3cd;color:#6b4e00}"
    ".verdict.losing{background:#fadbd8;color:#7d1d14}.muted{color:#6b7280;font-weight:400}"
    ".charts{display:flex;flex-wrap:wrap;gap:16px}.chart{margin:0;background:#fff;padding:8px;border-radius:6px}"
    ".chart svg polyline{fill:none;stroke:#2563eb;stroke-width:1.5}.chart svg circle{fill:#2563eb}.chart .bg{fill:#f8fafc}"
    ".axis{display:flex;justify-content:space-between;color:#6b7280;font-size:11px}"
    ".facts{display:flex;gap:12px;flex-wrap:wrap}.fact{background:#fff;padding:8px 12px;border-radius:6px}"
    ".fact b{display:block;font-size:18px}";

}  // namespace

std::string render_status_html(const StatusSnapshot& s, int refresh_s) {
  std::string out = "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><meta http-equiv=\"refresh\" "
                    "content=\"" + std::to_string(refresh_s) + "\"><meta name=\"viewport\" content=\"width=device-width\">"
                    "<title>pg_inbox status</title><style>" + std::string(kStyle) + "</style></head><body>"
                    "<h1>pg_inbox status</h1>";
  simdjson::dom::parser parser;
  element doc;
  if (s.json.empty() || parser.parse(s.json).get(doc) != simdjson::SUCCESS) {
    out += "<div class=\"headline unknown\" id=\"headline\" data-verdict=\"unknown\">Status unknown: " +
           esc(s.error.empty() ? "not read yet" : s.error) + "</div></body></html>";
    return out;
  }
  out += "<div class=\"muted\">as of " + esc(when(field(doc, "generated_at"))) + " &middot; statistics refreshed " +
         esc(when(field(doc, "stats_refreshed_at"))) + " &middot; this page reloads every " +
         std::to_string(refresh_s) + " s</div>";
  if (!s.fresh)
    out += "<div class=\"headline unknown\" id=\"stale\">The database did not answer (" + esc(s.error) +
           "): showing what it said " + fmt_number(std::round(s.age_s)) + " s ago</div>";

  // Totals, for the one-line answer.
  double held = 0, dead = 0, gaps = 0, firing = 0, losing = 0, degraded = 0;
  std::string last_reconcile = "-", last_scan = "-";
  array providers, firing_list, alerts;
  bool have_providers = doc["providers"].get_array().get(providers) == simdjson::SUCCESS;
  if (have_providers)
    for (element p : providers) {
      held += number(p, "held");
      dead += number(p, "dead_24h");
      gaps += number(p, "open_gaps");
      std::string v = field(p, "verdict");
      losing += v == "losing";
      degraded += v == "degraded";
      std::string r = field(p, "last_reconcile_at"), g = field(p, "last_gap_scan_at");
      if (r != "-" && (last_reconcile == "-" || r > last_reconcile)) last_reconcile = r;
      if (g != "-" && (last_scan == "-" || g > last_scan)) last_scan = g;
    }
  if (doc["firing"].get_array().get(firing_list) == simdjson::SUCCESS) firing = static_cast<double>(firing_list.size());
  element backfill;
  double waiting = 0;
  if (doc["backfill"].get(backfill) == simdjson::SUCCESS) waiting = number(backfill, "waiting");
  const std::string verdict = field(doc, "verdict");
  const bool all_good = verdict == "ok" && firing == 0 && held == 0 && dead == 0 && gaps == 0 && waiting == 0;
  std::string headline;
  if (all_good) {
    headline = "All accounted for: every provider ok, nothing firing, nothing missing or waiting.";
  } else {
    std::vector<std::string> parts;
    if (losing) parts.push_back(fmt_number(losing) + " provider(s) losing");
    if (degraded) parts.push_back(fmt_number(degraded) + " degraded");
    if (firing) parts.push_back(fmt_number(firing) + " check(s) firing");
    if (gaps) parts.push_back(fmt_number(gaps) + " open gap(s)");
    if (held + dead) parts.push_back(fmt_number(held + dead) + " event(s) waiting for a person");
    if (waiting) parts.push_back(fmt_number(waiting) + " backfill request(s) waiting");
    for (size_t i = 0; i < parts.size(); ++i) headline += (i ? ", " : "") + parts[i];
    headline = "Attention: " + (headline.empty() ? std::string("see below") : headline);
  }
  out += "<div class=\"headline " + esc(all_good ? "ok" : (verdict == "ok" ? "degraded" : verdict)) +
         "\" id=\"headline\" data-verdict=\"" + esc(verdict) + "\">" + esc(headline) + "</div>";

  out += "<div class=\"facts\">"
         "<div class=\"fact\" id=\"fact-held\">held for a person<b>" + fmt_number(held) + "</b></div>"
         "<div class=\"fact\" id=\"fact-dead\">dead in 24 h<b>" + fmt_number(dead) + "</b></div>"
         "<div class=\"fact\" id=\"fact-gaps\">open gaps<b>" + fmt_number(gaps) + "</b></div>"
         "<div class=\"fact\" id=\"fact-backfill\">backfill waiting<b>" + fmt_number(waiting) + "</b>" +
         (waiting || number(backfill, "fetched_24h") ? "<span class=\"muted\">" + fmt_number(number(backfill, "fetched_24h")) +
                                                         " fetched, " + fmt_number(number(backfill, "not_found_24h")) +
                                                         " not found, " + fmt_number(number(backfill, "gave_up_24h")) +
                                                         " gave up in 24 h</span>"
                                                   : "") +
         "</div>"
         "<div class=\"fact\" id=\"fact-reconcile\">last reconcile<b>" + esc(when(last_reconcile)) + "</b></div>"
         "<div class=\"fact\" id=\"fact-gap-scan\">last gap scan<b>" + esc(when(last_scan)) + "</b></div></div>";

  out += "<h2>Providers</h2><table id=\"providers\"><tr><th>provider</th><th>verdict</th><th>why</th><th>backlog</th>"
         "<th>oldest pending</th><th>held</th><th>dead 24 h</th><th>open gaps</th><th>past grace</th>"
         "<th>last gap scan</th></tr>";
  if (have_providers)
    for (element p : providers) {
      std::string v = field(p, "verdict"), name = field(p, "provider"), reasons;
      array rs;
      if (p["reasons"].get_array().get(rs) == simdjson::SUCCESS)
        for (element r : rs) reasons += (reasons.empty() ? "" : "; ") + text(r);
      out += "<tr class=\"provider\" data-provider=\"" + esc(name) + "\" data-verdict=\"" + esc(v) + "\"><td>" +
             esc(name) + "</td><td><span class=\"verdict " + esc(v) + "\">" + esc(v) + "</span></td><td class=\"reason\">" +
             esc(reasons.empty() ? "-" : reasons) + "</td><td>" + esc(field(p, "backlog")) + "</td><td>" +
             esc(human_age(field(p, "oldest_pending_age"))) + "</td><td>" + esc(field(p, "held")) + "</td><td>" +
             esc(field(p, "dead_24h")) + "</td><td>" + esc(field(p, "open_gaps")) + "</td><td>" +
             esc(field(p, "gaps_past_grace")) + "</td><td>" + esc(when(field(p, "last_gap_scan_at"))) + "</td></tr>";
    }
  out += "</table>";

  out += "<h2>Firing checks</h2>";
  if (firing == 0) {
    out += "<p id=\"firing-none\">None.</p>";
  } else {
    out += "<table id=\"firing\"><tr><th>check</th><th>provider</th><th>severity</th><th>since</th><th>value</th>"
           "<th>allowed</th></tr>";
    for (element f : firing_list) {
      std::string range = "-";
      array r;
      if (f["range"].get_array().get(r) == simdjson::SUCCESS && r.size() == 2)
        range = (r.at(0).value().is_null() ? "" : text(r.at(0).value())) + ".." +
                (r.at(1).value().is_null() ? "" : text(r.at(1).value()));
      out += "<tr class=\"check\" data-check=\"" + esc(field(f, "check")) + "\"><td>" + esc(field(f, "check")) +
             (field(f, "data_loss") == "yes" ? " <b>(data loss)</b>" : "") + "</td><td>" + esc(field(f, "provider")) +
             "</td><td>" + esc(field(f, "severity")) + "</td><td>" + esc(when(field(f, "since"))) + "</td><td>" +
             esc(field(f, "value")) + "</td><td>" + esc(range) + "</td></tr>";
    }
    out += "</table>";
  }

  element series;
  out += "<h2>Last 24 hours</h2><div class=\"charts\">";
  if (doc["series"].get(series) == simdjson::SUCCESS) {
    out += chart("chart-arrivals", "Arrivals", series, "arrivals", "events");
    out += chart("chart-processed", "Processed", series, "processed", "events");
    out += chart("chart-p95", "p95 latency, received to processed", series, "p95_seconds", "s");
  }
  out += "</div>";

  out += "<h2>Recent alerts</h2>";
  if (doc["alerts"].get_array().get(alerts) == simdjson::SUCCESS && alerts.size() > 0) {
    out += "<table id=\"alerts\"><tr><th>at</th><th>severity</th><th>check</th><th>provider</th><th>state</th></tr>";
    for (element a : alerts)
      out += "<tr><td>" + esc(when(field(a, "at"))) + "</td><td>" + esc(field(a, "severity")) + "</td><td>" +
             esc(field(a, "check")) + "</td><td>" + esc(field(a, "provider")) + "</td><td>" + esc(field(a, "state")) +
             "</td></tr>";
    out += "</table>";
  } else {
    out += "<p>None in 24 hours.</p>";
  }
  return out + "</body></html>";
}

std::string render_health_metrics(const StatusSnapshot& s) {
  std::string out = "# HELP inbox_status_up 1 when the last status read answered, else 0.\n"
                    "# TYPE inbox_status_up gauge\ninbox_status_up " + std::string(s.fresh ? "1" : "0") + "\n";
  simdjson::dom::parser parser;
  element doc;
  if (s.json.empty() || parser.parse(s.json).get(doc) != simdjson::SUCCESS) return out;
  out += "# HELP inbox_status_age_seconds Age of the cached status document.\n# TYPE inbox_status_age_seconds gauge\n"
         "inbox_status_age_seconds " + fmt_number(s.age_s) + "\n";
  struct Gauge {
    const char* name;
    const char* help;
    std::string rows;
  };
  std::vector<Gauge> g = {
      {"inbox_provider_verdict", "1 for the provider's verdict (ok, degraded, losing), 0 for the others.", ""},
      {"inbox_oldest_pending_seconds", "Age of the oldest pending event.", ""},
      {"inbox_open_gaps", "Unresolved gaps.", ""},
      {"inbox_held_events", "Events held for a person.", ""},
      {"inbox_dead_events_24h", "Events that went dead in the last 24 hours.", ""},
      {"inbox_backlog_events", "Open events.", ""}};
  array providers;
  if (doc["providers"].get_array().get(providers) == simdjson::SUCCESS)
    for (element p : providers) {
      std::string name = field(p, "provider"), v = field(p, "verdict");
      std::string l = "{provider=\"" + name + "\"";
      for (const char* x : {"ok", "degraded", "losing"})
        g[0].rows += std::string(g[0].name) + l + ",verdict=\"" + x + "\"} " + (v == x ? "1" : "0") + "\n";
      std::optional<double> age = interval_seconds(field(p, "oldest_pending_age"));
      g[1].rows += std::string(g[1].name) + l + "} " + fmt_number(age ? *age : 0) + "\n";
      g[2].rows += std::string(g[2].name) + l + "} " + fmt_number(number(p, "open_gaps")) + "\n";
      g[3].rows += std::string(g[3].name) + l + "} " + fmt_number(number(p, "held")) + "\n";
      g[4].rows += std::string(g[4].name) + l + "} " + fmt_number(number(p, "dead_24h")) + "\n";
      g[5].rows += std::string(g[5].name) + l + "} " + fmt_number(number(p, "backlog")) + "\n";
    }
  std::map<std::string, int> by_severity = {{"P0", 0}, {"P1", 0}, {"P2", 0}, {"P3", 0}};
  array firing;
  if (doc["firing"].get_array().get(firing) == simdjson::SUCCESS)
    for (element f : firing) ++by_severity[field(f, "severity")];
  for (const Gauge& x : g)
    out += std::string("# HELP ") + x.name + " " + x.help + "\n# TYPE " + x.name + " gauge\n" + x.rows;
  out += "# HELP inbox_firing_checks Checks firing, by severity.\n# TYPE inbox_firing_checks gauge\n";
  for (const auto& [sev, n] : by_severity)
    out += "inbox_firing_checks{severity=\"" + sev + "\"} " + std::to_string(n) + "\n";
  return out;
}

}  // namespace inbox
