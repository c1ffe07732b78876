// The engine's thread pool (engine/cpu/engine_threads.h): spans cut by the
// caller's grain alone, run once each, on several threads at once; nested
// and concurrent calls, exceptions and resizes. CI runs it under
// ThreadSanitizer too (scripts/test-sanitized tsan threads).

#include "engine/cpu/engine_threads.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

namespace linserve {
namespace {

using Spans = std::vector<std::pair<int64_t, int64_t>>;

// Restores the pool's size at the end of a test.
class EngineThreadsTest : public ::testing::Test {
 protected:
  void TearDown() override { SetEngineThreads(1); }
};

Spans SpansOf(int64_t n, int64_t grain) {
  std::mutex mutex;
  Spans spans;
  ParallelFor(n, grain, [&](int64_t begin, int64_t end) {
    std::lock_guard<std::mutex> lock(mutex);
    spans.emplace_back(begin, end);
  });
  std::sort(spans.begin(), spans.end());
  return spans;
}

TEST_F(EngineThreadsTest, SpansAreCutByTheGrainAloneAtAnyThreadCount) {
  for (int threads : {1, 2, 3, 4, 7}) {
    SetEngineThreads(threads);
    ASSERT_EQ(EngineThreads(), threads);
    // Fewer spans than threads, as many, more, a short last span, none.
    for (const auto& [n, grain] : std::vector<std::pair<int64_t, int64_t>>{
             {1, 1}, {2, 1}, {3, 2}, {10, 3}, {1000, 7}, {5, 100}, {0, 4}, {6, 0}}) {
      Spans expected;
      const int64_t step = std::max<int64_t>(grain, 1);
      for (int64_t begin = 0; begin < n; begin += step) {
        expected.emplace_back(begin, std::min(n, begin + step));
      }
      EXPECT_EQ(SpansOf(n, grain), expected) << threads << " threads, n " << n << ", grain "
                                             << grain;
    }
  }
}

// Each of the two spans waits until the other has started: only two
// threads at once get both through. A pool that ran them one after the
// other would fail at the deadline, which a working pool never nears.
TEST_F(EngineThreadsTest, SpansRunOnSeveralThreadsAtOnce) {
  SetEngineThreads(2);
  std::atomic<int> started{0};
  std::atomic<bool> met{true};
  std::mutex mutex;
  std::vector<std::thread::id> ids;
  ParallelFor(2, 1, [&](int64_t, int64_t) {
    {
      std::lock_guard<std::mutex> lock(mutex);
      ids.push_back(std::this_thread::get_id());
    }
    started.fetch_add(1);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (started.load() < 2) {
      if (std::chrono::steady_clock::now() > deadline) {
        met = false;
        return;
      }
      std::this_thread::yield();
    }
  });
  EXPECT_TRUE(met.load());
  ASSERT_EQ(ids.size(), 2u);
  EXPECT_NE(ids[0], ids[1]);
}

TEST_F(EngineThreadsTest, ACallInsideASpanRunsItsSpansInline) {
  SetEngineThreads(3);
  std::atomic<int64_t> inner_total{0};
  std::atomic<int> inner_spans{0};
  ParallelFor(6, 1, [&](int64_t, int64_t) {
    const std::thread::id outer = std::this_thread::get_id();
    ParallelFor(10, 2, [&](int64_t begin, int64_t end) {
      EXPECT_EQ(std::this_thread::get_id(), outer);
      inner_total.fetch_add(end - begin);
      inner_spans.fetch_add(1);
    });
  });
  EXPECT_EQ(inner_total.load(), 60);
  EXPECT_EQ(inner_spans.load(), 30);
}

TEST_F(EngineThreadsTest, TheFirstExceptionComesBackAfterEverySpanRan) {
  SetEngineThreads(4);
  std::atomic<int> ran{0};
  EXPECT_THROW(ParallelFor(40, 1,
                           [&](int64_t begin, int64_t) {
                             ran.fetch_add(1);
                             if (begin % 10 == 3) throw std::runtime_error("span failed");
                           }),
               std::runtime_error);
  EXPECT_EQ(ran.load(), 40);
  // The pool still works.
  EXPECT_EQ(SpansOf(9, 2).size(), 5u);
}

// Callers on several threads at once: one job holds the pool, the others
// run on their own threads; every call gets all its spans, none waits on
// another.
TEST_F(EngineThreadsTest, CallersOnSeveralThreadsAllFinish) {
  SetEngineThreads(2);
  constexpr int kCallers = 4, kCalls = 200;
  std::vector<int64_t> totals(kCallers, 0);
  std::vector<std::thread> callers;
  for (int c = 0; c < kCallers; ++c) {
    callers.emplace_back([&, c] {
      for (int call = 0; call < kCalls; ++call) {
        std::atomic<int64_t> total{0};
        ParallelFor(64, 4, [&](int64_t begin, int64_t end) { total.fetch_add(end - begin); });
        totals[c] += total.load();
      }
    });
  }
  for (std::thread& t : callers) t.join();
  for (int c = 0; c < kCallers; ++c) EXPECT_EQ(totals[c], int64_t{64} * kCalls) << c;
}

TEST_F(EngineThreadsTest, ResizingBetweenJobsKeepsEveryJobWhole) {
  for (int round = 0; round < 20; ++round) {
    SetEngineThreads(1 + round % 4);
    std::vector<int> hits(100, 0);
    ParallelFor(100, 3, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) ++hits[i];  // each index in one span only
    });
    EXPECT_EQ(std::count(hits.begin(), hits.end(), 1), 100) << round;
  }
}

TEST(AvailableCoresTest, CountsAtLeastOneCore) {
  EXPECT_GE(AvailableCores(), 1);
  EXPECT_LE(AvailableCores(), static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
}

}  // namespace
}  // namespace linserve
