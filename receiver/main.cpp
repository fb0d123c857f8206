// inbox-receiver: subcommand dispatch. Each subcommand is one function;
// adding one (the backfill/publish/forward workers) is one row in kCommands.
#include <signal.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "admin/admin_server.h"
#include "alerts/alert_sender.h"
#include "backfill/backfill.h"
#include "common/config.h"
#include "intake/http_server.h"
#include "common/log.h"
#include "forward/forwarder.h"
#include "intake/providers/provider.h"
#include "intake/sign_command.h"

namespace {

using Args = std::vector<std::string>;

// --key value pairs and bare --flags; anything else is an error.
struct Flags {
  std::map<std::string, std::string> values;
  bool has(const std::string& k) const { return values.count(k) > 0; }
  std::string get(const std::string& k, const std::string& d = {}) const {
    auto it = values.find(k);
    return it == values.end() ? d : it->second;
  }
};

Flags parse_flags(const Args& args, const std::vector<std::string>& with_value,
                  const std::vector<std::string>& bare) {
  Flags f;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto is = [&](const std::vector<std::string>& names) {
      for (const auto& n : names)
        if (a == "--" + n) return true;
      return false;
    };
    if (is(with_value)) {
      if (i + 1 >= args.size()) throw inbox::ConfigError(a + " needs a value");
      f.values[a.substr(2)] = args[++i];
    } else if (is(bare)) {
      f.values[a.substr(2)] = "1";
    } else {
      throw inbox::ConfigError("unknown argument " + a);
    }
  }
  return f;
}

inbox::Config config_from(const Flags& f, inbox::EnvPolicy env = inbox::EnvPolicy::require) {
  if (!f.has("config")) throw inbox::ConfigError("--config FILE is required");
  // Every error at once: the parser's and, where secrets are required, each
  // provider's scheme and secrets (unknown scheme, bad whsec_), in one list.
  inbox::ProviderCheck check;
  if (env == inbox::EnvPolicy::require) check = [](const inbox::ProviderConfig& p) { inbox::make_provider(p); };
  inbox::Config c = inbox::load_config(f.get("config"), env, check);
  inbox::apply_schemes(c);
  return c;
}

// Blocks SIGTERM and SIGINT before any thread starts, so only the caller's
// sigwait() sees them; every other thread keeps running normally.
sigset_t block_stop_signals() {
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  return stop_signals;
}

int cmd_serve(const Args& args) {
  Flags f = parse_flags(args, {"config"}, {"no-batching", "quiet"});
  inbox::Config config = config_from(f);
  if (f.has("no-batching")) config.batching = false;
  if (f.has("quiet")) inbox::set_request_logging(false);

  sigset_t stop_signals = block_stop_signals();

  inbox::Receiver receiver(config);
  int port = receiver.start();
  // Optional: the backfill worker as a thread, stopped before the receiver.
  std::unique_ptr<inbox::BackfillThread> backfill;
  if (config.backfill.enabled) backfill = std::make_unique<inbox::BackfillThread>(config, &receiver.metrics());
  // Optional: the forwarder's threads ([forward] enabled = true), stopped first.
  std::unique_ptr<inbox::Forwarder> forwarder;
  if (inbox::ForwardConfig fwd = inbox::load_forward_config(f.get("config"), config.database_url); fwd.enabled) {
    forwarder = std::make_unique<inbox::Forwarder>(config, std::move(fwd));
    forwarder->start(false);
  }
  // Optional: the alert sender as a thread (with the 5xx rate of this
  // process's answers), and the admin listener.
  std::unique_ptr<inbox::AlertSender> alerts;
  if (config.alerts.enabled) {
    inbox::Metrics* metrics = &receiver.metrics();
    alerts = std::make_unique<inbox::AlertSender>(config, [metrics] { return metrics->answer_counts(); });
    alerts->start();
  }
  std::unique_ptr<inbox::AdminServer> admin;
  if (!config.admin.listen.empty()) {
    inbox::Metrics* metrics = &receiver.metrics();
    inbox::AlertSender* sender = alerts.get();
    admin = std::make_unique<inbox::AdminServer>(
        config, inbox::AdminSources{[metrics, sender] {
          return metrics->render() + (sender ? sender->render_metrics() : std::string());
        }});
    admin->start();
  }
  inbox::log_line("info", "listening",
                  {{"listen", config.listen}, inbox::num("port", static_cast<long long>(port)),
                   {"batching", config.batching ? "on" : "off"},
                   inbox::num("providers", static_cast<long long>(config.providers.size()))});
  int sig = 0;
  sigwait(&stop_signals, &sig);
  inbox::log_line("info", "stopping", {{"signal", strsignal(sig)}});
  forwarder.reset();
  admin.reset();
  alerts.reset();
  backfill.reset();
  receiver.stop();
  inbox::log_line("info", "stopped");
  return 0;
}

