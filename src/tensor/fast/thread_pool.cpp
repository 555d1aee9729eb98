#include "inferlab/tensor/fast/thread_pool.h"
#include "inferlab/util/thread_name.h"

#include <immintrin.h>

#include <memory>
#include <mutex>
#include <string>

#include "inferlab/util/error.h"

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
  for (int i = 1; i < threads_; ++i) workers_.emplace_back([this, i] {
    name_this_thread(("compute-" + std::to_string(i)).c_str());
    worker_loop(i);
  });
}

ThreadPool::~ThreadPool() {
  stop_.store(true, std::memory_order_release);
  publish(0);
  for (auto& worker : workers_) worker.join();
}

namespace {
// chunk_state_: [run counter : 20 | next chunk : 22 | chunk count : 22]. One CAS claims a chunk of
// exactly the run it saw, so a late worker can never take a chunk of a finished run.
constexpr uint64_t kChunkBits = 22, kChunkMask = (uint64_t(1) << kChunkBits) - 1;
uint64_t next_of(uint64_t state) { return (state >> kChunkBits) & kChunkMask; }
uint64_t total_of(uint64_t state) { return state & kChunkMask; }
}  // namespace

bool ThreadPool::claim_chunks() {
  bool any = false;
  uint64_t state = chunk_state_.load(std::memory_order_acquire);
  for (;;) {
    if (next_of(state) >= total_of(state)) return any;
    if (!chunk_state_.compare_exchange_weak(state, state + (uint64_t(1) << kChunkBits), std::memory_order_acq_rel))
      continue;
    // The run is live until this chunk is counted done, so chunk_task_ is still its body.
    const int64_t chunk = static_cast<int64_t>(next_of(state));
    try {
      (*chunk_task_)(chunk);
    } catch (...) {
      if (!failed_.exchange(true)) error_ = std::current_exception();
    }
    any = true;
    const int64_t done = chunks_done_.fetch_add(1, std::memory_order_acq_rel) + 1;
    if (done == static_cast<int64_t>(total_of(state))) chunks_done_.notify_one();
    state = chunk_state_.load(std::memory_order_acquire);
  }
}

void ThreadPool::worker_loop(int index) {
  uint32_t seen = 0;  // the value at construction: a run() issued before this thread starts is not missed
  for (;;) {
    spin_then_wait(generation_, seen, [&] { return generation_.load(std::memory_order_acquire) != seen; });
    seen = generation_.load(std::memory_order_acquire);
    if (stop_.load(std::memory_order_acquire)) return;
    if (seen & 1) {  // run_chunks: take chunks while any are left; the caller waits for none of us
      claim_chunks();
      continue;
    }
    try {
      (*task_)(index, threads_);
    } catch (...) {
      if (!failed_.exchange(true)) error_ = std::current_exception();
    }
    if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) pending_.notify_one();
  }
}

void ThreadPool::publish(uint32_t mode) {
  const uint32_t g = generation_.load(std::memory_order_relaxed);
  generation_.store((((g >> 1) + 1) << 1) | mode, std::memory_order_release);
  generation_.notify_all();
}

void ThreadPool::run_chunks(int64_t chunks, const std::function<void(int64_t chunk)>& body) {
  if (chunks <= 0) return;
  if (threads_ == 1 || chunks == 1 || static_cast<uint64_t>(chunks) > kChunkMask) {
    for (int64_t c = 0; c < chunks; ++c) body(c);
    return;
  }
  std::lock_guard turn(run_mutex_);
  chunk_task_ = &body;
  failed_.store(false);
  error_ = nullptr;
  chunks_done_.store(0, std::memory_order_relaxed);
  const uint64_t counter = (chunk_state_.load(std::memory_order_relaxed) >> (2 * kChunkBits)) + 1;
  chunk_state_.store((counter << (2 * kChunkBits)) | static_cast<uint64_t>(chunks), std::memory_order_release);
  publish(1);
  claim_chunks();
  // Only chunks already claimed by a worker are waited for; a worker still asleep takes nothing.
  int64_t done = chunks_done_.load(std::memory_order_acquire);
  spin_then_wait(chunks_done_, done, [&] { return chunks_done_.load(std::memory_order_acquire) == chunks; });
  if (failed_.load()) std::rethrow_exception(error_);
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
  publish(0);
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
