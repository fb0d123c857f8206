// The admin listener (admin_listen): /status, /status.json, /metrics,
// /healthz, /readyz, on an address of its own so none of it is reachable on
// the public webhook port. An optional bearer token ([admin] token) guards
// everything but /healthz and /readyz. Meant for a private network: it is
// cpp-httplib's server with short timeouts and a small thread pool, not the
// hardened public listener.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "admin/status_source.h"
#include "common/config.h"

namespace httplib {
class Server;
}

namespace inbox {

struct AdminSources {
  std::function<std::string()> metrics;  // the process's own Prometheus text (may be empty)
};

class AdminServer {
 public:
  AdminServer(const Config& config, AdminSources sources);
  ~AdminServer();
  AdminServer(const AdminServer&) = delete;
  AdminServer& operator=(const AdminServer&) = delete;

  // Binds admin_listen (port 0: any free port) and serves on a thread; returns the port.
  // Throws ConfigError when it cannot listen.
  int start();
  void stop();

 private:
  Config config_;
  AdminSources sources_;
  StatusSource status_;
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
};

}  // namespace inbox