int cmd_check_config(const Args& args) {
  Flags f = parse_flags(args, {"config"}, {});
  inbox::Config config = config_from(f);
  inbox::split_listen(config.listen);
  // The routes after the rest: their errors come once the rest is valid.
  inbox::ForwardConfig forward = inbox::load_forward_config(f.get("config"), config.database_url);
  std::cout << "ok: " << f.get("config") << "\n  listen " << config.listen << "\n  batching "
            << (config.batching ? "on" : "off") << "\n";
  for (const auto& p : config.providers) {
    std::cout << "  provider " << p.name << " (" << p.scheme << "): " << p.secrets.size()
              << " secret(s), id from "
              << (p.id_header.empty() ? "JSON pointer " + p.id_json_pointer : "header " + p.id_header)
              << "\n";
  }
  for (const auto& p : config.providers) {
    if (!p.backfill) continue;
    inbox::BackfillUrl url = inbox::parse_backfill_url(p.backfill->url);
    std::cout << "  backfill " << p.name << ": GET " << url.origin
              << inbox::path_for_humans(url.path_template)
              << (p.backfill->auth_header.empty() ? "" : " with header " + p.backfill->auth_header)
              << ", timeout " << p.backfill->timeout_ms << " ms"
              << (p.backfill->payload_json_pointer.empty() ? ""
                                                           : ", event at " + p.backfill->payload_json_pointer)
              << "\n";
    const inbox::BackfillApiConfig& b = *p.backfill;
    // How the pages are read, the same for both list URLs.
    const std::string pages =
        "ids at " + (b.list_ids_json_pointer.empty() ? "(the body)" : b.list_ids_json_pointer) +
        (b.list_id_json_pointer.empty() ? "" : " then " + b.list_id_json_pointer) +
        (b.list_cursor_json_pointer.empty() ? ", one page" : ", cursor at " + b.list_cursor_json_pointer) +
        ", at most " + std::to_string(b.list_max_pages) + " pages";
    if (!b.list_url.empty()) {
      inbox::BackfillUrl list = inbox::parse_api_url(b.list_url, "list_url");
      std::cout << "  list " << p.name << ": GET " << list.origin << inbox::path_for_humans(list.path_template)
                << " every " << b.list_interval_s << " s, window " << b.list_window_s << " s ("
                << b.list_time_format << "), " << pages << "; needs inbox.set_id_source('" << p.name
                << "', 'listed')\n";
    }
    if (!b.list_after_url.empty()) {
      inbox::BackfillUrl tail = inbox::parse_api_url(b.list_after_url, "list_after_url");
      std::cout << "  tail list " << p.name << ": GET " << tail.origin << inbox::path_for_humans(tail.path_template)
                << " while sequence_tail_silence fires, at most every " << b.list_interval_s << " s, " << pages
                << "; needs a 'sequence' id source\n";
    }
  }
  if (config.backfill.enabled) std::cout << "  backfill worker runs inside serve\n";
  for (const auto& r : forward.routes)  // never the URL's query or the secret
    std::cout << "  route " << r.name << ": " << (r.provider.empty() ? std::to_string(r.topics.size()) + " topic(s)"
                                                                      : "events of " + r.provider)
              << " to " << r.url.substr(0, r.url.find('?')) << ", " << r.concurrency << " at once"
              << (r.ordered ? ", ordered by key" : "") << "\n";
  if (forward.enabled) std::cout << "  forwarder runs inside serve\n";
  // Money defaults: an expired lease on a payment may mean the charge ran.
  std::cout << "Each provider must also be registered in the database, once:\n";
  bool payments = false;
  for (const auto& p : config.providers) {
    const bool payment = p.scheme == "stripe";
    payments = payments || payment;
    std::cout << "  SELECT inbox.register_provider('" << p.name << "'"
              << (payment ? ", on_lease_expiry => 'hold'" : "") << ");\n";
  }
  if (payments)
    std::cout << "on_lease_expiry => 'hold' for payment providers (stripe): when a worker's lease expires\n"
                 "on a payment event the charge may already have run, so the event is held for a person\n"
                 "(inbox.resolve) instead of being handed to a second worker that would run it again.\n";
  return 0;
}

