#include "server/sessions/checkpoint_writer.h"

#include <utility>

#include "absl/time/clock.h"

namespace linserve {

CheckpointWriter::CheckpointWriter(StateStore* store, Metrics* metrics)
    : store_(store), metrics_(metrics) {}

CheckpointWriter::~CheckpointWriter() = default;

void CheckpointWriter::Put(StoredSessionKey key, SessionRecord record, Done done) {
  Put(std::move(key), std::move(record), WriteFence{/*expected_version=*/-1, ""}, std::move(done));
}

void CheckpointWriter::Put(StoredSessionKey key, SessionRecord record, WriteFence fence,
                           Done done) {
  worker_.Run([this, key = std::move(key), record = std::move(record), fence = std::move(fence),
               done = std::move(done)] {
    const absl::Time start = absl::Now();
    const absl::Status status = store_->PutFenced(key, EncodeStateFile(record), fence).status();
    metrics_->session_save_seconds().Observe(absl::ToDoubleSeconds(absl::Now() - start));
    if (done) done(status);
  });
}

void CheckpointWriter::Delete(StoredSessionKey key, Done done) {
  worker_.Run([this, key = std::move(key), done = std::move(done)] {
    const absl::Status status = store_->Delete(key);
    if (done) done(status);
  });
}

void CheckpointWriter::Flush() { worker_.Flush(); }

}  // namespace linserve
