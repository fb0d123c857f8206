#include "alert_stand_ins.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>

#include "test_support.h"

namespace inbox::test {

StandInTarget::StandInTarget() {
  server_.Post(".*", [this](const httplib::Request& req, httplib::Response& res) {
    std::lock_guard<std::mutex> lock(mu_);
    if (fail_left_ > 0) {
      --fail_left_;
      res.status = fail_status_;
      return;
    }
    posts_.push_back({req.path, req.body, req.headers});
    res.status = 200;
    res.set_content("ok", "text/plain");
  });
  port_ = server_.bind_to_any_port("127.0.0.1");
  thread_ = std::thread([this] { server_.listen_after_bind(); });
  while (!server_.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
}

StandInTarget::~StandInTarget() {
  server_.stop();
  thread_.join();
}

std::string StandInTarget::url(const std::string& path) const {
  return "http://127.0.0.1:" + std::to_string(port_) + path;
}

void StandInTarget::fail_next(int n, int status) {
  std::lock_guard<std::mutex> lock(mu_);
  fail_left_ = n;
  fail_status_ = status;
}

std::vector<StandInTarget::Post> StandInTarget::posts() const {
  std::lock_guard<std::mutex> lock(mu_);
  return posts_;
}

int StandInTarget::count(const std::string& needle) const {
  std::lock_guard<std::mutex> lock(mu_);
  int n = 0;
  for (const Post& p : posts_) n += p.body.find(needle) != std::string::npos;
  return n;
}

int StandInTarget::wait_for(const std::string& needle, int n, int ms) const {
  auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  while (count(needle) < n && std::chrono::steady_clock::now() < end)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  return count(needle);
}

DelayProxy::DelayProxy(const std::string& host, int port) : host_(host), port_(port) {
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
  int one = 1;
  setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  ::listen(listen_fd_, 64);
  socklen_t len = sizeof addr;
  getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
  listen_port_ = ntohs(addr.sin_port);
  acceptor_ = std::thread([this] { accept_loop(); });
}

DelayProxy::~DelayProxy() {
  stopping_ = true;
  ::shutdown(listen_fd_, SHUT_RDWR);
  ::close(listen_fd_);
  acceptor_.join();
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (int fd : fds_) ::shutdown(fd, SHUT_RDWR);
  }
  for (auto& t : pumps_) t.join();
  for (int fd : fds_) ::close(fd);
}

void DelayProxy::accept_loop() {
  for (;;) {
    int client = ::accept(listen_fd_, nullptr, nullptr);
    if (client < 0 || stopping_) {
      if (client >= 0) ::close(client);
      return;
    }
    int server = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port_));
    inet_pton(AF_INET, host_.c_str(), &addr.sin_addr);
    if (::connect(server, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
      ::close(client);
      ::close(server);
      continue;
    }
    std::lock_guard<std::mutex> lock(mu_);
    fds_.push_back(client);
    fds_.push_back(server);
    pumps_.emplace_back([this, client, server] { pump(client, server, false); });
    pumps_.emplace_back([this, client, server] { pump(server, client, true); });
  }
}

void DelayProxy::pump(int from, int to, bool delayed) {
  char buf[16384];
  for (;;) {
    ssize_t n = ::recv(from, buf, sizeof buf, 0);
    if (n <= 0) break;
    if (!delayed) ++client_chunks_;
    if (delayed && delay_ms_ > 0) std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms_.load()));
    if (::send(to, buf, static_cast<size_t>(n), MSG_NOSIGNAL) != n) break;
  }
  ::shutdown(to, SHUT_WR);
}

std::string member_login_url(const std::string& login, const std::string& group) {
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  Db db;
  db.exec("DO $$ BEGIN CREATE ROLE " + login + " LOGIN PASSWORD '" + login + "' IN ROLE " + group +
          "; EXCEPTION WHEN duplicate_object THEN NULL; END $$");
  return login_database_url(login, login);
}

int database_port() {
  Db db;
  return std::stoi(*db.scalar("SELECT current_setting('port')"));
}

}  // namespace inbox::test
