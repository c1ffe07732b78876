#include "engine/formats/pth_reader.h"

#include <torch/types.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "engine/formats/pth_writer.h"
#include "engine/formats/safetensors.h"
#include "engine/formats/zip_writer.h"
#include "gtest/gtest.h"
#include "tests/engine/formats/pth_builder.h"

namespace linserve {
namespace {

namespace fs = std::filesystem;
using namespace std::string_literals;
using namespace std::string_view_literals;

const fs::path kDataDir = LINSERVE_RWKV7_DATA_DIR;

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

std::string FloatBytes(std::vector<float> values) {
  return std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float));
}

// {"w": float32 [2, 2] over storage "0"}.
std::string TwoByTwo() {
  return Pth(
      Pickle().Op("}(").Str("w").Tensor("0", "FloatStorage", 4, 0, {2, 2}, {2, 1}).Op("u").Stop(),
      {{"0", FloatBytes({1, 2, 3, 4})}});
}

TensorMap Small() {
  TensorMap t;
  t["emb.weight"] = torch::arange(12, torch::kFloat).reshape({3, 4});
  t["blocks.0.att.r_k"] = torch::linspace(-2, 2, 4).reshape({1, 4}).to(torch::kBFloat16);
  t["ln_out.bias"] = torch::full({4}, 0.5, torch::kHalf);
  t["scalar"] = torch::tensor(3.0f);
  t["empty"] = torch::zeros({0, 3});
  return t;
}

void ExpectSameTensors(const TensorMap& got, const TensorMap& want) {
  ASSERT_EQ(got.size(), want.size());
  for (const auto& [name, tensor] : want) {
    const auto it = got.find(name);
    ASSERT_NE(it, got.end()) << name;
    EXPECT_EQ(it->second.scalar_type(), tensor.scalar_type()) << name;
    EXPECT_TRUE(it->second.is_contiguous()) << name;
    EXPECT_TRUE(it->second.device().is_cpu()) << name;
    EXPECT_TRUE(torch::equal(it->second, tensor)) << name;
  }
}

class FixtureTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fs::exists(kDataDir / "tiny-rwkv7-fp32.safetensors")) {
      GTEST_SKIP() << "no RWKV-7 fixtures in " << kDataDir;
    }
    absl::StatusOr<SafetensorsContents> reference =
        ReadSafetensorsFile(kDataDir / "tiny-rwkv7-fp32.safetensors");
    ASSERT_TRUE(reference.ok()) << reference.status();
    reference_ = std::move(reference->tensors);
    ASSERT_EQ(reference_.size(), 399u);
  }
  TensorMap reference_;
};

TEST_F(FixtureTest, Float32CheckpointEqualsTheSafetensorsFile) {
  absl::StatusOr<TensorMap> tensors = ReadPthFile(kDataDir / "tiny-rwkv7-fp32.pth");
  ASSERT_TRUE(tensors.ok()) << tensors.status();
  ExpectSameTensors(*tensors, reference_);
}

TEST_F(FixtureTest, Bfloat16CheckpointEqualsTheSafetensorsFileExactly) {
  absl::StatusOr<TensorMap> tensors = ReadPthFile(kDataDir / "tiny-rwkv7-bf16.pth");
  ASSERT_TRUE(tensors.ok()) << tensors.status();
  ASSERT_EQ(tensors->size(), 399u);
  for (const auto& [name, tensor] : *tensors) {
    ASSERT_EQ(tensor.scalar_type(), torch::kBFloat16) << name;
    ASSERT_EQ(reference_.count(name), 1u) << name;
    // The README: these weights are exactly representable in bfloat16.
    EXPECT_TRUE(torch::equal(tensor.to(torch::kFloat), reference_.at(name))) << name;
  }
}

TEST_F(FixtureTest, TruncatedCheckpointsNameAByteOffset) {
  const std::string file = ReadFile(kDataDir / "tiny-rwkv7-bf16.pth");
  std::vector<size_t> lengths = {
      0, 1, 21, 22, 100, file.size() / 2, file.size() - 22, file.size() - 21, file.size() - 1};
  for (size_t n = 7; n < file.size(); n += file.size() / 97) lengths.push_back(n);
  for (size_t n : lengths) {
    absl::StatusOr<TensorMap> tensors = ParsePth(std::string_view(file).substr(0, n));
    ASSERT_FALSE(tensors.ok()) << n;
    EXPECT_EQ(tensors.status().code(), absl::StatusCode::kDataLoss) << n;
    EXPECT_TRUE(Contains(tensors.status(), "pth: truncated")) << tensors.status();
    EXPECT_TRUE(Contains(tensors.status(), "byte " + std::to_string(n))) << tensors.status();
  }
}

