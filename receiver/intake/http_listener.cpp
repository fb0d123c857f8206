#include "intake/http_listener.h"

#include <boost/asio/dispatch.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <stdexcept>

#include "intake/request_head.h"

namespace inbox {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;
using Strand = asio::strand<asio::io_context::executor_type>;

namespace {

std::string lower_trim(std::string s) {
  std::size_t b = s.find_first_not_of(" \t"), e = s.find_last_not_of(" \t");
  s = b == std::string::npos ? "" : s.substr(b, e - b + 1);
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// For the log: printable ASCII only, bounded.
std::string printable(std::string_view s, std::size_t max = 256) {
  std::string out;
  for (char c : s.substr(0, max)) {
    unsigned char u = static_cast<unsigned char>(c);
    out.push_back(u >= 0x20 && u < 0x7f ? c : '?');
  }
  return out;
}

const char* find_header(const Headers& h, const char* name) {
  auto it = h.find(name);
  return it == h.end() ? nullptr : it->second.c_str();
}

}  // namespace

struct HttpListener::Impl {
  Impl(ListenerOptions o, HttpHandler& h)
      : opt(std::move(o)), handler(h), ioc(opt.threads), work(asio::make_work_guard(ioc)), acceptor(ioc) {}

  void accept();

  ListenerOptions opt;
  HttpHandler& handler;
  asio::io_context ioc;
  // Keeps the I/O threads running until stop(). Once the acceptor is closed,
  // a request waiting for its commit has no I/O pending; its deadline timer,
  // cancelled when the commit ends, was the last work, so without this guard
  // run() returned before the answer was posted, and the drain waited for an
  // answer no thread would ever write.
  asio::executor_work_guard<asio::io_context::executor_type> work;
  tcp::acceptor acceptor;
  std::vector<std::thread> threads;
  std::atomic<std::size_t> connections{0};
  std::atomic<bool> stopping{false};
  // Requests handed to the handler and not yet answered (drain waits for them).
  std::mutex mu;
  std::condition_variable drained;
  std::size_t in_flight = 0;
};

namespace {

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(HttpListener::Impl& l, tcp::socket socket) : l_(l), stream_(std::move(socket)) {
    ++l_.connections;
    beast::error_code ec;
    auto ep = stream_.socket().remote_endpoint(ec);
    remote_ = ec ? "?" : ep.address().to_string();
  }
  ~Connection() { --l_.connections; }

  void run() { read_head(); }

 private:
  // Reads until the head is complete (scan_head says so) or refused.
  void read_head() {
    if (buf_.size() > 0 && try_head()) return;
    if (buf_.size() == 0) {
      head_started_ = false;
      stream_.expires_after(std::chrono::milliseconds(served_ == 0 ? l_.opt.head_timeout_ms : l_.opt.idle_timeout_ms));
    } else {
      start_head();
      stream_.expires_at(head_deadline_);
    }
    std::size_t room = l_.opt.max_header_bytes + 1 - std::min(buf_.size(), l_.opt.max_header_bytes);
    stream_.async_read_some(buf_.prepare(std::min<std::size_t>(room, 16384)),
                            [self = shared_from_this()](beast::error_code ec, std::size_t n) {
                              if (ec) return self->close();
                              self->buf_.commit(n);
                              self->start_head();
                              self->read_head();
                            });
  }

  // The head's deadline runs from its first byte (a pipelined request's
  // first byte is already here when the previous answer was written).
  void start_head() {
    if (head_started_) return;
    head_started_ = true;
    start_ = Clock::now();
    head_deadline_ = start_ + std::chrono::milliseconds(l_.opt.head_timeout_ms);
  }

