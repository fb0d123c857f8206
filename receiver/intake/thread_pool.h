// The HTTP worker pool: a fixed number of threads and a bounded queue of
// accepted connections. cpp-httplib 0.11.4's own ThreadPool queues without a
// bound; here the accept loop waits when the queue is full, so excess
// connections stay in the kernel's listen backlog (and then are refused by
// TCP) instead of piling up as open sockets in the process.
#pragma once

#include <httplib.h>

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace inbox {

class BoundedThreadPool final : public httplib::TaskQueue {
 public:
  BoundedThreadPool(std::size_t threads, std::size_t max_queued);
  ~BoundedThreadPool() override;

  // Called by the accept loop; blocks while max_queued connections wait.
  void enqueue(std::function<void()> fn) override;
  // Runs what is queued, then joins the workers.
  void shutdown() override;

  std::size_t queued() const;

 private:
  void worker();

  const std::size_t max_queued_;
  mutable std::mutex mu_;
  std::condition_variable work_cv_;   // workers: a task or shutdown
  std::condition_variable space_cv_;  // accept loop: room in the queue
  std::deque<std::function<void()>> queue_;
  bool shutting_down_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace inbox
