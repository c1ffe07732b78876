// A pickle that memoizes one long value and then uses it over and over, a
// few bytes a use, is refused before its copies outgrow it
// (kPickleCopiedBytesPerByte in engine/formats/torch_unpickler.h). Most files
// here are a few hundred KB and would make the reader copy about 1 GiB if
// copies were free, the largest a few MB that would copy 4 to 64 GiB; memory
// is judged by the process's peak resident size, not by time, so the test
// does not depend on the machine's speed.

#include <sys/resource.h>

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/formats/pth_reader.h"
#include "engine/formats/torch_unpickler.h"
#include "gtest/gtest.h"
#include "tests/engine/formats/pth_builder.h"

namespace linserve {
namespace {

// Under zip's 64 KiB names, so that a storage key this long could name an entry.
constexpr size_t kLongValueBytes = 60000;
// Uses of the long value: times kLongValueBytes, 0.9 GiB of copies.
constexpr int kUses = 16384;
// What the refused files may add to the peak: a few MB of pickle, archive
// and copies within the budget, and room for the allocator's own slack.
constexpr int64_t kMaxPeakGrowthBytes = int64_t{64} << 20;

int64_t PeakResidentBytes() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return int64_t{usage.ru_maxrss} * 1024;  // Linux counts KiB.
}

// Memo 1: _rebuild_tensor_v2. Memo 2: its arguments, a tensor of rank 0 over
// an empty storage named `key`. The stack is left empty.
Pickle MemoizedRebuild(const std::string& key) {
  Pickle p;
  p.Op("(").Str("storage").Global("torch", "FloatStorage").Str(key).Str("cpu").Int(0).Op("tQ");
  p.Put(0).Op("0");
  p.Global("torch._utils", "_rebuild_tensor_v2").Put(1).Op("0");
  return p.Op("(").Get(0).Int(0).Op("))\x89}t").Put(2).Op("0");
}

struct HostileFile {
  const char* what;
  std::string pickle;
};

std::vector<HostileFile> HostileFiles() {
  const std::string long_value(kLongValueBytes, 'x');
  std::vector<HostileFile> files;

  Pickle reduced;  // An object of an unknown class is named after it.
  reduced.Global("builtins", long_value).Put(0).Op(")").Put(1);
  for (int i = 0; i < kUses; ++i) reduced.Get(0).Get(1).Op("R");
  files.push_back({"a class name called over and over", reduced.Stop()});

  Pickle loaded;  // Each BINPERSID of one id makes a storage with its key.
  loaded.Op("(").Str("storage").Global("torch", "FloatStorage").Str(long_value).Str("cpu");
  loaded.Int(0).Op("t").Put(0);
  for (int i = 0; i < kUses; ++i) loaded.Get(0).Op("Q");
  files.push_back({"a storage key loaded over and over", loaded.Stop()});

  Pickle rebuilt = MemoizedRebuild(long_value);
  for (int i = 0; i < kUses; ++i) rebuilt.Get(1).Get(2).Op("R");
  files.push_back({"a storage rebuilt into tensors over and over", rebuilt.Stop()});

  Pickle named = MemoizedRebuild(long_value);  // Each name gets a copy of the tensor.
  named.Get(1).Get(2).Op("R").Put(3).Op("0").Op("}(");
  for (int i = 0; i < kUses; ++i) named.Str(std::to_string(i)).Get(3);
  files.push_back({"one tensor under many names", named.Op("u").Stop()});
  return files;
}

TEST(PickleCopyBudgetTest, ValuesUsedOverAndOverAreRefusedBeforeTheyAreCopied) {
  const std::vector<HostileFile> files = HostileFiles();
  const int64_t peak_before = PeakResidentBytes();
  for (const HostileFile& file : files) {
    SCOPED_TRACE(file.what);
    ASSERT_LT(file.pickle.size(), 300'000u);
    const uint64_t limit =
        kPickleCopiedBytesPerByte * file.pickle.size() + kPickleCopiedBytesAllowance;
    absl::StatusOr<TensorMap> t = ParsePth(Pth(file.pickle));
    EXPECT_EQ(t.status().code(), absl::StatusCode::kDataLoss) << t.status();
    EXPECT_TRUE(Contains(
        t.status(), absl::StrCat("copied out of the pickle pass ", limit, " bytes, its limit")))
        << t.status();
  }
  EXPECT_LT(PeakResidentBytes() - peak_before, kMaxPeakGrowthBytes);
}

// The files first measured: a class name memoized once and called 2^20
// times, 5 bytes of pickle a call (a 4 KiB name made the old reader peak at
// 4.5 GB, a 64 KiB one would have asked for 64 GiB), and a storage id
// memoized once and loaded 2^20 times, 3 bytes a load, whose long key each
// storage copied. Each file is built, then parsed alone, so that the peak it
// adds is its own.
TEST(PickleCopyBudgetTest, LongNamesUsedAMillionTimesAreRefusedWithinBoundedMemory) {
  constexpr int kMillionUses = 1 << 20;
  constexpr int64_t kMaxMillionPeakGrowthBytes = int64_t{200} << 20;
  for (const size_t long_bytes : {size_t{4} << 10, size_t{64} << 10}) {
    const std::string long_value(long_bytes, 'x');
    for (const bool loaded : {false, true}) {
      SCOPED_TRACE(absl::StrCat(long_bytes, " bytes, ",
                                loaded ? "a storage key loaded" : "a class name called"));
      Pickle p;
      if (loaded) {
        p.Op("(").Str("storage").Global("torch", "FloatStorage").Str(long_value).Str("cpu");
        p.Int(0).Op("t").Put(0);
        for (int i = 0; i < kMillionUses; ++i) p.Get(0).Op("Q");
      } else {
        p.Global("builtins", long_value).Put(0).Op(")").Put(1);
        for (int i = 0; i < kMillionUses; ++i) p.Get(0).Get(1).Op("R");
      }
      const std::string pickle = p.Stop();
      const std::string file = Pth(pickle);
      const uint64_t limit =
          kPickleCopiedBytesPerByte * pickle.size() + kPickleCopiedBytesAllowance;
      const int64_t peak_before = PeakResidentBytes();
      absl::StatusOr<TensorMap> t = ParsePth(file);
      EXPECT_LT(PeakResidentBytes() - peak_before, kMaxMillionPeakGrowthBytes);
      EXPECT_EQ(t.status().code(), absl::StatusCode::kDataLoss) << t.status();
      EXPECT_TRUE(Contains(
          t.status(), absl::StrCat("copied out of the pickle pass ", limit, " bytes, its limit (",
                                   kPickleCopiedBytesPerByte, " per byte of its ", pickle.size(),
                                   ", plus ", kPickleCopiedBytesAllowance, ")")))
          << t.status();
    }
  }
}

// Weights shared between layers appear once per layer in a state dict, each
// name a copy of the tensor: well inside the budget.
TEST(PickleCopyBudgetTest, WeightsTiedUnderManyNamesStillLoad) {
  constexpr int kNames = 20000;
  Pickle p;
  p.Op("}(").Str("blocks.0.att.key.weight").Tensor("0", "FloatStorage", 4, 0, {2, 2}, {2, 1});
  p.Put(0);
  for (int i = 1; i < kNames; ++i) p.Str(absl::StrCat("blocks.", i, ".att.key.weight")).Get(0);
  const std::string storage(4 * sizeof(float), '\0');
  absl::StatusOr<TensorMap> t = ParsePth(Pth(p.Op("u").Stop(), {{"0", storage}}));
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->size(), static_cast<size_t>(kNames));
}

}  // namespace
}  // namespace linserve
