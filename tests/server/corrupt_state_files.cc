#include "tests/server/corrupt_state_files.h"

#include <torch/types.h>

#include <cstdio>
#include <cstdlib>

#include "engine/formats/safetensors.h"
#include "engine/base/sha256.h"
#include "nlohmann/json.hpp"
#include "server/store/state_file.h"

namespace linserve {
namespace {

constexpr size_t kChecksumBytes = 32;

// The helpers damage sound files only; anything else is a broken test.
template <typename T>
T Must(absl::StatusOr<T> value) {
  if (!value.ok()) {
    std::fprintf(stderr, "corrupt_state_files: %s\n", value.status().ToString().c_str());
    std::abort();
  }
  return *std::move(value);
}

uint64_t ReadLittleEndian(const std::string& bytes, size_t offset, int width) {
  uint64_t value = 0;
  for (int i = 0; i < width; ++i) {
    value |= static_cast<uint64_t>(static_cast<unsigned char>(bytes[offset + i])) << (8 * i);
  }
  return value;
}

SessionRecord Decoded(const std::string& file) {
  return Must(DecodeStateFile(file, static_cast<int64_t>(file.size())));
}

SafetensorsContents PayloadOf(const std::string& file) {
  return Must(ParseSafetensors(Decoded(file).payload));
}

}  // namespace

std::string Resealed(std::string file) {
  file.resize(file.size() - kChecksumBytes);
  return file + Sha256Digest({file});
}

std::string WithFormatVersion(const std::string& file, uint32_t version) {
  std::string changed = file;
  for (int i = 0; i < 4; ++i) changed[8 + i] = static_cast<char>((version >> (8 * i)) & 0xff);
  return Resealed(changed);
}

std::string WithPayload(const std::string& file, const std::string& payload) {
  SessionRecord record = Decoded(file);
  record.payload = payload;
  return EncodeStateFile(record);
}

std::string WithValueInTensor(const std::string& file, const std::string& name, float value) {
  SafetensorsContents contents = PayloadOf(file);
  torch::Tensor& tensor = contents.tensors.at(name);
  tensor.view({-1})[tensor.numel() / 2] = value;
  return WithPayload(file, SerializeSafetensors(contents.tensors, contents.metadata));
}

std::string WithTensorsAs(const std::string& file, c10::ScalarType dtype) {
  SafetensorsContents contents = PayloadOf(file);
  for (auto& [name, tensor] : contents.tensors) {
    if (tensor.is_floating_point()) tensor = tensor.to(dtype);
  }
  return WithPayload(file, SerializeSafetensors(contents.tensors, contents.metadata));
}

std::string ClaimingHugeTensor(const std::string& file, const std::string& name,
                               uint64_t claimed_bytes) {
  const SafetensorsContents contents = PayloadOf(file);
  const nlohmann::json header = {
      {"__metadata__", contents.metadata},
      {name,
       {{"dtype", "F32"}, {"shape", {claimed_bytes / 4}}, {"data_offsets", {0, claimed_bytes}}}}};
  std::string table = header.dump();
  table.append((8 - table.size() % 8) % 8, ' ');
  std::string payload;
  for (int i = 0; i < 8; ++i) payload.push_back(static_cast<char>((table.size() >> (8 * i)) & 0xff));
  payload += table;
  payload.append(64, '\0');  // a few bytes of "data"
  return WithPayload(file, payload);
}

StructureRange StructureOf(const std::string& file) {
  StructureRange range;
  const size_t header_bytes = ReadLittleEndian(file, 12, 4);
  range.record_header_begin = 16;
  range.record_header_end = 16 + header_bytes;
  const size_t payload_at = 24 + header_bytes;
  range.tensor_table_begin = payload_at;
  range.tensor_table_end = payload_at + 8 + ReadLittleEndian(file, payload_at, 8);
  return range;
}

NumberAt NumberAtOffset(const std::string& file, size_t offset) {
  const StructureRange range = StructureOf(file);
  const nlohmann::json table = nlohmann::json::parse(file.substr(
      range.tensor_table_begin + 8, range.tensor_table_end - range.tensor_table_begin - 8));
  const SafetensorsContents contents = PayloadOf(file);
  for (const auto& [name, entry] : table.items()) {
    if (name == "__metadata__") continue;
    const size_t begin = range.tensor_table_end + entry["data_offsets"][0].get<size_t>();
    const size_t end = range.tensor_table_end + entry["data_offsets"][1].get<size_t>();
    if (offset < begin || offset >= end) continue;
    const c10::ScalarType dtype = contents.tensors.at(name).scalar_type();
    const size_t width = c10::elementSize(dtype);
    return {begin + (offset - begin) / width * width, dtype};
  }
  std::fprintf(stderr, "corrupt_state_files: offset %zu is in no tensor\n", offset);
  std::abort();
}

}  // namespace linserve