std::string read_body(const std::string& path) {
  std::ostringstream text;
  if (path == "-") {
    text << std::cin.rdbuf();
  } else {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw inbox::ConfigError("cannot read " + path);
    text << in.rdbuf();
  }
  return text.str();
}

int cmd_sign(const Args& args) {
  Flags f = parse_flags(args, {"config", "provider", "body", "id", "url", "format", "timestamp", "count"}, {});
  // Signing needs one provider's secret, not the database or other secrets.
  inbox::Config config = config_from(f, inbox::EnvPolicy::lenient);
  inbox::SignOptions o;
  o.provider = f.get("provider");
  if (o.provider.empty()) throw inbox::ConfigError("--provider NAME is required");
  if (f.has("body")) o.body = read_body(f.get("body"));
  o.id = f.get("id");
  o.url = f.get("url", o.url);
  o.format = f.get("format", o.format);
  if (o.format != "curl" && o.format != "headers" && o.format != "tsv")
    throw inbox::ConfigError("--format is curl, headers or tsv");
  if (f.has("count")) o.count = std::stol(f.get("count"));
  if (o.count > 1 && o.format != "tsv") throw inbox::ConfigError("--count needs --format tsv");
  if (f.has("timestamp")) o.now = std::stoll(f.get("timestamp"));
  std::cout << inbox::sign_delivery(config, o);
  return 0;
}

// The backfill worker: --once lists (providers with a list_url, and the tail
// of those with a list_after_url whose tail check fires), drains what is due
// and exits (cron, tests);
// otherwise it polls until SIGTERM or SIGINT. Exit 1 when the database fails
// during --once (requests stay leased until their lease expires).
int cmd_backfill(const Args& args) {
  Flags f = parse_flags(args, {"config"}, {"once"});
  inbox::Config config = config_from(f);
  if (f.has("once")) {
    inbox::BackfillWorker worker(config);
    inbox::BackfillStats stats;
    std::string error;
    bool ok = worker.round(stats, error);
    inbox::log_line(ok ? "info" : "error", "backfill drained",
                    {inbox::num("fetched", stats.fetched), inbox::num("not_found", stats.not_found),
                     inbox::num("retried", stats.retried), inbox::num("gave_up", stats.gave_up),
                     inbox::num("lost", stats.lost), inbox::num("listed", stats.listed),
                     inbox::num("list_errors", stats.list_errors), inbox::num("tail_raised", stats.tail_raised),
                     {"error", error}});
    return ok ? 0 : 1;
  }
  sigset_t stop_signals = block_stop_signals();
  {
    inbox::BackfillThread worker(config, nullptr);
    int sig = 0;
    sigwait(&stop_signals, &sig);
    inbox::log_line("info", "stopping", {{"signal", strsignal(sig)}});
  }  // the destructor stops the loop and waits for the request in flight
  inbox::log_line("info", "stopped");
  return 0;
}

// The forwarder: delivers outbox messages and provider events to the
// [[route]] endpoints. --once drains what is due and exits (tests, cron);
// otherwise it polls until SIGTERM or SIGINT.
int cmd_forward(const Args& args) {
  Flags f = parse_flags(args, {"config"}, {"once", "quiet"});
  inbox::Config config = config_from(f);
  if (f.has("quiet")) inbox::set_request_logging(false);
  sigset_t stop_signals = block_stop_signals();
  inbox::Forwarder forwarder(config, inbox::load_forward_config(f.get("config"), config.database_url));
  forwarder.start(f.has("once"));
  if (f.has("once")) {
    forwarder.join();
  } else {
    int sig = 0;
    sigwait(&stop_signals, &sig);
    inbox::log_line("info", "stopping", {{"signal", strsignal(sig)}});
    forwarder.stop();
  }
  const inbox::ForwardStats& s = forwarder.stats();
  inbox::log_line("info", "forward stopped",
                  {inbox::num("delivered", s.delivered.load()), inbox::num("retried", s.retried.load()),
                   inbox::num("dead", s.dead.load()), inbox::num("rejected", s.rejected.load()),
                   inbox::num("lost", s.lost.load()), inbox::num("db_errors", s.db_errors.load())});
  return 0;
}

