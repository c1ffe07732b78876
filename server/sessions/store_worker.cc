#include "server/sessions/store_worker.h"

#include <utility>

namespace linserve {

StoreWorker::StoreWorker() : thread_([this] { Loop(); }) {}

StoreWorker::~StoreWorker() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  thread_.join();
}

void StoreWorker::Run(std::function<void()> job) {
  absl::MutexLock lock(&mu_);
  jobs_.push_back(std::move(job));
  ++queued_;
}

void StoreWorker::Flush() {
  absl::MutexLock lock(&mu_);
  const uint64_t target = queued_;
  struct Arg {
    const uint64_t* done;
    uint64_t target;
  } arg{&done_, target};
  mu_.Await(absl::Condition(+[](Arg* a) { return *a->done >= a->target; }, &arg));
}

void StoreWorker::Loop() {
  while (true) {
    std::function<void()> job;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](StoreWorker* w) ABSL_NO_THREAD_SAFETY_ANALYSIS {
            return w->stopping_ || !w->jobs_.empty();
          },
          this));
      if (jobs_.empty()) return;  // stopping, and nothing left
      job = std::move(jobs_.front());
      jobs_.pop_front();
    }
    job();
    absl::MutexLock lock(&mu_);
    ++done_;
  }
}

}  // namespace linserve