  // True when the head was complete (and handled, or refused).
  bool try_head() {
    start_head();
    auto data = buf_.data();
    char* p = static_cast<char*>(data.data());
    HeadLimits limits{l_.opt.max_header_bytes, l_.opt.max_header_count};
    HeadScan scan = scan_head(p, data.size(), limits);
    if (scan.status == HeadStatus::need_more) return false;
    meta_ = HttpRequest{};
    meta_.remote = remote_;
    request_line(std::string_view(p, std::min<std::size_t>(data.size(), 512)));
    if (scan.status != HeadStatus::ok) {
      int code = head_status_code(scan.status);
      const char* msg = code == 431 ? "request headers too large"
                        : code == 411 ? "Transfer-Encoding is not accepted; send Content-Length"
                                      : "malformed request";
      refuse(code, msg, scan.reason);
      return true;
    }
    // The length limit before the parser sees the head (it would refuse a
    // large Content-Length as a parse error, 400, instead of 413).
    auto cl = scan.headers.find("Content-Length");
    if (cl != scan.headers.end()) {
      const std::string& v = cl->second;
      if (v.empty() || v.size() > 18 || v.find_first_not_of("0123456789") != std::string::npos) {
        refuse(400, "bad Content-Length", "bad Content-Length");
        return true;
      }
      if (std::stoull(v) > l_.opt.max_body_bytes) {
        refuse(413, "body larger than " + std::to_string(l_.opt.max_body_bytes) + " bytes", "body too large");
        return true;
      }
    }
    parser_.emplace();
    parser_->header_limit(static_cast<std::uint32_t>(l_.opt.max_header_bytes + 1024));
    parser_->body_limit(l_.opt.max_body_bytes);
    parser_->eager(false);
    beast::error_code ec;
    std::size_t used = parser_->put(asio::buffer(p, scan.head_bytes), ec);
    if (ec || !parser_->is_header_done()) {
      refuse(400, "malformed request", ec ? ec.message() : "incomplete head");
      return true;
    }
    buf_.consume(used);
    auto& req = parser_->get();
    meta_.method = std::string(req.method_string());
    meta_.target = std::string(req.target());
    meta_.headers = std::move(scan.headers);
    meta_.nul_bytes = scan.nul_bytes;
    keep_alive_ = req.keep_alive();
    check_and_read_body();
    return true;
  }

  void request_line(std::string_view raw) {
    std::size_t eol = raw.find('\r');
    std::string_view line = raw.substr(0, eol);
    std::size_t a = line.find(' ');
    meta_.method = printable(line.substr(0, a), 16);
    if (a != std::string_view::npos) {
      std::string_view rest = line.substr(a + 1);
      meta_.target = printable(rest.substr(0, rest.find(' ')));
    }
  }

  // Limits that need only the head, before any body byte is read (and
  // before 100 Continue is sent).
  void check_and_read_body() {
    const Headers& h = meta_.headers;
    if (const char* ce = find_header(h, "Content-Encoding"); ce && lower_trim(ce) != "identity")
      return refuse(415, "Content-Encoding is not accepted; send the body uncompressed", "Content-Encoding");
    auto length = parser_->content_length();
    if (!length && meta_.method == "POST") return refuse(411, "Content-Length required", "no Content-Length");
    if (length && *length > l_.opt.max_body_bytes)
      return refuse(413, "body larger than " + std::to_string(l_.opt.max_body_bytes) + " bytes", "body too large");
    if (parser_->is_done()) return dispatch();
    const char* expect = find_header(h, "Expect");
    // The whole body is usually in the buffer already (it came in the same
    // segments as the head): parse it here instead of a read operation that
    // would complete at once but cost a trip through the I/O queue.
    if (!expect && length && buf_.size() >= *length) {
      parser_->eager(true);
      beast::error_code ec;
      std::size_t used = parser_->put(buf_.data(), ec);
      if (ec == http::error::body_limit) return refuse(413, "body too large", "body limit");
      if (ec && ec != http::error::need_more) return close();
      buf_.consume(used);
      if (parser_->is_done()) return dispatch();
    }
    if (expect && lower_trim(expect) == "100-continue") {
      static const char kContinue[] = "HTTP/1.1 100 Continue\r\n\r\n";
      stream_.expires_after(std::chrono::milliseconds(l_.opt.write_timeout_ms));
      asio::async_write(stream_, asio::buffer(kContinue, sizeof kContinue - 1),
                        [self = shared_from_this()](beast::error_code ec, std::size_t) {
                          if (ec) return self->close();
                          self->read_body();
                        });
      return;
    }
    read_body();
  }

  // A minimum rate: the head's grace plus length / min_body_rate.
  void read_body() {
    std::uint64_t length = parser_->content_length().value_or(0);
    auto budget = std::chrono::milliseconds(l_.opt.head_timeout_ms) +
                  std::chrono::milliseconds(length * 1000 / std::max<std::size_t>(1, l_.opt.min_body_rate));
    stream_.expires_after(budget);
    http::async_read(stream_, buf_, *parser_, [self = shared_from_this()](beast::error_code ec, std::size_t) {
      if (ec == beast::error::timeout) return self->cut_off("body too slow");
      if (ec == http::error::body_limit) return self->refuse(413, "body too large", "body limit");
      if (ec) return self->close();
      self->dispatch();
    });
  }