// The alert sender as a process of its own (any number of replicas), with
// the admin listener when admin_listen is set. --once: one round and exit.
int cmd_alerts(const Args& args) {
  Flags f = parse_flags(args, {"config"}, {"once"});
  inbox::Config config = config_from(f);
  if (config.alert_targets.empty()) throw inbox::ConfigError("no [[alert_target]] configured");
  if (f.has("once")) {
    inbox::AlertSender sender(config);
    bool ok = sender.poll_once();
    // Deliveries (with their retries) get a minute; what is left is logged as not delivered.
    if (!sender.drain(60000)) ok = false;
    return ok ? 0 : 1;
  }
  sigset_t stop_signals = block_stop_signals();
  inbox::AlertSender sender(config);
  std::unique_ptr<inbox::AdminServer> admin;
  if (!config.admin.listen.empty()) {
    admin = std::make_unique<inbox::AdminServer>(config, inbox::AdminSources{[&sender] { return sender.render_metrics(); }});
    admin->start();
  }
  sender.start();
  int sig = 0;
  sigwait(&stop_signals, &sig);
  inbox::log_line("info", "stopping", {{"signal", strsignal(sig)}});
  admin.reset();
  return 0;
}

struct Command {
  const char* name;
  const char* usage;
  const char* summary;  // for `inbox-receiver <command> --help`
  int (*run)(const Args&);
};

const Command kCommands[] = {
    {"serve", "serve --config FILE [--no-batching] [--quiet]",
     "Receives webhooks on `listen`, verifies them and stores them durably before answering 2xx.\n"
     "  --no-batching  one transaction per request (the benchmark's baseline)\n"
     "  --quiet        no access log lines\n"
     "SIGTERM or SIGINT: stop accepting, answer what is in flight ([http] drain_ms), exit 0.",
     cmd_serve},
    {"check-config", "check-config --config FILE",
     "Reads and checks the config, listing every error (and every unset environment variable)\n"
     "in one run; exit 0 and a summary when it is usable, 1 otherwise. Needs no database.",
     cmd_check_config},
    {"sign",
     "sign --config FILE --provider NAME [--body FILE|-] [--id ID] [--url URL] "
     "[--format curl|headers|tsv] [--count N] [--timestamp UNIX]",
     "Prints a delivery signed as the provider would sign it (a curl command, headers, or TSV\n"
     "for load tests), aimed at the configured `listen` unless --url says otherwise.",
     cmd_sign},
    {"alerts", "alerts --config FILE [--once]",
     "The alert sender: delivers the alerts the checks wrote (inbox.alerts) to every [[alert_target]],\n"
     "once per key and window across replicas (inbox.claim_alert), failing open when the database\n"
     "does not answer in time; serves admin_listen when set.\n"
     "  --once  one round and exit; otherwise poll until SIGTERM.",
     cmd_alerts},
    {"backfill", "backfill --config FILE [--once]",
     "The backfill worker: fetches events the database asked for from the provider's API.\n"
     "  --once  one round (list, drain what is due) and exit; otherwise poll until SIGTERM.",
     cmd_backfill},
    {"forward", "forward --config FILE [--once] [--quiet]",
     "The forwarder: delivers outbox messages and provider events to the [[route]] endpoints,\n"
     "signed with Standard Webhooks (docs/outbox.md).\n"
     "  --once   deliver what is due and exit; otherwise poll until SIGTERM.\n"
     "  --quiet  no line per failed attempt.",
     cmd_forward},
};

int usage(std::FILE* out) {
  std::fprintf(out, "usage:\n");
  for (const Command& c : kCommands) std::fprintf(out, "  inbox-receiver %s\n", c.usage);
  return out == stdout ? 0 : 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return usage(stderr);
  std::string name = argv[1];
  if (name == "--help" || name == "-h" || name == "help") return usage(stdout);
  if (name == "--version" || name == "-V" || name == "version") {
    std::printf("inbox-receiver %s\n", INBOX_RECEIVER_VERSION);
    return 0;
  }
  Args args(argv + 2, argv + argc);
  for (const Command& c : kCommands) {
    if (name != c.name) continue;
    for (const std::string& a : args)
      if (a == "--help" || a == "-h") {
        std::printf("usage: inbox-receiver %s\n\n%s\n", c.usage, c.summary);
        return 0;
      }
    try {
      return c.run(args);
    } catch (const std::exception& e) {
      std::cerr << "inbox-receiver " << name << ": " << e.what() << "\n";
      return 1;
    }
  }
  std::cerr << "inbox-receiver: unknown command " << name << "\n";
  return usage(stderr);
}
