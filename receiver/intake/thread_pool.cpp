#include "intake/thread_pool.h"

namespace inbox {

BoundedThreadPool::BoundedThreadPool(std::size_t threads, std::size_t max_queued)
    : max_queued_(max_queued) {
  for (std::size_t i = 0; i < threads; ++i) threads_.emplace_back([this] { worker(); });
}

BoundedThreadPool::~BoundedThreadPool() { shutdown(); }

void BoundedThreadPool::enqueue(std::function<void()> fn) {
  {
    std::unique_lock<std::mutex> lock(mu_);
    space_cv_.wait(lock, [&] { return queue_.size() < max_queued_ || shutting_down_; });
    // Even when shutting down the task runs: it owns the accepted socket and
    // closes it (cpp-httplib's loop sees the listener gone and answers nothing).
    queue_.push_back(std::move(fn));
  }
  work_cv_.notify_one();
}

void BoundedThreadPool::shutdown() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (shutting_down_ && threads_.empty()) return;
    shutting_down_ = true;
  }
  work_cv_.notify_all();
  space_cv_.notify_all();
  for (auto& t : threads_) t.join();
  threads_.clear();
}

std::size_t BoundedThreadPool::queued() const {
  std::lock_guard<std::mutex> lock(mu_);
  return queue_.size();
}

void BoundedThreadPool::worker() {
  for (;;) {
    std::function<void()> fn;
    {
      std::unique_lock<std::mutex> lock(mu_);
      work_cv_.wait(lock, [&] { return shutting_down_ || !queue_.empty(); });
      if (queue_.empty()) return;  // shutting down and drained
      fn = std::move(queue_.front());
      queue_.pop_front();
    }
    space_cv_.notify_one();
    fn();
  }
}

}  // namespace inbox
