#include "server/sessions/checkpoint_writer.h"

#include "absl/time/clock.h"

namespace linserve {

CheckpointWriter::CheckpointWriter(StateStore* store, Metrics* metrics)
    : store_(store), metrics_(metrics), thread_([this] { Run(); }) {}

CheckpointWriter::~CheckpointWriter() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  thread_.join();
}

void CheckpointWriter::Put(StoredSessionKey key, SessionRecord record, Done done) {
  Put(std::move(key), std::move(record), WriteFence{/*expected_version=*/-1, ""}, std::move(done));
}

void CheckpointWriter::Put(StoredSessionKey key, SessionRecord record, WriteFence fence,
                           Done done) {
  absl::MutexLock lock(&mu_);
  jobs_.push_back({false, std::move(key), std::move(record), std::move(fence), std::move(done)});
  ++queued_;
}

void CheckpointWriter::Delete(StoredSessionKey key, Done done) {
  absl::MutexLock lock(&mu_);
  jobs_.push_back({true, std::move(key), SessionRecord{}, WriteFence{}, std::move(done)});
  ++queued_;
}

void CheckpointWriter::Flush() {
  absl::MutexLock lock(&mu_);
  struct Reached {
    const uint64_t* done;
    uint64_t target;
  } reached{&done_, queued_};
  mu_.Await(absl::Condition(+[](Reached* r) { return *r->done >= r->target; }, &reached));
}

void CheckpointWriter::Run() {
  while (true) {
    Job job;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](CheckpointWriter* w) ABSL_EXCLUSIVE_LOCKS_REQUIRED(w->mu_) {
            return w->stopping_ || !w->jobs_.empty();
          },
          this));
      if (jobs_.empty()) return;  // stopping, and nothing left
      job = std::move(jobs_.front());
      jobs_.pop_front();
    }
    absl::Status status;
    if (job.is_delete) {
      status = store_->Delete(job.key);
    } else {
      const absl::Time start = absl::Now();
      status = store_->PutFenced(job.key, EncodeStateFile(job.record), job.fence).status();
      metrics_->session_save_seconds().Observe(absl::ToDoubleSeconds(absl::Now() - start));
    }
    if (job.done) job.done(status);
    absl::MutexLock lock(&mu_);
    ++done_;
  }
}

}  // namespace linserve
