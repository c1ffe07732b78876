#include "engine/cpu/engine_threads.h"

#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace linserve {
namespace {

// How long a worker looks for the next job before it sleeps. A decode step
// hands the pool one product after another with a few microseconds of serial
// work between them, and waking a sleeping thread costs tens of
// microseconds; an idle engine lets its workers sleep after this.
constexpr auto kSpinBeforeSleep = std::chrono::milliseconds(2);

// A spinning thread gives its core away every this many looks, so that a
// pool larger than the machine (tests run 4 threads on 2 cores) still moves.
constexpr int kLooksPerYield = 64;

void Relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

// Waits until done() holds, spinning and yielding: the caller's wait for the
// last spans, which the other threads are running now.
template <class Done>
void SpinUntil(const Done& done) {
  for (int looks = 1; !done(); ++looks) {
    if (looks % kLooksPerYield == 0) {
      std::this_thread::yield();
    } else {
      Relax();
    }
  }
}

// Set while a thread runs spans: a ParallelFor inside a task runs inline.
thread_local bool in_task = false;

struct Job {
  engine_threads_internal::SpanFn fn = nullptr;
  const void* task = nullptr;
  int64_t n = 0;
  int64_t grain = 1;
  int64_t spans = 0;
  std::atomic<int64_t> next{0};      // the next span to hand out
  std::atomic<int64_t> finished{0};  // spans run
  std::atomic<int> workers_in{0};    // workers holding this job
  std::mutex error_mutex;
  std::exception_ptr error;

  // Runs spans until none is left.
  void RunSpans() {
    const bool was_in_task = in_task;
    in_task = true;
    for (int64_t s = next.fetch_add(1, std::memory_order_relaxed); s < spans;
         s = next.fetch_add(1, std::memory_order_relaxed)) {
      try {
        fn(task, s * grain, std::min(n, (s + 1) * grain));
      } catch (...) {
        std::lock_guard<std::mutex> lock(error_mutex);
        if (!error) error = std::current_exception();
      }
      finished.fetch_add(1, std::memory_order_release);
    }
    in_task = was_in_task;
  }
};

class Pool {
 public:
  // Not from inside a task: the job running there holds the pool.
  void Resize(int threads) {
    threads = std::max(threads, 1);
    Acquire();
    std::vector<std::thread> old;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
      ++generation_;
      old.swap(workers_);
    }
    wake_.notify_all();
    for (std::thread& t : old) t.join();
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = false;
      // A worker starts from the generation of its making: one that first
      // runs after the next resize has begun still sees that resize's stop.
      const uint64_t now = generation_.load(std::memory_order_relaxed);
      for (int i = 1; i < threads; ++i) workers_.emplace_back([this, now] { Work(now); });
      size_.store(threads, std::memory_order_relaxed);
    }
    busy_.store(false, std::memory_order_release);
  }

  int size() const { return size_.load(std::memory_order_relaxed); }

  void Run(Job& job) {
    if (size() == 1 || in_task || busy_.exchange(true, std::memory_order_acquire)) {
      job.RunSpans();  // on this thread alone
    } else {
      {
        std::lock_guard<std::mutex> lock(mutex_);
        job_ = &job;
        generation_.fetch_add(1, std::memory_order_release);
      }
      if (sleepers_.load(std::memory_order_acquire) > 0) wake_.notify_all();
      job.RunSpans();
      SpinUntil([&] { return job.finished.load(std::memory_order_acquire) == job.spans; });
      {
        std::lock_guard<std::mutex> lock(mutex_);
        job_ = nullptr;  // no worker joins from here on
      }
      SpinUntil([&] { return job.workers_in.load(std::memory_order_acquire) == 0; });
      busy_.store(false, std::memory_order_release);
    }
    if (job.error) std::rethrow_exception(job.error);
  }

 private:
  // Takes the pool for a resize: no job runs meanwhile.
  void Acquire() {
    SpinUntil([&] { return !busy_.exchange(true, std::memory_order_acquire); });
  }

  void Work(uint64_t seen) {
    for (;;) {
      WaitForNewJob(seen);
      Job* job;
      {
        std::lock_guard<std::mutex> lock(mutex_);
        if (stop_) return;
        seen = generation_.load(std::memory_order_relaxed);
        job = job_;
        if (job != nullptr) job->workers_in.fetch_add(1, std::memory_order_relaxed);
      }
      if (job == nullptr) continue;  // that job has ended already
      job->RunSpans();
      job->workers_in.fetch_sub(1, std::memory_order_release);
    }
  }

  void WaitForNewJob(uint64_t seen) {
    const auto changed = [&] { return generation_.load(std::memory_order_acquire) != seen; };
    const auto give_up = std::chrono::steady_clock::now() + kSpinBeforeSleep;
    for (int looks = 1; !changed(); ++looks) {
      if (looks % kLooksPerYield != 0) {
        Relax();
        continue;
      }
      std::this_thread::yield();
      if (std::chrono::steady_clock::now() < give_up) continue;
      std::unique_lock<std::mutex> lock(mutex_);
      sleepers_.fetch_add(1, std::memory_order_acq_rel);
      wake_.wait(lock, changed);
      sleepers_.fetch_sub(1, std::memory_order_acq_rel);
      return;
    }
  }

  std::atomic<bool> busy_{false};  // a job (or a resize) holds the pool
  std::atomic<int> size_{1};
  std::mutex mutex_;  // guards job_, stop_, workers_ and changes of generation_
  std::condition_variable wake_;
  std::atomic<uint64_t> generation_{0};  // one more per job started (and per resize)
  std::atomic<int> sleepers_{0};
  Job* job_ = nullptr;
  bool stop_ = false;
  std::vector<std::thread> workers_;
};

Pool& ThePool() {
  // Never destroyed: a worker must not outlive the pool at exit, and joining
  // threads from a static destructor can hang if exit() runs on a worker.
  static Pool* pool = new Pool();
  return *pool;
}

}  // namespace

void SetEngineThreads(int threads) { ThePool().Resize(threads); }

int EngineThreads() { return ThePool().size(); }

int AvailableCores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1u, std::thread::hardware_concurrency());
}

namespace engine_threads_internal {

void Run(int64_t n, int64_t grain, SpanFn fn, const void* task) {
  if (n <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  Job job;
  job.fn = fn;
  job.task = task;
  job.n = n;
  job.grain = grain;
  job.spans = (n + grain - 1) / grain;
  if (job.spans == 1) {
    fn(task, 0, n);  // one span: no call into the pool
    return;
  }
  ThePool().Run(job);
}

}  // namespace engine_threads_internal
}  // namespace linserve
