// The listener alone, with a handler that answers from its own thread, as the
// group commit does: no database needed.
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <mutex>
#include <thread>

#include "intake/http_listener.h"
#include "test_support.h"

using namespace inbox;
using namespace inbox::test;
using namespace std::chrono_literals;

namespace {

// Keeps each request's respond and answers nothing until told.
class HeldHandler : public HttpHandler {
 public:
  void handle(HttpRequest, Respond respond, boost::asio::any_io_executor) override {
    std::lock_guard<std::mutex> lock(mu_);
    held_ = std::move(respond);
    arrived_.set_value();
  }
  void answered(const HttpRequest&, const HttpResponse&, double) override {}

  std::future<void> arrived() { return arrived_.get_future(); }
  void answer() {
    Respond r;
    {
      std::lock_guard<std::mutex> lock(mu_);
      r = std::move(held_);
    }
    r(HttpResponse{});
  }

 private:
  std::mutex mu_;
  Respond held_;
  std::promise<void> arrived_;
};

}  // namespace

// Once stop() closed the acceptor, a request handed to the handler has no I/O
// pending: the I/O threads must still be there to write its answer when it
// comes, from another thread, during the drain.
TEST(HttpListenerTest, AnswerGivenDuringTheDrainIsWritten) {
  HeldHandler handler;
  HttpListener listener(ListenerOptions{}, handler);
  int port = listener.bind();
  listener.start();
  auto arrived = handler.arrived();
  auto client = std::async(std::launch::async, [port] { return get(port, "/held").status; });
  ASSERT_EQ(arrived.wait_for(10s), std::future_status::ready);

  auto t0 = std::chrono::steady_clock::now();
  std::thread stopper([&] { listener.stop(20000); });
  std::this_thread::sleep_for(300ms);  // the acceptor is closed by now
  handler.answer();
  stopper.join();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 10s) << "the drain waited for an answer nobody wrote";
  EXPECT_EQ(client.get(), 200);
}
