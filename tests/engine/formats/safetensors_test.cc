#include "engine/formats/safetensors.h"

#include <torch/types.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "gtest/gtest.h"

namespace linserve {
namespace {

std::string LittleEndian64(uint64_t n) {
  std::string out;
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((n >> (8 * i)) & 0xff));
  return out;
}

// A file laid out by hand: length prefix, header text as given, data bytes.
std::string MakeFile(const std::string& header, const std::string& data = "") {
  return LittleEndian64(header.size()) + header + data;
}

// Pads like the reference writer, for files the tests build by hand.
std::string Padded(std::string header) {
  header.append((8 - header.size() % 8) % 8, ' ');
  return header;
}

std::string BytesOf(const at::Tensor& tensor) {
  const at::Tensor t = tensor.cpu().contiguous();
  return std::string(static_cast<const char*>(t.data_ptr()), t.numel() * t.element_size());
}

// Builds a tensor from exact bit patterns, so NaN payloads and -0.0 survive.
template <typename Bits>
at::Tensor FromBits(std::vector<Bits> bits, std::vector<int64_t> shape, c10::ScalarType type) {
  return torch::from_blob(bits.data(), shape, torch::dtype(type)).clone();
}

bool Contains(const absl::Status& status, const std::string& text) {
  return std::string(status.message()).find(text) != std::string::npos;
}

TensorMap EveryDtype() {
  using I64 = std::numeric_limits<int64_t>;
  TensorMap t;
  t["f32"] =
      FromBits<uint32_t>({0x7fc00001, 0x7f800001, 0x80000000, 0x7f800000, 0x3f800000, 0x00000001},
                         {2, 3}, torch::kFloat);
  t["f64"] = FromBits<uint64_t>(
      {0x7ff8000000000123, 0x8000000000000000, 0x7ff0000000000001, 0x3ff0000000000000}, {4},
      torch::kDouble);
  t["f16"] = FromBits<uint16_t>({0x7e01, 0x7c01, 0x8000, 0x3c00}, {2, 2}, torch::kHalf);
  t["bf16"] = FromBits<uint16_t>({0x7fc1, 0xff81, 0x8000, 0x3f80}, {4, 1}, torch::kBFloat16);
  t["i64"] = FromBits<int64_t>({I64::min(), I64::max(), -1}, {3}, torch::kLong);
  t["i32"] = FromBits<int32_t>({INT32_MIN, INT32_MAX, -7}, {3}, torch::kInt);
  t["i16"] = FromBits<int16_t>({INT16_MIN, INT16_MAX}, {1, 2}, torch::kShort);
  t["i8"] = FromBits<int8_t>({INT8_MIN, INT8_MAX, 0}, {3}, torch::kChar);
  t["u8"] = FromBits<uint8_t>({0, 128, 255}, {3, 1, 1}, torch::kByte);
  t["bool"] = FromBits<uint8_t>({1, 0, 1}, {3}, torch::kBool);
  t["scalar"] = torch::full({}, -0.0, torch::kFloat);
  t["empty.rows"] = torch::empty({0, 3}, torch::kLong);
  t["empty.cols"] = torch::empty({3, 0}, torch::kHalf);
  return t;
}

void ExpectSameTensors(const TensorMap& actual, const TensorMap& expected) {
  ASSERT_EQ(actual.size(), expected.size());
  for (const auto& [name, want] : expected) {
    SCOPED_TRACE(name);
    ASSERT_EQ(actual.count(name), 1u);
    const at::Tensor& got = actual.at(name);
    EXPECT_EQ(got.scalar_type(), want.scalar_type());
    EXPECT_EQ(got.sizes(), want.sizes());
    EXPECT_TRUE(got.device().is_cpu());
    EXPECT_TRUE(got.is_contiguous());
    EXPECT_EQ(BytesOf(got), BytesOf(want));
  }
}

TEST(SafetensorsTest, RoundTripIsBitExactForEveryDtype) {
  const TensorMap tensors = EveryDtype();
  const SafetensorsMetadata metadata = {{"format", "pt"}, {"note", "h\xc3\xa9llo \"x\"\n"}};
  const std::string bytes = SerializeSafetensors(tensors, metadata);
  EXPECT_EQ(SerializeSafetensors(tensors, metadata), bytes);

  auto parsed = ParseSafetensors(bytes);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  ExpectSameTensors(parsed->tensors, tensors);
  EXPECT_EQ(parsed->metadata, metadata);
  EXPECT_EQ(SerializeSafetensors(parsed->tensors, parsed->metadata), bytes);
}

TEST(SafetensorsTest, ParsedTensorsOwnTheirMemory) {
  std::string bytes = SerializeSafetensors({{"w", torch::arange(4, torch::kFloat)}});
  auto parsed = ParseSafetensors(bytes);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  bytes.assign(bytes.size(), '\x7f');
  EXPECT_TRUE(torch::equal(parsed->tensors.at("w"), torch::arange(4, torch::kFloat)));
}

TEST(SafetensorsTest, InPlaceTensorsViewTheBytesWhereAligned) {
  const TensorMap tensors = EveryDtype();
  const std::string bytes = SerializeSafetensors(tensors);
  auto in_place = ParseSafetensorsInPlace(bytes);
  ASSERT_TRUE(in_place.ok()) << in_place.status();
  ExpectSameTensors(in_place->tensors, tensors);
  // A tensor is a view where its data lies aligned to its element size
  // (the first, "bf16", at the data section's start: the writer pads the
  // header to 8 bytes), a copy elsewhere (after the 3-byte "bool", say).
  int views = 0;
  for (const auto& [name, tensor] : in_place->tensors) {
    if (tensor.numel() == 0) continue;
    const auto* data = static_cast<const char*>(tensor.data_ptr());
    if (data >= bytes.data() && data < bytes.data() + bytes.size()) {
      ++views;
      EXPECT_EQ(reinterpret_cast<uintptr_t>(data) % tensor.element_size(), 0u) << name;
    }
  }
  const auto* bf16 = static_cast<const char*>(in_place->tensors.at("bf16").data_ptr());
  EXPECT_TRUE(bf16 >= bytes.data() && bf16 < bytes.data() + bytes.size());
  EXPECT_GT(views, 0);
  // One byte off: "bf16" cannot be read in place, and comes back as a copy
  // with the same values.
  std::string shifted(bytes.size() + 1, '\0');
  std::memcpy(shifted.data() + 1, bytes.data(), bytes.size());
  const std::string_view off_by_one = std::string_view(shifted).substr(1);
  auto copied = ParseSafetensorsInPlace(off_by_one);
  ASSERT_TRUE(copied.ok()) << copied.status();
  ExpectSameTensors(copied->tensors, tensors);
  const auto* moved = static_cast<const char*>(copied->tensors.at("bf16").data_ptr());
  EXPECT_FALSE(moved >= shifted.data() && moved < shifted.data() + shifted.size());
  // Refusals are ParseSafetensors' own.
  EXPECT_EQ(ParseSafetensorsInPlace(bytes.substr(0, bytes.size() - 1)).status(),
            ParseSafetensors(bytes.substr(0, bytes.size() - 1)).status());
}

TEST(SafetensorsTest, NonContiguousTensorsAreWrittenRowMajor) {
  const at::Tensor transposed = torch::arange(6, torch::kInt).reshape({2, 3}).t();
  auto parsed = ParseSafetensors(SerializeSafetensors({{"t", transposed}}));
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_TRUE(torch::equal(parsed->tensors.at("t"), transposed));
}

TEST(SafetensorsTest, UnstorableInputIsRefused) {
  EXPECT_THROW(SerializeSafetensors({{"c", torch::zeros({2}, torch::kComplexFloat)}}), c10::Error);
  EXPECT_THROW(SerializeSafetensors({{"__metadata__", torch::zeros({2})}}), c10::Error);
  EXPECT_THROW(SerializeSafetensors({{"bad\xff", torch::zeros({2})}}), c10::Error);
}

// Byte-exact layouts of the reference writer: prefix, compact JSON with
// fields in the order dtype, shape, data_offsets, padding to 8 bytes.
TEST(SafetensorsTest, WritesTheReferenceLayout) {
  const std::string one_tensor =
      R"({"attn.0":{"dtype":"F32","shape":[1,2,3],"data_offsets":[0,24]}})";
  ASSERT_EQ(one_tensor.size(), 64u);
  const std::string floats(  // 0..5 as little-endian F32
      "\x00\x00\x00\x00\x00\x00\x80\x3f\x00\x00\x00\x40\x00\x00\x40\x40\x00\x00\x80\x40\x00\x00\xa0"
      "\x40",
      24);
  EXPECT_EQ(SerializeSafetensors({{"attn.0", torch::arange(6, torch::kFloat).reshape({1, 2, 3})}}),
            MakeFile(one_tensor, floats));
  EXPECT_EQ(SerializeSafetensors({}), MakeFile("{}      "));
  EXPECT_EQ(SerializeSafetensors({}, {{"framework", "pt"}}),
            MakeFile(R"({"__metadata__":{"framework":"pt"}}     )"));
}

// A file as the reference writer lays it out: tensors ordered by dtype, not
// by name, so only the offsets say where each one lives.
TEST(SafetensorsTest, ReadsAFileWrittenByTheReferenceLayout) {
  const std::string header =
      Padded(R"({"__metadata__":{"format":"pt"},)"
             R"("step":{"dtype":"I64","shape":[],"data_offsets":[0,8]},)"
             R"("w":{"dtype":"F32","shape":[2],"data_offsets":[8,16]},)"
             R"("emb":{"dtype":"BF16","shape":[1,2],"data_offsets":[16,20]},)"
             R"("mask":{"dtype":"BOOL","shape":[2],"data_offsets":[20,22]}})");
  const std::string data(
      "\xe8\x03\x00\x00\x00\x00\x00\x00"  // 1000
      "\x00\x00\x80\x3f\x00\x00\x00\xc0"  // 1.0f, -2.0f
      "\x80\x3f\x00\xbf"                  // bf16 1.0, -0.5
      "\x01\x00",                         // true, false
      22);
  auto parsed = ParseSafetensors(MakeFile(header, data));
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  const TensorMap& t = parsed->tensors;
  ASSERT_EQ(t.size(), 4u);
  EXPECT_EQ(t.at("step").dim(), 0);
  EXPECT_EQ(t.at("step").item<int64_t>(), 1000);
  EXPECT_TRUE(torch::equal(t.at("w"), torch::tensor({1.0f, -2.0f})));
  EXPECT_EQ(t.at("emb").scalar_type(), torch::kBFloat16);
  EXPECT_TRUE(torch::equal(t.at("emb").to(torch::kFloat), torch::tensor({{1.0f, -0.5f}})));
  EXPECT_TRUE(torch::equal(t.at("mask"), torch::tensor({true, false})));
  EXPECT_EQ(parsed->metadata, (SafetensorsMetadata{{"format", "pt"}}));
}

TEST(SafetensorsTest, MalformedFilesGiveClearErrors) {
  struct Case {
    std::string file;
    std::string expected;
  };
  auto one = [](const std::string& info, const std::string& data = std::string(8, '\0')) {
    return MakeFile(R"({"x":)" + info + "}", data);
  };
  auto ones = [](int n) {  // "1,1,...,1"
    std::string list = "1";
    for (int i = 1; i < n; ++i) list += ",1";
    return list;
  };
  const Case cases[] = {
      {"", "truncated: file has 0 bytes"},
      {std::string(7, '\0'), "truncated: file has 7 bytes"},
      {LittleEndian64(200 << 20) + "{}", "exceeds the 104857600-byte cap"},
      {LittleEndian64(100) + "{}", "truncated: header needs 100 bytes but only 2"},
      {MakeFile("{nope"), "header is not valid JSON"},
      {MakeFile("{\"\xff\":1}"), "header is not valid JSON"},
      {MakeFile("[1, 2]"), "header is a JSON array, not an object"},
      {MakeFile("{} x"), "header is not valid JSON"},
      {MakeFile(std::string(1 << 20, '[')), "header is a JSON array, not an object"},
      {MakeFile(R"({"x":{"dtype":"U8","shape":[0],"data_offsets":[0,0]},"x":{}})"),
       "tensor 'x' appears twice"},
      {one("3"), "tensor 'x' maps to a JSON number"},
      {one(R"({"dtype":"U16","shape":[1],"data_offsets":[0,2]})"), "unsupported dtype \"U16\""},
      {one(R"({"dtype":7,"shape":[1],"data_offsets":[0,2]})"), "unsupported dtype 7"},
      {one(R"({"shape":[1],"data_offsets":[0,4]})"), "tensor 'x' is missing 'dtype'"},
      {one(R"({"dtype":"F32","shape":[1],"data_offsets":[0,4],"strides":[1]})"),
       "tensor 'x' has unknown field 'strides'"},
      {one(R"({"dtype":"F32","shape":[-1],"data_offsets":[0,4]})"), "shape entry -1, expected"},
      {one(R"({"dtype":"F32","shape":[1.5],"data_offsets":[0,4]})"), "shape entry 1.5"},
      {one(R"({"dtype":"F32","shape":"[1]","data_offsets":[0,4]})"),
       "tensor 'x' has shape \"[1]\", expected an array"},
      {one(R"({"dtype":"F32","shape":[[[1]]],"data_offsets":[0,4]})"),
       "tensor 'x' has shape entry [...], expected a non-negative integer"},
      {one(R"({"dtype":"F32","shape":[1],"shape":[1],"data_offsets":[0,4]})"),
       "tensor 'x' has field 'shape' twice"},
      {one(R"({"dtype":"U8","shape":[)" + ones(65) + R"(],"data_offsets":[0,1]})"),
       "tensor 'x' has more than 64 shape entries"},
      {one(R"({"dtype":"U8","shape":[)" + ones(1 << 20) + R"(],"data_offsets":[0,1]})"),
       "tensor 'x' has more than 64 shape entries"},
      {one(R"({"dtype":"U8","shape":[4294967296,4294967296],"data_offsets":[0,4]})"),
       "overflows 64 bits"},
      {one(R"({"dtype":"U8","shape":[0,4294967296,4294967296],"data_offsets":[0,0]})"),
       "overflows 64 bits"},
      {one(R"({"dtype":"U8","shape":[1],"data_offsets":[0,1,2]})"), "expected [begin, end]"},
      {one(R"({"dtype":"U8","shape":[1],"data_offsets":[-4,1]})"), "data_offsets entry -4"},
      {one(R"({"dtype":"U8","shape":[1],"data_offsets":[0,18446744073709551615]})"),
       "data_offsets entry 18446744073709551615"},
      {one(R"({"dtype":"U8","shape":[0],"data_offsets":[8,4]})"), "begin after end"},
      {one(R"({"dtype":"F32","shape":[4],"data_offsets":[0,16]})"),
       "truncated: tensor 'x' needs bytes [0, 16) but the data section has only 8 bytes"},
      {one(R"({"dtype":"F32","shape":[3],"data_offsets":[0,8]})"),
       "tensor 'x' has 8 bytes but F32 [3] needs 12"},
      {MakeFile(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                R"("b":{"dtype":"U8","shape":[2],"data_offsets":[6,8]}})",
                std::string(8, '\0')),
       "tensors 'a' [0, 8) and 'b' [6, 8) overlap"},
      {MakeFile(R"({"__metadata__":{"k":1}})"), "__metadata__ value of 'k' is a JSON number"},
      {MakeFile(R"({"__metadata__":["k"]})"), "__metadata__ is a JSON array"},
      {one(R"({"dtype":"BOOL","shape":[2],"data_offsets":[0,2]})", "\x01\x02"),
       "tensor 'x' holds a BOOL byte other than 0 or 1"},
  };
  for (const Case& c : cases) {
    const auto parsed = ParseSafetensors(c.file);
    ASSERT_FALSE(parsed.ok()) << "expected failure: " << c.expected;
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kDataLoss) << parsed.status();
    EXPECT_TRUE(Contains(parsed.status(), c.expected))
        << parsed.status() << " does not contain " << c.expected;
  }
}

