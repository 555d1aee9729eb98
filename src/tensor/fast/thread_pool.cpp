#include "inferlab/fast/thread_pool.h"

#include <immintrin.h>

#include <memory>
#include <mutex>

#include "inferlab/error.h"

namespace inferlab::fast {

namespace {
// About 50 µs of spinning (pause is ~65 cycles on Zen) before a futex wait: covers the gap
// between two matmuls of one decode step, and gives the core back soon when the machine is
// oversubscribed or idle between requests.
constexpr int kSpinIterations = 3000;

template <typename T, typename Pred>
void spin_then_wait(const std::atomic<T>& value, T seen, Pred done) {
  for (int i = 0; i < kSpinIterations; ++i) {
    if (done()) return;
    _mm_pause();
  }
  while (!done()) value.wait(seen, std::memory_order_acquire), seen = value.load(std::memory_order_acquire);
}
}  // namespace

ThreadPool::ThreadPool(int threads) {
  if (threads <= 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  threads_ = threads;
  for (int i = 1; i < threads_; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
  stop_.store(true, std::memory_order_release);
  generation_.fetch_add(1, std::memory_order_acq_rel);
  generation_.notify_all();
  for (auto& worker : workers_) worker.join();
}

void ThreadPool::worker_loop(int index) {
  uint32_t seen = 0;  // the value at construction: a run() issued before this thread starts is not missed
  for (;;) {
    spin_then_wait(generation_, seen, [&] { return generation_.load(std::memory_order_acquire) != seen; });
    seen = generation_.load(std::memory_order_acquire);
    if (stop_.load(std::memory_order_acquire)) return;
    try {
      (*task_)(index, threads_);
    } catch (...) {
      if (!failed_.exchange(true)) error_ = std::current_exception();
    }
    if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) pending_.notify_one();
  }
}

void ThreadPool::run(const std::function<void(int, int)>& task) {
  if (threads_ == 1) {
    task(0, 1);
    return;
  }
  // Callers on different threads (two engines, a loader beside a server) take turns.
  std::lock_guard turn(run_mutex_);
  task_ = &task;
  failed_.store(false);
  error_ = nullptr;
  pending_.store(threads_ - 1, std::memory_order_release);
  generation_.fetch_add(1, std::memory_order_acq_rel);
  generation_.notify_all();
  std::exception_ptr own_error;
  try {
    task(0, threads_);
  } catch (...) {
    own_error = std::current_exception();
  }
  int left = pending_.load(std::memory_order_acquire);
  spin_then_wait(pending_, left, [&] { return pending_.load(std::memory_order_acquire) == 0; });
  task_ = nullptr;
  if (own_error) std::rethrow_exception(own_error);
  if (failed_.load()) std::rethrow_exception(error_);
}

void ThreadPool::parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& body) {
  if (n <= 0) return;
  if (threads_ == 1 || n == 1) {
    body(0, n);
    return;
  }
  run([&](int thread, int count) {
    const int64_t begin = n * thread / count, end = n * (thread + 1) / count;
    if (begin < end) body(begin, end);
  });
}

namespace {
std::mutex pool_mutex;
std::unique_ptr<ThreadPool> pool;
int requested_threads = 0;
}  // namespace

ThreadPool& kernel_pool() {
  std::lock_guard lock(pool_mutex);
  if (!pool) pool = std::make_unique<ThreadPool>(requested_threads);
  return *pool;
}

void set_threads(int threads) {
  if (threads < 0) fail("thread count must be 0 (all cores) or positive, got {}", threads);
  std::lock_guard lock(pool_mutex);
  requested_threads = threads;
  const int want = threads > 0 ? threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  if (!pool || pool->size() != want) {
    pool.reset();
    pool = std::make_unique<ThreadPool>(want);
  }
}

int threads() { return kernel_pool().size(); }

}  // namespace inferlab::fast
