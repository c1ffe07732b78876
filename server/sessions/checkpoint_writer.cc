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
  Put(std::move(key), std::move(record), nullptr, std::move(fence), std::move(done));
}

void CheckpointWriter::Put(StoredSessionKey key, SessionRecord header,
                           std::shared_ptr<const std::string> payload, WriteFence fence,
                           Done done) {
  worker_.Run([this, key = std::move(key), header = std::move(header),
               payload = std::move(payload), fence = std::move(fence), done = std::move(done)] {
    const absl::Time start = absl::Now();
    const std::string file =
        payload ? EncodeStateFile(header, *payload) : EncodeStateFile(header);
    const absl::Status status = store_->PutFenced(key, file, fence).status();
    metrics_->session_save_seconds().Observe(absl::ToDoubleSeconds(absl::Now() - start));
    if (done) done(status);
  });
}

void CheckpointWriter::PutFork(StoredSessionKey fork, StoredSessionKey source,
                               SessionRecord header, Done done) {
  worker_.Run([this, fork = std::move(fork), source = std::move(source),
               header = std::move(header), done = std::move(done)] {
    const absl::Time start = absl::Now();
    const absl::Status status = store_->PutFork(fork, source, header);
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
