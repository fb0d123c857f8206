// The HTTP worker pool: bounded queue, the accept loop waits when it is full.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <thread>

#include "intake/thread_pool.h"

using namespace std::chrono_literals;

TEST(BoundedThreadPool, EnqueueWaitsWhileTheQueueIsFull) {
  inbox::BoundedThreadPool pool(1, 1);
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::atomic<int> ran{0};
  pool.enqueue([&] { released.wait(); ++ran; });  // occupies the only thread
  std::this_thread::sleep_for(50ms);
  pool.enqueue([&] { ++ran; });  // fills the queue (1)
  auto third = std::async(std::launch::async, [&] { pool.enqueue([&] { ++ran; }); });
  EXPECT_EQ(third.wait_for(200ms), std::future_status::timeout) << "enqueue did not wait";
  EXPECT_EQ(pool.queued(), 1u);
  release.set_value();
  EXPECT_EQ(third.wait_for(2s), std::future_status::ready);
  pool.shutdown();
  EXPECT_EQ(ran.load(), 3);  // shutdown runs what was queued
}