TEST(PthReaderTest, WhatTheWriterWritesReadsBack) {
  for (bool zip64 : {false, true}) {
    PthWriteOptions options;
    options.force_zip64 = zip64;
    absl::StatusOr<TensorMap> tensors = ParsePth(SerializePth(Small(), options));
    ASSERT_TRUE(tensors.ok()) << tensors.status();
    ExpectSameTensors(*tensors, Small());
  }
}

TEST(PthReaderTest, ReadsFromAFile) {
  const fs::path path = fs::path(::testing::TempDir()) / "small.pth";
  std::ofstream(path, std::ios::binary) << SerializePth(Small());
  absl::StatusOr<TensorMap> tensors = ReadPthFile(path);
  ASSERT_TRUE(tensors.ok()) << tensors.status();
  ExpectSameTensors(*tensors, Small());
  fs::remove(path);
}

TEST(PthReaderTest, WriterRefusesDtypesTheReaderDoesNotRead) {
  TensorMap ints;
  ints["i"] = torch::arange(3);
  EXPECT_THROW(SerializePth(ints), c10::Error);
}

TEST(PthReaderTest, ViewsOfPartOfAStorageAreCopiedOut) {
  const std::string file = Pth(Pickle()
                                   .Op("}(")
                                   .Str("transposed")
                                   .Tensor("0", "FloatStorage", 6, 0, {3, 2}, {1, 3})
                                   .Str("tail")
                                   .Tensor("0", "FloatStorage", 6, 4, {2}, {1})
                                   .Str("all")
                                   .Tensor("0", "FloatStorage", 6, 0, {2, 3}, {3, 1})
                                   .Str("expanded")
                                   .Tensor("0", "FloatStorage", 6, 5, {2, 2}, {0, 0})
                                   .Op("u")
                                   .Stop(),
                               {{"0", FloatBytes({0, 1, 2, 3, 4, 5})}});
  absl::StatusOr<TensorMap> t = ParsePth(file);
  ASSERT_TRUE(t.ok()) << t.status();
  const at::Tensor all = torch::arange(6, torch::kFloat).reshape({2, 3});
  EXPECT_TRUE(torch::equal(t->at("all"), all));
  EXPECT_TRUE(torch::equal(t->at("transposed"), all.t()));
  EXPECT_TRUE(torch::equal(t->at("tail"), torch::tensor({4.0f, 5.0f})));
  EXPECT_TRUE(torch::equal(t->at("expanded"), torch::full({2, 2}, 5.0f)));
  for (const auto& [name, tensor] : *t) EXPECT_TRUE(tensor.is_contiguous()) << name;
}

TEST(PthReaderTest, ViewsMayNotCopyMoreThanTheFileHolds) {
  // One float seen 2^30 times: 4 GiB from a file of a few hundred bytes.
  const std::string file = Pth(Pickle()
                                   .Op("}(")
                                   .Str("big")
                                   .Tensor("0", "FloatStorage", 1, 0, {1 << 15, 1 << 15}, {0, 0})
                                   .Op("u")
                                   .Stop(),
                               {{"0", FloatBytes({1})}});
  absl::StatusOr<TensorMap> t = ParsePth(file);
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument) << t.status();
  EXPECT_TRUE(Contains(t.status(), "'big'")) << t.status();
}

TEST(PthReaderTest, ReadsParametersAndOrderedDictsWithMetadata) {
  // torch.save(model.state_dict()): an OrderedDict whose _metadata BUILD sets.
  Pickle p;
  p.Global("collections", "OrderedDict").Op(")R(").Str("p");
  p.Global("torch._utils", "_rebuild_parameter").Op("(");
  p.Tensor("0", "FloatStorage", 1, 0, {1}, {1}).Op("\x88").Global("collections", "OrderedDict");
  p.Op(")RtR").Op("u}").Str("_metadata").Op("}").Str("version").Int(1).Op("ss").Op("b");
  absl::StatusOr<TensorMap> t = ParsePth(Pth(p.Stop(), {{"0", FloatBytes({7})}}));
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_TRUE(torch::equal(t->at("p"), torch::tensor({7.0f})));
}

