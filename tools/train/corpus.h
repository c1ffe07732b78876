#ifndef LINSERVE_TOOLS_TRAIN_CORPUS_H_
#define LINSERVE_TOOLS_TRAIN_CORPUS_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace linserve {

// A byte-level text corpus split by position: the first `train_fraction` of
// its bytes train, the rest validate. Windows are drawn as pure functions of
// (seed, step, index), so a resumed run sees exactly the batches an
// uninterrupted one would. Immutable after Load; thread-safe.
class Corpus {
 public:
  static absl::StatusOr<Corpus> Load(const std::string& path, double train_fraction = 0.9);

  // `count` training windows of `length` bytes for optimizer step `step` and
  // micro-batch `micro`, as byte values (count * length, row-major).
  std::vector<int64_t> TrainWindows(uint64_t seed, int64_t step, int64_t micro, int64_t count,
                                    int64_t length) const;

  // Validation windows of `length` bytes at evenly spaced offsets, at most
  // `max_windows` of them, always the same ones (count * length, row-major).
  std::vector<int64_t> ValidationWindows(int64_t length, int64_t max_windows) const;

  int64_t train_bytes() const { return split_; }
  int64_t validation_bytes() const { return static_cast<int64_t>(bytes_.size()) - split_; }
  const std::string& sha256() const { return sha256_; }

 private:
  Corpus(std::string bytes, int64_t split, std::string sha256);

  std::string bytes_;
  int64_t split_;  // first validation byte
  std::string sha256_;
};

}  // namespace linserve

#endif  // LINSERVE_TOOLS_TRAIN_CORPUS_H_