TEST(SafetensorsTest, EveryTruncationFailsCleanly) {
  const std::string bytes = SerializeSafetensors(
      {{"a", torch::ones({2, 2})}, {"b", torch::arange(3, torch::kLong)}}, {{"k", "v"}});
  ASSERT_TRUE(ParseSafetensors(bytes).ok());
  for (size_t size = 0; size < bytes.size(); ++size) {
    const auto parsed = ParseSafetensors(std::string_view(bytes).substr(0, size));
    ASSERT_FALSE(parsed.ok()) << "prefix of " << size << " bytes parsed";
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kDataLoss);
    EXPECT_TRUE(Contains(parsed.status(), "truncated")) << size << ": " << parsed.status();
  }
}

// Not a fuzzer, but every single-bit corruption must end in a value or an
// error, never a crash.
TEST(SafetensorsTest, BitFlipsNeverCrash) {
  const std::string bytes = SerializeSafetensors(
      {{"a", torch::ones({2, 2})}, {"m", torch::tensor({true, false})}}, {{"k", "v"}});
  for (size_t i = 0; i < bytes.size(); ++i) {
    for (int bit = 0; bit < 8; ++bit) {
      std::string flipped = bytes;
      flipped[i] = static_cast<char>(flipped[i] ^ (1 << bit));
      const auto parsed = ParseSafetensors(flipped);
      if (!parsed.ok()) {
        EXPECT_EQ(parsed.status().code(), absl::StatusCode::kDataLoss);
      }
    }
  }
}

