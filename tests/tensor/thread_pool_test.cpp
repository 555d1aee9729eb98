#include <gtest/gtest.h>

#include <atomic>
#include <stdexcept>
#include <vector>

#include "inferlab/tensor/fast/thread_pool.h"

using inferlab::fast::ThreadPool;

TEST(ThreadPool, EveryThreadRunsTheTaskOncePerRun) {
  for (int threads : {1, 2, 3, 5}) {
    ThreadPool pool(threads);
    ASSERT_EQ(pool.size(), threads);
    for (int round = 0; round < 200; ++round) {
      std::vector<std::atomic<int>> calls(threads);
      std::atomic<int> seen_count{0};
      pool.run([&](int thread, int count) {
        calls[thread].fetch_add(1);
        if (count == threads) seen_count.fetch_add(1);
      });
      for (int t = 0; t < threads; ++t) ASSERT_EQ(calls[t].load(), 1) << "thread " << t << " round " << round;
      ASSERT_EQ(seen_count.load(), threads);
    }
  }
}

TEST(ThreadPool, ParallelForCoversTheRangeExactlyOnce) {
  ThreadPool pool(3);
  for (int64_t n : {0, 1, 2, 7, 1000, 12345}) {
    std::vector<std::atomic<int>> hits(static_cast<std::size_t>(n));
    pool.parallel_for(n, [&](int64_t begin, int64_t end) {
      ASSERT_LE(0, begin);
      ASSERT_LE(end, n);
      for (int64_t i = begin; i < end; ++i) hits[static_cast<std::size_t>(i)].fetch_add(1);
    });
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[static_cast<std::size_t>(i)].load(), 1) << "n=" << n << " i=" << i;
  }
}

TEST(ThreadPool, ManyShortRunsAfterIdlePeriodsDoNotHang) {
  // Alternates back-to-back runs (spinning workers) with pauses long enough for them to sleep.
  ThreadPool pool(2);
  std::atomic<int64_t> total{0};
  for (int round = 0; round < 20; ++round) {
    for (int i = 0; i < 500; ++i) pool.run([&](int, int) { total.fetch_add(1); });
    std::this_thread::sleep_for(std::chrono::milliseconds(round % 4 == 0 ? 5 : 0));
  }
  EXPECT_EQ(total.load(), 20 * 500 * 2);
}

TEST(ThreadPool, ATaskExceptionReachesTheCallerAndThePoolKeepsWorking) {
  ThreadPool pool(2);
  EXPECT_THROW(pool.run([](int thread, int) {
    if (thread == 1) throw std::runtime_error("worker failed");
  }),
               std::runtime_error);
  EXPECT_THROW(pool.run([](int thread, int) {
    if (thread == 0) throw std::runtime_error("caller failed");
  }),
               std::runtime_error);
  std::atomic<int> ran{0};
  pool.run([&](int, int) { ran.fetch_add(1); });
  EXPECT_EQ(ran.load(), 2);
}

TEST(ThreadPool, GlobalKernelPoolFollowsSetThreads) {
  inferlab::fast::set_threads(3);
  EXPECT_EQ(inferlab::fast::threads(), 3);
  inferlab::fast::set_threads(1);
  EXPECT_EQ(inferlab::fast::threads(), 1);
  EXPECT_ANY_THROW(inferlab::fast::set_threads(-2));
  inferlab::fast::set_threads(0);
  EXPECT_GE(inferlab::fast::threads(), 1);
}

TEST(ThreadPool, CallersOnSeveralThreadsTakeTurns) {
  ThreadPool pool(2);
  std::atomic<int64_t> total{0};
  std::vector<std::thread> callers;
  for (int c = 0; c < 3; ++c)
    callers.emplace_back([&] {
      for (int i = 0; i < 300; ++i) pool.run([&](int, int) { total.fetch_add(1); });
    });
  for (auto& t : callers) t.join();
  EXPECT_EQ(total.load(), 3 * 300 * 2);
}

TEST(ThreadPool, RunChunksDoesEveryChunkOnceAndMixesWithRun) {
  for (int threads : {1, 2, 3}) {
    ThreadPool pool(threads);
    for (int round = 0; round < 300; ++round) {
      const int64_t chunks = round % 7 == 0 ? 1 : 1 + round % 50;
      std::vector<std::atomic<int>> hits(static_cast<std::size_t>(chunks));
      pool.run_chunks(chunks, [&](int64_t c) { hits[static_cast<std::size_t>(c)].fetch_add(1); });
      for (int64_t c = 0; c < chunks; ++c) ASSERT_EQ(hits[static_cast<std::size_t>(c)].load(), 1) << "round " << round;
      if (round % 3 == 0) {  // static runs in between still reach every thread exactly once
        std::atomic<int> calls{0};
        pool.run([&](int, int) { calls.fetch_add(1); });
        ASSERT_EQ(calls.load(), threads);
      }
      if (round % 50 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    EXPECT_THROW(pool.run_chunks(5, [](int64_t c) {
      if (c == 3) throw std::runtime_error("chunk failed");
    }),
                 std::runtime_error);
  }
}