TEST(PthReaderTest, SharedMemoAndStoragesAreRead) {
  // BINPUT/BINGET of the rebuild function and the storage, as pickle writes repeats.
  Pickle p;
  p.Op("}q\x00("sv).Str("a").Global("torch._utils", "_rebuild_tensor_v2").Op("q\x01((");
  p.Str("storage").Global("torch", "HalfStorage").Str("0").Str("cpu").Int(2).Op("tq\x02Q");
  p.Int(0).Ints({2}).Ints({1}).Op("\x89").Global("collections", "OrderedDict").Op(")RtR");
  p.Str("b").Op("h\x01(h\x02Q").Int(1).Ints({1}).Ints({1}).Op("\x89}tR").Op("u");
  const at::Tensor half = torch::tensor({1.5f, -2.0f}).to(torch::kHalf);
  const std::string bytes(static_cast<const char*>(half.data_ptr()), 4);
  absl::StatusOr<TensorMap> t = ParsePth(Pth(p.Stop(), {{"0", bytes}}));
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_TRUE(torch::equal(t->at("a"), half));
  EXPECT_TRUE(torch::equal(t->at("b"), half.slice(0, 1)));
}

// A valid pickle that is not a dict of tensors: InvalidArgument naming it.
TEST(PthReaderTest, RefusesWhatIsNotADictOfTensorsByName) {
  struct Case {
    std::string pickle;
    std::string named;
  };
  const std::vector<Case> cases = {
      {Pickle().Op("]").Stop(), "holds a list, not a dict of tensors"},
      {Pickle().Op("}").Str("epoch").Int(3).Op("s").Stop(), "key 'epoch' holds an int"},
      {Pickle().Op("}").Int(1).Str("x").Op("s").Stop(), "key that is an int"},
      {Pickle().Op("}").Str("model").Global("__main__", "Net").Op(")R").Op("}b").Op("s").Stop(),
       "key 'model' holds a __main__.Net object"},
      {Pickle().Op("}").Str("n").Global("numpy", "dtype").Op("s").Stop(),
       "key 'n' holds the class or function numpy.dtype"},
      {Pickle().Op("}").Str("ids").Tensor("0", "LongStorage", 1, 0, {1}, {1}).Op("s").Stop(),
       "tensor 'ids' is stored as torch.LongStorage"},
      {"\x80\x04N.", "pickle protocol 4"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<TensorMap> t = ParsePth(Pth(c.pickle, {{"0", std::string(8, '\0')}}));
    EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument) << t.status();
    EXPECT_TRUE(Contains(t.status(), c.named)) << t.status() << " lacks " << c.named;
  }
}

TEST(PthReaderTest, RefusesTheLegacyFormatByName) {
  const std::string legacy = "\x80\x02\x8a\x0a\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19.rest";
  absl::StatusOr<TensorMap> t = ParsePth(legacy);
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument) << t.status();
  EXPECT_TRUE(Contains(t.status(), "legacy")) << t.status();
}

