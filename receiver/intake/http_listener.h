// The public HTTP listener: Boost.Beast over Asio, a few I/O threads and no
// thread per connection, so slow or idle clients cost a socket, not a worker.
// It enforces what the open internet needs before a request reaches a
// handler: a total deadline for each request head, a minimum body rate,
// header count and size limits (431) before anything else, strict framing,
// Content-Length bounds with Expect: 100-continue answered only after them,
// pipelining in order, a connection cap. Why Beast: docs/receiver/deployment.md.
#pragma once

#include <boost/asio/any_io_executor.hpp>

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "common/headers.h"

namespace inbox {

struct HttpRequest {
  std::string method;
  std::string target;
  Headers headers;  // raw values
  std::string body;
  std::string remote;  // the socket peer
  std::size_t nul_bytes = 0;
};

struct HttpResponse {
  int status = 200;
  std::string body;
  const char* content_type = "application/json";  // a literal: no allocation per answer
  std::vector<std::pair<std::string, std::string>> headers;
  bool close = false;  // close the connection after this answer
  // For the access log and metrics only (never sent).
  std::string provider = "-";
  std::string outcome;
  std::string external_id;
  std::string error;
};

using Respond = std::function<void(HttpResponse)>;

class HttpHandler {
 public:
  virtual ~HttpHandler() = default;
  // Must call respond exactly once, from any thread. `executor` is the
  // connection's, for timers.
  virtual void handle(HttpRequest req, Respond respond, boost::asio::any_io_executor executor) = 0;
  // Every answer, routed or refused before routing, after it was written.
  virtual void answered(const HttpRequest& req, const HttpResponse& res, double seconds) = 0;
};

struct ListenerOptions {
  std::string host = "127.0.0.1";
  int port = 0;  // 0: any free port
  int threads = 2;
  int backlog = 1024;
  std::size_t max_connections = 1024;   // past it, new connections are closed at once
  std::size_t max_header_bytes = 16384;
  std::size_t max_header_count = 100;
  std::size_t max_body_bytes = 1 << 20;
  int head_timeout_ms = 5000;        // from a request's first byte to its blank line
  int idle_timeout_ms = 5000;        // keep-alive: waiting for the next request's first byte
  std::size_t min_body_rate = 16384; // bytes/s after head_timeout_ms of grace
  int write_timeout_ms = 5000;
  int keep_alive_max_requests = 1000;
};

class HttpListener {
 public:
  HttpListener(ListenerOptions options, HttpHandler& handler);
  ~HttpListener();
  HttpListener(const HttpListener&) = delete;
  HttpListener& operator=(const HttpListener&) = delete;

  // Binds and listens; returns the port. Throws std::runtime_error.
  int bind();
  // Runs the I/O threads until stop().
  void start();
  // Stops accepting; requests in flight get drain_ms to be answered, then
  // every connection is closed and the threads joined.
  void stop(int drain_ms);

  std::size_t connections() const;

  struct Impl;  // public so the connections (in the .cpp) can reach it

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace inbox
