// A persistent pool for kernels: workers are created once and park on a spin-then-wait barrier,
// so a decode step's ~170 small matmuls cost no thread creation and little wake-up latency.
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace inferlab::fast {

class ThreadPool {
 public:
  // threads: workers including the caller (0: hardware concurrency).
  explicit ThreadPool(int threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return threads_; }

  // Calls task(thread_index, thread_count) once on every thread (the caller is thread 0) and
  // returns when all have finished. Calls from several threads are serialised; a task must not
  // call run() on the same pool (that would deadlock).
  // An exception thrown by a task is rethrown here after all threads are done.
  void run(const std::function<void(int thread, int threads)>& task);

  // body(chunk) for every chunk in [0, chunks), claimed one at a time by whichever threads are
  // running (the caller included). Returns when all are done without waiting for a worker that
  // has not woken up: on a busy machine a descheduled worker costs nothing.
  void run_chunks(int64_t chunks, const std::function<void(int64_t chunk)>& body);

  // Splits [0, n) into contiguous ranges, one per thread: body(begin, end).
  void parallel_for(int64_t n, const std::function<void(int64_t begin, int64_t end)>& body);

 private:
  void worker_loop(int index);
  bool claim_chunks();
  void publish(uint32_t mode);  // new generation; low bit: 0 run(), 1 run_chunks()

  int threads_;
  std::vector<std::thread> workers_;
  const std::function<void(int, int)>* task_ = nullptr;
  std::atomic<uint32_t> generation_{0};
  std::atomic<int> pending_{0};
  std::atomic<bool> stop_{false};
  std::exception_ptr error_;
  std::atomic<bool> failed_{false};
  std::mutex run_mutex_;
  const std::function<void(int64_t)>* chunk_task_ = nullptr;
  std::atomic<uint64_t> chunk_state_{0};
  std::atomic<int64_t> chunks_done_{0};
};

// The pool every kernel uses; resized by set_threads (0: all cores). Created on first use.
ThreadPool& kernel_pool();
void set_threads(int threads);
int threads();

}  // namespace inferlab::fast
