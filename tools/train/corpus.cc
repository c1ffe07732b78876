#include "tools/train/corpus.h"

#include <fstream>
#include <random>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "engine/base/sha256.h"

namespace linserve {

Corpus::Corpus(std::string bytes, int64_t split, std::string sha256)
    : bytes_(std::move(bytes)), split_(split), sha256_(std::move(sha256)) {}

absl::StatusOr<Corpus> Corpus::Load(const std::string& path, double train_fraction) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("corpus: cannot open '", path, "'"));
  std::ostringstream buffer;
  buffer << in.rdbuf();
  std::string bytes = buffer.str();
  const int64_t split = static_cast<int64_t>(static_cast<double>(bytes.size()) * train_fraction);
  if (split < 2 || static_cast<int64_t>(bytes.size()) - split < 2) {
    return absl::InvalidArgumentError(absl::StrCat("corpus: '", path, "' has ", bytes.size(),
                                                   " bytes, too few to split for training"));
  }
  std::string sha256 = Sha256Hex({bytes});
  return Corpus(std::move(bytes), split, std::move(sha256));
}

std::vector<int64_t> Corpus::TrainWindows(uint64_t seed, int64_t step, int64_t micro,
                                          int64_t count, int64_t length) const {
  // A generator per (seed, step, micro): no state to carry across a resume.
  std::seed_seq seeds{seed, static_cast<uint64_t>(step), static_cast<uint64_t>(micro)};
  std::mt19937_64 generator(seeds);
  const int64_t last_start = std::max<int64_t>(0, split_ - length);
  std::vector<int64_t> out;
  out.reserve(count * length);
  for (int64_t w = 0; w < count; ++w) {
    const int64_t start = static_cast<int64_t>(generator() % static_cast<uint64_t>(last_start + 1));
    for (int64_t i = 0; i < length; ++i) {
      out.push_back(static_cast<unsigned char>(bytes_[std::min(start + i, split_ - 1)]));
    }
  }
  return out;
}

std::vector<int64_t> Corpus::ValidationWindows(int64_t length, int64_t max_windows) const {
  const int64_t available = validation_bytes() / length;
  const int64_t count = std::min(available, max_windows);
  std::vector<int64_t> out;
  out.reserve(count * length);
  for (int64_t w = 0; w < count; ++w) {
    const int64_t start = split_ + w * (available / count) * length;
    for (int64_t i = 0; i < length; ++i) out.push_back(static_cast<unsigned char>(bytes_[start + i]));
  }
  return out;
}

}  // namespace linserve