// Tensor data that is missing or short: DataLoss naming the tensor.
TEST(PthReaderTest, MissingOrShortTensorDataNamesTheTensor) {
  struct Case {
    std::string file;
    std::string named;
  };
  auto one = [](int32_t numel, int32_t offset, std::vector<int32_t> sizes,
                std::vector<int32_t> strides, std::string key, std::string data) {
    return Pth(Pickle()
                   .Op("}")
                   .Str("w")
                   .Tensor("0", "FloatStorage", numel, offset, sizes, strides)
                   .Op("s")
                   .Stop(),
               {{key, data}});
  };
  const std::vector<Case> cases = {
      {one(4, 0, {4}, {1}, "1", FloatBytes({1, 2, 3, 4})),
       "tensor 'w': its data 'archive/data/0' is missing"},
      {one(4, 0, {4}, {1}, "0", FloatBytes({1, 2, 3})),
       "tensor 'w': its data 'archive/data/0' at byte"},
      {one(4, 0, {5}, {1}, "0", FloatBytes({1, 2, 3, 4})), "tensor 'w' of sizes [5], strides [1]"},
      {one(4, 0, {0, 1 << 30, 1 << 30, 1 << 30}, {0, 0, 0, 0}, "0", FloatBytes({1, 2, 3, 4})),
       "overflows 64 bits"},
      {one(4, 3, {2}, {1}, "0", FloatBytes({1, 2, 3, 4})), "reads element 4 of a storage of 4"},
      {one(4, 0, {2, 2}, {1 << 30, 1 << 30}, "0", FloatBytes({1, 2, 3, 4})), "tensor 'w'"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<TensorMap> t = ParsePth(c.file);
    EXPECT_EQ(t.status().code(), absl::StatusCode::kDataLoss) << t.status();
    EXPECT_TRUE(Contains(t.status(), c.named)) << t.status() << " lacks " << c.named;
  }
}

// Pickles LibTorch 1.13's unpickler crashes on, allocates for, or accepts
// wrongly (see engine/formats/torch_unpickler.h), and other malformed ones.
TEST(PthReaderTest, MalformedPicklesAreDataLossNamingTheirByte) {
  const std::vector<std::string> pickles = {
      "\x80\x02R.",                                     // REDUCE on an empty stack
      "\x80\x02)" + std::string(100000, '\x85') + ".",  // A chain of TUPLE1
      "\x80\x02" + std::string(100000, '(') + ".",      // Marks without end
      "\x80\x02h\x00."s,
      "\x80\x02t.",
      "\x80\x02}u.",
      "\x80\x02}(Nu.",
      "\x80\x02.",
      "\x80\x02"
      "0.",
      "\x80\x02X\xff\xff\xff\x7f.",
      "\x80\x02NNb.",
      "\x80\x02NQ.",
      "\x80\x02(tQ.",
      "\x80\x02\x8a\x09" + std::string(9, '\xff') + ".",
      "\x80\x02\xff.",
      "",
      "\x80\x02N",
      "\x80\x02NN.",
      "\x80\x02N.junk",
      "\x80\x02"
      "cos\nsys",
      "\x80\x02]\x94.",
      "\x80\x02]q\x00h\x00a."s,  // A list appended to itself
      "\x80\x02]q\x00)h\x00\x85\x85"
      "a."s,  // ... through a tuple
      Pickle().Op("}").Str("w").Tensor("0", "FloatStorage", 1, 0, {-1}, {1}).Op("s").Stop(),
      Pickle().Op("}").Str("w").Tensor("0", "FloatStorage", 1, 0, {1}, {-1}).Op("s").Stop(),
      Pickle().Op("}").Str("w").Tensor("0", "FloatStorage", 1, -1, {1}, {1}).Op("s").Stop(),
      Pickle().Op("}").Str("w").Tensor("0", "FloatStorage", -1, 0, {1}, {1}).Op("s").Stop(),
      Pickle().Op("}").Str("w").Tensor("0", "FloatStorage", 1, 0, {1, 1}, {1}).Op("s").Stop(),
      Pickle()
          .Op("}(")
          .Str("w")
          .Tensor("0", "FloatStorage", 1, 0, {1}, {1})
          .Str("w")
          .Tensor("0", "FloatStorage", 1, 0, {1}, {1})
          .Op("u")
          .Stop(),  // Key twice
      Pickle()
          .Op("}(")
          .Str("w")
          .Tensor("0", "FloatStorage", 1, 0, {1}, {1})
          .Str("v")
          .Tensor("0", "HalfStorage", 2, 0, {1}, {1})
          .Op("u")
          .Stop(),  // Two storage types
      Pickle()
          .Op("}")
          .Str("w")
          .Global("os", "system")
          .Op("(")
          .Str("storage")
          .Global("os", "system")
          .Str("0")
          .Str("cpu")
          .Int(1)
          .Op("tQs")
          .Stop(),
  };
  for (const std::string& pickle : pickles) {
    absl::StatusOr<TensorMap> t = ParsePth(Pth(pickle, {{"0", FloatBytes({1})}}));
    EXPECT_EQ(t.status().code(), absl::StatusCode::kDataLoss) << t.status();
  }
  absl::StatusOr<TensorMap> t = ParsePth(Pth("\x80\x02R."));
  EXPECT_TRUE(Contains(t.status(), "data.pkl byte 2 (file byte ")) << t.status();
}

TEST(PthReaderTest, HostilePicklesCostBoundedMemory) {
  std::string deep = "\x80\x02)";
  for (int i = 0; i < 40; ++i) deep += "\x85";
  absl::StatusOr<TensorMap> t = ParsePth(Pth(deep + "."));
  EXPECT_TRUE(Contains(t.status(), "nests values more than")) << t.status();

  // LibTorch sizes its memo by the index: here a hash map holds one entry.
  t = ParsePth(Pth("\x80\x02Nr\xff\xff\xff\x7f."));
  EXPECT_TRUE(Contains(t.status(), "holds None, not a dict")) << t.status();

  t = ParsePth(Pth("\x80\x02" + std::string((1 << 20) + 1, 'N') + "."));
  EXPECT_TRUE(Contains(t.status(), "more than 1048576 values")) << t.status();
}

// Damage to the archive's structure: DataLoss naming the byte.
TEST(PthReaderTest, CorruptArchivesNameTheByte) {
  const std::string good = TwoByTwo();
  const size_t end = good.size() - 22;  // The end record.
  const uint32_t cd_at = static_cast<uint8_t>(good[end + 16]) |
                         static_cast<uint8_t>(good[end + 17]) << 8 |
                         static_cast<uint8_t>(good[end + 18]) << 16;
  auto patched = [&](size_t at, std::string bytes) {
    std::string file = good;
    file.replace(at, bytes.size(), bytes);
    return file;
  };
  struct Case {
    std::string file;
    std::string named;
  };
  const std::vector<Case> cases = {
      {"", "truncated: the file ends at byte 0"},
      {"PK\x05\x06"s + std::string(18, '\0'), "zip archive is empty"},
      {good.substr(0, good.size() - 1), "no end-of-central-directory record ends the file at byte"},
      // The zip64 locator's pointer.
      {patched(end - 20 + 8, std::string(8, '\x7f')), "the zip64 locator at byte"},
      // The zip64 end record's central directory offset.
      {patched(end - 20 - 56 + 48, Le32(good.size()) + std::string(4, '\0')),
       "truncated: the central directory at byte " + std::to_string(good.size())},
      {patched(cd_at, "PX"), "no central directory entry at byte " + std::to_string(cd_at)},
      {patched(cd_at + 10, "\x08"), "is compressed (method 8)"},
      {patched(cd_at + 20, Le32(1000) + Le32(1000)),
       "truncated: entry 'archive/data.pkl' needs bytes"},
      {patched(cd_at + 20, Le32(cd_at - 64) + Le32(cd_at - 64)), "overlap"},
      {patched(0, "PX"), "no local header at byte 0"},
      {patched(30, "B"), "names 'Brchive/data.pkl' instead"},
      {patched(cd_at + 42, Le32(1 << 30)), "does not lie before the central directory"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<TensorMap> t = ParsePth(c.file);
    EXPECT_EQ(t.status().code(), absl::StatusCode::kDataLoss) << t.status();
    EXPECT_TRUE(Contains(t.status(), c.named)) << t.status() << " lacks " << c.named;
  }
  absl::StatusOr<TensorMap> twice =
      ParsePth(WriteStoredZip({{"archive/data.pkl", "x"}, {"archive/data.pkl", "y"}}));
  EXPECT_TRUE(Contains(twice.status(), "twice")) << twice.status();
}

// Random damage anywhere in a small checkpoint: an error of the promised
// kinds (or, where the damage hits a field nobody reads, the same tensors).
TEST(PthReaderTest, RandomlyCorruptedCheckpointsNeverCrash) {
  const std::string good = SerializePth(Small());
  std::mt19937 rng(42);
  for (int i = 0; i < 3000; ++i) {
    std::string file = good;
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int f = 0; f < flips; ++f) file[rng() % file.size()] = static_cast<char>(rng());
    if (i % 5 == 0) file.resize(rng() % file.size());
    absl::StatusOr<TensorMap> t = ParsePth(file);
    if (t.ok()) continue;
    EXPECT_TRUE(t.status().code() == absl::StatusCode::kDataLoss ||
                t.status().code() == absl::StatusCode::kInvalidArgument)
        << t.status();
  }
}

TEST(PthReaderTest, MissingFileIsNotFoundNamingThePath) {
  const std::string path = ::testing::TempDir() + "/no-such-checkpoint.pth";
  absl::StatusOr<TensorMap> t = ReadPthFile(path);
  EXPECT_EQ(t.status().code(), absl::StatusCode::kNotFound) << t.status();
  EXPECT_TRUE(Contains(t.status(), path)) << t.status();

  t = ReadPthFile(::testing::TempDir());
  EXPECT_EQ(t.status().code(), absl::StatusCode::kFailedPrecondition) << t.status();
}

TEST(PthReaderTest, FileErrorsNameThePath) {
  const fs::path path = fs::path(::testing::TempDir()) / "corrupt.pth";
  std::ofstream(path, std::ios::binary) << TwoByTwo().substr(0, 100);
  absl::StatusOr<TensorMap> t = ReadPthFile(path);
  EXPECT_EQ(t.status().code(), absl::StatusCode::kDataLoss) << t.status();
  EXPECT_TRUE(Contains(t.status(), "(in '" + path.string() + "')")) << t.status();
  fs::remove(path);
}

}  // namespace
}  // namespace linserve