TEST(SafetensorsTest, CheckTensorsNamesEveryMismatch) {
  const TensorMap tensors = {{"x", torch::zeros({3, 4}, torch::kHalf)}};
  struct Case {
    std::map<std::string, TensorSpec> expected;
    TensorMap tensors;
    std::string message;
  };
  const Case cases[] = {
      {{{"x", {{3, 4}, torch::kHalf}}, {"blocks.0.attn.qkv.weight", {{768, 256}, torch::kFloat}}},
       tensors,
       "safetensors: missing tensor 'blocks.0.attn.qkv.weight' (expected F32 [768, 256])"},
      {{{"x", {{3, 4}, torch::kHalf}}},
       {{"x", tensors.at("x")}, {"foo", torch::zeros({1})}},
       "safetensors: unknown tensor 'foo' in file"},
      {{{"x", {{3, 4}, torch::kFloat}}}, tensors, "tensor 'x' has dtype F16, expected F32"},
      {{{"x", {{4, 3}, torch::kHalf}}}, tensors, "tensor 'x' has shape [3, 4], expected [4, 3]"},
      {{{"x", {{}, torch::kHalf}}}, tensors, "tensor 'x' has shape [3, 4], expected []"},
  };
  for (const Case& c : cases) {
    const absl::Status status = CheckTensors(c.tensors, c.expected);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
    EXPECT_TRUE(Contains(status, c.message)) << status << " does not contain " << c.message;
  }
  EXPECT_TRUE(CheckTensors(tensors, {{"x", {{3, 4}, torch::kHalf}}}).ok());

  std::map<std::string, TensorSpec> many;
  for (int i = 0; i < 20; ++i) many["t" + std::to_string(i)] = {{1}, torch::kFloat};
  EXPECT_TRUE(Contains(CheckTensors({}, many), "; and 12 more"));
}

class SafetensorsFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = ::testing::TempDir() + "/safetensors_test.XXXXXX";
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::vector<std::string> Listing() const {
    std::vector<std::string> names;
    for (const auto& entry : std::filesystem::directory_iterator(dir_)) {
      names.push_back(entry.path().filename().string());
    }
    return names;
  }

  std::string dir_;
};

TEST_F(SafetensorsFileTest, WritesAtomicallyAndReadsBack) {
  const std::string path = dir_ + "/model.safetensors";
  const TensorMap tensors = EveryDtype();
  const SafetensorsMetadata metadata = {{"step", "12"}};
  ASSERT_TRUE(WriteSafetensorsFile(path, tensors, metadata).ok());
  EXPECT_EQ(Listing(), std::vector<std::string>{"model.safetensors"});

  std::ifstream in(path, std::ios::binary);
  const std::string on_disk((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(on_disk, SerializeSafetensors(tensors, metadata));

  auto read = ReadSafetensorsFile(path);
  ASSERT_TRUE(read.ok()) << read.status();
  ExpectSameTensors(read->tensors, tensors);
  EXPECT_EQ(read->metadata, metadata);

  // Replacing an existing file leaves only the new one behind.
  ASSERT_TRUE(WriteSafetensorsFile(path, {{"w", torch::ones({2})}}).ok());
  read = ReadSafetensorsFile(path);
  ASSERT_TRUE(read.ok()) << read.status();
  ExpectSameTensors(read->tensors, {{"w", torch::ones({2})}});
  EXPECT_TRUE(read->metadata.empty());
  EXPECT_EQ(Listing(), std::vector<std::string>{"model.safetensors"});
}

TEST_F(SafetensorsFileTest, ReportsFileErrors) {
  const std::string path = dir_ + "/model.safetensors";
  EXPECT_EQ(ReadSafetensorsFile(path).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(WriteSafetensorsFile(dir_ + "/no/such/dir.safetensors", {}).code(),
            absl::StatusCode::kNotFound);

  const absl::Status refused =
      WriteSafetensorsFile(path, {{"c", torch::zeros({1}, torch::kComplexFloat)}});
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument) << refused;
  EXPECT_TRUE(Contains(refused, "tensor 'c' has dtype ComplexFloat")) << refused;
  EXPECT_TRUE(Listing().empty());

  std::ofstream(path, std::ios::binary) << MakeFile("{}", "");
  std::ofstream(path, std::ios::binary | std::ios::app) << "x";  // Valid then one stray byte: fine.
  EXPECT_TRUE(ReadSafetensorsFile(path).ok());
  std::ofstream(path, std::ios::binary) << "short";
  const auto corrupt = ReadSafetensorsFile(path);
  EXPECT_EQ(corrupt.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_TRUE(Contains(corrupt.status(), path)) << corrupt.status();
}

}  // namespace
}  // namespace linserve
