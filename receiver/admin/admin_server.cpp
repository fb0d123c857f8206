#include "admin/admin_server.h"

#include <httplib.h>
#include <openssl/crypto.h>

#include <chrono>

#include "admin/status_page.h"
#include "common/log.h"

namespace inbox {
namespace {

DbSettings monitor_db(const Config& c) {
  DbSettings s = db_settings_for(c, c.admin.database_url.empty() ? c.database_url : c.admin.database_url,
                                 "inbox-receiver admin");
  s.connect_timeout_s = 2;  // a page load waits at most this long for a database that is gone
  return s;
}

bool token_ok(const httplib::Request& req, const std::string& token) {
  if (token.empty()) return true;
  const std::string want = "Bearer " + token;
  const std::string got = req.get_header_value("Authorization");
  return got.size() == want.size() && CRYPTO_memcmp(got.data(), want.data(), want.size()) == 0;
}

}  // namespace

AdminServer::AdminServer(const Config& config, AdminSources sources)
    : config_(config),
      sources_(std::move(sources)),
      status_(monitor_db(config), config.admin.cache_ms),
      server_(std::make_unique<httplib::Server>()) {
  server_->new_task_queue = [] { return new httplib::ThreadPool(4); };
  server_->set_read_timeout(5, 0);
  server_->set_write_timeout(5, 0);
  server_->set_keep_alive_timeout(5);
  server_->set_payload_max_length(1024);
  server_->set_tcp_nodelay(true);
  const std::string token = config_.admin.token;
  server_->set_pre_routing_handler([token](const httplib::Request& req, httplib::Response& res) {
    if (req.path == "/healthz" || req.path == "/readyz" || token_ok(req, token))
      return httplib::Server::HandlerResponse::Unhandled;
    res.status = 401;
    res.set_header("WWW-Authenticate", "Bearer");
    res.set_content("{\"error\":\"bearer token required\"}", "application/json");
    return httplib::Server::HandlerResponse::Handled;
  });
  server_->Get("/healthz", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("{\"status\":\"ok\"}", "application/json");
  });
  server_->Get("/readyz", [this](const httplib::Request&, httplib::Response& res) {
    StatusSnapshot s = status_.get();
    res.status = s.fresh ? 200 : 503;
    res.set_content(s.fresh ? "{\"status\":\"ready\"}" : "{\"status\":\"database unreachable\"}", "application/json");
  });
  server_->Get("/status", [this](const httplib::Request&, httplib::Response& res) {
    res.set_header("Cache-Control", "no-store");
    res.set_content(render_status_html(status_.get(), config_.admin.refresh_s), "text/html; charset=utf-8");
  });
  server_->Get("/status.json", [this](const httplib::Request&, httplib::Response& res) {
    StatusSnapshot s = status_.get();
    res.set_header("Cache-Control", "no-store");
    if (s.json.empty()) {
      res.status = 503;
      res.set_content("{\"error\":\"database unreachable\"}", "application/json");
      return;
    }
    res.set_content(s.json, "application/json");
  });
  server_->Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    std::string body = sources_.metrics ? sources_.metrics() : std::string();
    body += render_health_metrics(status_.get());
    res.set_content(body, "text/plain; version=0.0.4");
  });
}

AdminServer::~AdminServer() { stop(); }

int AdminServer::start() {
  const std::string& listen = config_.admin.listen;
  size_t colon = listen.rfind(':');
  std::string host = listen.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[') host = host.substr(1, host.size() - 2);
  int port = std::atoi(listen.substr(colon + 1).c_str());
  if (port == 0) port = server_->bind_to_any_port(host);
  else if (!server_->bind_to_port(host, port)) port = -1;
  if (port <= 0) throw ConfigError("cannot listen on admin_listen " + listen);
  thread_ = std::thread([this] { server_->listen_after_bind(); });
  while (!server_->is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  log_line("info", "admin listening", {{"admin_listen", listen}, num("port", static_cast<long long>(port)),
                                       {"token", config_.admin.token.empty() ? "none" : "required"}});
  return port;
}

void AdminServer::stop() {
  if (!thread_.joinable()) return;
  server_->stop();
  thread_.join();
}

}  // namespace inbox