  void dispatch() {
    // The handler gets the headers and body; meta_ keeps what the log needs.
    HttpRequest req;
    req.method = meta_.method;
    req.target = meta_.target;
    req.remote = meta_.remote;
    req.nul_bytes = meta_.nul_bytes;
    req.headers = std::move(meta_.headers);
    meta_.headers.clear();
    req.body = parser_->release().body();
    parser_.reset();
    {
      std::lock_guard<std::mutex> lock(l_.mu);
      ++l_.in_flight;
    }
    auto self = shared_from_this();
    auto once = std::make_shared<std::atomic<bool>>(false);
    Respond respond = [self, once](HttpResponse res) {
      if (once->exchange(true)) return;
      const Strand* strand = self->stream_.get_executor().target<Strand>();
      if (strand && !strand->running_in_this_thread()) return self->write_outside(std::move(res));
      asio::dispatch(self->stream_.get_executor(),
                     [self, res = std::move(res)]() mutable { self->write(std::move(res), true); });
    };
    stream_.expires_never();  // the handler's own deadline applies
    l_.handler.handle(std::move(req), std::move(respond), stream_.get_executor());
  }

  // Refused before routing: answered, logged with its own (empty) provider,
  // and the connection closed (its body, if any, is never read).
  void refuse(int status, const std::string& message, const std::string& cause) {
    HttpResponse res;
    res.status = status;
    res.body = "{\"error\":\"" + message + "\"}";
    res.close = true;
    res.outcome = status == 431 ? "refused_head" : status == 400 ? "bad_request" : "refused_body";
    res.error = cause;
    write(std::move(res), false);
  }

  void cut_off(const char* why) {
    HttpResponse res;
    res.status = 408;
    res.outcome = "timeout";
    res.error = why;
    l_.handler.answered(meta_, res, std::chrono::duration<double>(Clock::now() - start_).count());
    close();
  }

  void write(HttpResponse res, bool routed) {
    beast::error_code ec;
    std::size_t sent = 0;
    bool close_after = send_now(std::move(res), sent, ec);
    finish_write(sent, ec, close_after, routed);
  }

  // The answer from a thread outside the connection's strand (a flusher
  // with the commit's outcome). While a request is with the handler nothing
  // on the strand touches the connection (no read is pending, the stream's
  // timer is off, the answer is given once), so this thread sends the answer
  // itself: the sender has it without waiting for an I/O thread to wake.
  // What follows (the rest of a long answer, the next read) goes back to the
  // strand.
  void write_outside(HttpResponse res) {
    beast::error_code ec;
    std::size_t sent = 0;
    bool close_after = send_now(std::move(res), sent, ec);
    asio::post(stream_.get_executor(), [self = shared_from_this(), sent, ec, close_after] {
      self->finish_write(sent, ec, close_after, true);
    });
  }

  // Serializes, counts and logs the answer and sends what the socket takes
  // without waiting; true when the connection closes after it.
  bool send_now(HttpResponse res, std::size_t& sent, beast::error_code& ec) {
    ++served_;
    bool keep = keep_alive_ && !res.close && !l_.stopping.load() && served_ < l_.opt.keep_alive_max_requests;
    serialize(res, keep);
    res.close = !keep;
    // Logged and counted before the answer goes out, so that whoever reads
    // the answer finds it in /metrics already.
    l_.handler.answered(meta_, res, std::chrono::duration<double>(Clock::now() - start_).count());
    // Most answers fit the socket's send buffer: sent at once, without a
    // trip through the I/O queue (the socket is non-blocking).
    sent = stream_.socket().write_some(asio::buffer(out_), ec);
    if (ec == asio::error::would_block || ec == asio::error::try_again) ec = {}, sent = 0;
    return res.close;
  }

  // On the strand: the rest of the answer (a full send buffer, a slow
  // reader) under the write deadline, then what comes next.
  void finish_write(std::size_t sent, beast::error_code ec, bool close_after, bool routed) {
    if (ec || sent == out_.size()) return written(ec, close_after, routed);
    stream_.expires_after(std::chrono::milliseconds(l_.opt.write_timeout_ms));
    asio::async_write(stream_, asio::buffer(out_.data() + sent, out_.size() - sent),
                      [self = shared_from_this(), close_after, routed](beast::error_code ec, std::size_t) {
                        self->written(ec, close_after, routed);
                      });
  }

  // The answer as bytes, into the connection's own buffer (reused): the same
  // status line and fields Beast would write, without building a message.
  void serialize(const HttpResponse& res, bool keep) {
    auto status = static_cast<http::status>(res.status);
    out_.clear();
    out_ += "HTTP/1.1 ";
    out_ += std::to_string(res.status);
    out_ += ' ';
    out_ += http::obsolete_reason(status);
    out_ += "\r\nContent-Type: ";
    out_ += res.content_type;
    for (const auto& [k, v] : res.headers) {
      out_ += "\r\n";
      out_ += k;
      out_ += ": ";
      out_ += v;
    }
    if (!keep) out_ += "\r\nConnection: close";
    out_ += "\r\nContent-Length: ";
    out_ += std::to_string(res.body.size());
    out_ += "\r\n\r\n";
    out_ += res.body;
  }

  void written(beast::error_code ec, bool close_after, bool routed) {
    if (routed) {
      std::lock_guard<std::mutex> lock(l_.mu);
      if (--l_.in_flight == 0) l_.drained.notify_all();
    }
    if (ec) return close();
    if (close_after) return linger();
    head_started_ = false;
    // A pipelined request already buffered: through the queue, so that a
    // buffer full of tiny requests answered inline cannot nest calls deeply.
    if (buf_.size() > 0)
      return asio::post(stream_.get_executor(), [self = shared_from_this()] { self->read_head(); });
    read_head();
  }

  // Closing with unread bytes in the socket makes the kernel send a reset,
  // which can destroy the answer before the client reads it: stop sending,
  // then read and discard what the client still sends, for a short while.
  void linger() {
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
    if (ec) return close();
    buf_.clear();
    lingered_ = 0;
    stream_.expires_after(std::chrono::milliseconds(1000));
    discard();
  }

  void discard() {
    stream_.async_read_some(buf_.prepare(65536), [self = shared_from_this()](beast::error_code ec, std::size_t n) {
      self->buf_.clear();
      self->lingered_ += n;
      if (ec || self->lingered_ > (4u << 20)) return self->close();
      self->discard();
    });
  }

  void close() {
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ec);
    stream_.close();
  }

  HttpListener::Impl& l_;
  beast::tcp_stream stream_;
  beast::flat_buffer buf_;
  std::optional<http::request_parser<http::string_body>> parser_;
  std::string out_;  // the answer being written
  HttpRequest meta_;  // the request being served, without its body
  std::string remote_;
  Clock::time_point start_{};
  Clock::time_point head_deadline_{};
  bool head_started_ = false;
  bool keep_alive_ = false;
  int served_ = 0;
  std::size_t lingered_ = 0;
};

}  // namespace

void HttpListener::Impl::accept() {
  acceptor.async_accept(asio::make_strand(ioc), [this](beast::error_code ec, tcp::socket socket) {
    if (ec == asio::error::operation_aborted || stopping.load()) return;
    if (!ec) {
      beast::error_code ignored;
      if (connections.load() >= opt.max_connections) {
        socket.close(ignored);  // the cap: new connections wait in nobody's memory
      } else {
        socket.set_option(tcp::no_delay(true), ignored);  // no 40 ms Nagle delay per answer
        socket.non_blocking(true, ignored);  // write() tries a plain send first
        std::make_shared<Connection>(*this, std::move(socket))->run();
      }
    }
    accept();
  });
}

HttpListener::HttpListener(ListenerOptions options, HttpHandler& handler)
    : impl_(std::make_unique<Impl>(std::move(options), handler)) {}

HttpListener::~HttpListener() { stop(0); }

int HttpListener::bind() {
  auto& a = impl_->acceptor;
  tcp::endpoint ep(asio::ip::make_address(impl_->opt.host), static_cast<unsigned short>(impl_->opt.port));
  a.open(ep.protocol());
  a.set_option(asio::socket_base::reuse_address(true));
  a.bind(ep);
  a.listen(impl_->opt.backlog);
  return a.local_endpoint().port();
}

void HttpListener::start() {
  impl_->accept();
  for (int i = 0; i < impl_->opt.threads; ++i) impl_->threads.emplace_back([this] { impl_->ioc.run(); });
}

void HttpListener::stop(int drain_ms) {
  Impl& l = *impl_;
  if (l.stopping.exchange(true)) return;
  asio::post(l.ioc, [&l] {
    beast::error_code ec;
    l.acceptor.close(ec);
  });
  {
    std::unique_lock<std::mutex> lock(l.mu);
    l.drained.wait_for(lock, std::chrono::milliseconds(drain_ms), [&] { return l.in_flight == 0; });
  }
  // Let the last answers reach the wire before the sockets go.
  if (drain_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  l.ioc.stop();
  for (auto& t : l.threads)
    if (t.joinable()) t.join();
}

std::size_t HttpListener::connections() const { return impl_->connections.load(); }

}  // namespace inbox
