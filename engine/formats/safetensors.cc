#include "engine/formats/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <torch/types.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/base/status_macros.h"
#include "nlohmann/json.hpp"

namespace linserve {
namespace {

// Tensor bytes are copied between file and memory without swapping.
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "safetensors data is little-endian; a big-endian host needs byte swapping");

using json = nlohmann::json;

constexpr char kMetadataKey[] = "__metadata__";
// The reference reader's limit; past it the header is corrupt, not large.
constexpr uint64_t kMaxHeaderBytes = uint64_t{100} << 20;
// Real checkpoints stay far below; the cap bounds what one entry can cost.
constexpr size_t kMaxRank = 64;
// Keeps messages readable when a hostile header holds huge strings.
constexpr size_t kMaxQuoted = 256;
// CheckTensors stops listing here: a wholly wrong checkpoint is one problem.
constexpr size_t kMaxReportedMismatches = 8;

struct DtypeName {
  const char* name;
  c10::ScalarType type;
};
constexpr DtypeName kDtypes[] = {
    {"F64", c10::ScalarType::Double}, {"F32", c10::ScalarType::Float},
    {"F16", c10::ScalarType::Half},   {"BF16", c10::ScalarType::BFloat16},
    {"I64", c10::ScalarType::Long},   {"I32", c10::ScalarType::Int},
    {"I16", c10::ScalarType::Short},  {"I8", c10::ScalarType::Char},
    {"U8", c10::ScalarType::Byte},    {"BOOL", c10::ScalarType::Bool},
};

const char* SafetensorsDtypeName(c10::ScalarType type) {
  for (const DtypeName& d : kDtypes) {
    if (d.type == type) return d.name;
  }
  return nullptr;
}

std::string DtypeLabel(c10::ScalarType type) {
  const char* name = SafetensorsDtypeName(type);
  return name != nullptr ? name : c10::toString(type);
}

std::string ShapeLabel(c10::IntArrayRef shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

std::string Quoted(std::string_view text) {
  if (text.size() <= kMaxQuoted) return std::string(text);
  return std::string(text.substr(0, kMaxQuoted)) + "...";
}

template <typename... Args>
absl::Status Corrupt(const Args&... args) {
  return absl::DataLossError(absl::StrCat("safetensors: ", args...));
}

// One header entry as the file declares it.
struct Entry {
  c10::ScalarType dtype = c10::ScalarType::Undefined;
  std::vector<int64_t> shape;
  std::vector<int64_t> offsets;
  unsigned fields_seen = 0;  // Bit i set once kFields[i] has been read.
};
constexpr const char* kFields[] = {"dtype", "shape", "data_offsets"};

// One JSON value as the SAX events deliver it; containers arrive as their
// opening bracket.
struct Value {
  enum Kind { kNull, kBoolean, kNumber, kString, kObject, kArray } kind;
  std::string text;       // A string's contents, else how the value reads in JSON.
  bool is_count = false;  // A non-negative integer that fits int64 (torch's sizes).
  int64_t count = 0;

  const char* TypeName() const {
    static constexpr const char* kNames[] = {"null",   "boolean", "number",
                                             "string", "object",  "array"};
    return kNames[kind];
  }
  std::string Shown() const { return kind == kString ? "\"" + Quoted(text) + "\"" : text; }
};

// Reads the header straight from parser events rather than through a DOM,
// stopping at the first thing out of place, so that memory follows what has
// been accepted and never the shape of a hostile header (a DOM of 100 MiB of
// "[1,1,..." costs gigabytes).
class HeaderReader final : public json::json_sax_t {
 public:
  explicit HeaderReader(uint64_t data_size) : data_size_(data_size) {}

  const absl::Status& status() const { return status_; }
  std::map<std::string, Entry>& entries() { return entries_; }
  SafetensorsMetadata& metadata() { return metadata_; }

  bool null() override { return OnValue({Value::kNull, "null"}); }
  bool boolean(bool b) override { return OnValue({Value::kBoolean, b ? "true" : "false"}); }
  bool number_integer(number_integer_t n) override {  // Only negative numbers come here.
    return OnValue({Value::kNumber, n == 0 ? "-0" : std::to_string(n)});
  }
  bool number_unsigned(number_unsigned_t n) override {
    const bool fits = n <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
    return OnValue({Value::kNumber, std::to_string(n), fits, static_cast<int64_t>(n)});
  }
  bool number_float(number_float_t, const string_t& text) override {
    return OnValue({Value::kNumber, text});
  }
  bool string(string_t& s) override { return OnValue({Value::kString, std::move(s)}); }
  bool binary(binary_t&) override { return Fail(Corrupt("header holds binary data")); }
  bool start_object(std::size_t) override { return OnValue({Value::kObject, "{...}"}); }
  bool start_array(std::size_t) override { return OnValue({Value::kArray, "[...]"}); }
  bool key(string_t& key) override;
  bool end_object() override;
  bool end_array() override {
    at_ = At::kEntry;  // Arrays open only inside an entry.
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const json::exception& e) override {
    return Fail(Corrupt("header is not valid JSON: ", Quoted(e.what())));
  }

 private:
  enum class At { kStart, kTop, kMetadata, kEntry, kShape, kOffsets, kDone };

  bool Fail(absl::Status status) {
    status_ = std::move(status);
    return false;  // Stops the parser.
  }
  template <typename... Args>
  bool FailTensor(const Args&... args) {
    return Fail(Corrupt("tensor '", name_, "' ", args...));
  }
  bool OnValue(Value v);
  bool FinishEntry();

  const uint64_t data_size_;
  absl::Status status_;
  At at_ = At::kStart;
  std::string name_;  // The top-level key being read.
  std::string key_;   // The __metadata__ key being read.
  size_t field_ = 0;  // Index into kFields of the entry field being read.
  Entry entry_;
  std::map<std::string, Entry> entries_;
  SafetensorsMetadata metadata_;
};

bool HeaderReader::key(string_t& key) {
  if (at_ == At::kTop) {
    name_ = std::move(key);
    if (entries_.count(name_) != 0) return FailTensor("appears twice");
  } else if (at_ == At::kMetadata) {
    key_ = std::move(key);
  } else {  // At::kEntry, as keys only come inside objects.
    field_ = std::find(std::begin(kFields), std::end(kFields), key) - std::begin(kFields);
    if (field_ == std::size(kFields)) return FailTensor("has unknown field '", Quoted(key), "'");
    if ((entry_.fields_seen >> field_) & 1) return FailTensor("has field '", key, "' twice");
    entry_.fields_seen |= 1u << field_;
  }
  return true;
}

bool HeaderReader::OnValue(Value v) {
  switch (at_) {
    case At::kStart:
      if (v.kind != Value::kObject) {
        return Fail(Corrupt("header is a JSON ", v.TypeName(), ", not an object"));
      }
      at_ = At::kTop;
      return true;
    case At::kTop:
      if (name_ == kMetadataKey) {
        if (v.kind == Value::kNull) return true;  // The reference reads null as none.
        if (v.kind != Value::kObject) return Fail(Corrupt("__metadata__ is a JSON ", v.TypeName()));
        at_ = At::kMetadata;
        return true;
      }
      if (v.kind != Value::kObject) {
        return FailTensor("maps to a JSON ", v.TypeName(), ", expected an object");
      }
      entry_ = Entry();
      at_ = At::kEntry;
      return true;
    case At::kMetadata:
      if (v.kind != Value::kString) {
        return Fail(Corrupt("__metadata__ value of '", Quoted(key_), "' is a JSON ", v.TypeName(),
                            ", expected a string"));
      }
      metadata_[key_] = std::move(v.text);
      return true;
    case At::kEntry:
      if (field_ == 0) {
        for (const DtypeName& d : kDtypes) {
          if (v.kind == Value::kString && v.text == d.name) entry_.dtype = d.type;
        }
        if (entry_.dtype != c10::ScalarType::Undefined) return true;
        return FailTensor("has unsupported dtype ", v.Shown(),
                          " (supported: F64 F32 F16 BF16 I64 I32 I16 I8 U8 BOOL)");
      }
      if (v.kind != Value::kArray) {
        return FailTensor("has ", kFields[field_], " ", v.Shown(), ", expected an array");
      }
      at_ = field_ == 1 ? At::kShape : At::kOffsets;
      return true;
    case At::kShape:
    case At::kOffsets: {
      if (!v.is_count) {
        return FailTensor("has ", kFields[field_], " entry ", v.Shown(),
                          ", expected a non-negative integer");
      }
      std::vector<int64_t>& list = at_ == At::kShape ? entry_.shape : entry_.offsets;
      if (list.size() == kMaxRank) {
        return FailTensor("has more than ", kMaxRank, " ", kFields[field_], " entries");
      }
      list.push_back(v.count);
      return true;
    }
    case At::kDone:
      break;
  }
  return Fail(Corrupt("header has a value after its end"));  // The parser prevents this.
}

bool HeaderReader::end_object() {
  if (at_ == At::kEntry) return FinishEntry();
  at_ = at_ == At::kMetadata ? At::kTop : At::kDone;
  return true;
}

bool HeaderReader::FinishEntry() {
  for (size_t i = 0; i < std::size(kFields); ++i) {
    if (((entry_.fields_seen >> i) & 1) == 0) return FailTensor("is missing '", kFields[i], "'");
  }
  // Bytes spanned by the non-zero dimensions: bounding it bounds every stride
  // torch derives, even for tensors with a zero dimension.
  int64_t span = static_cast<int64_t>(c10::elementSize(entry_.dtype));
  bool has_zero_dim = false;
  for (int64_t size : entry_.shape) {
    has_zero_dim |= size == 0;
    if (size != 0 && __builtin_mul_overflow(span, size, &span)) {
      return FailTensor("has shape ", ShapeLabel(entry_.shape), " whose size overflows 64 bits");
    }
  }
  const uint64_t nbytes = has_zero_dim ? 0 : static_cast<uint64_t>(span);
  if (entry_.offsets.size() != 2) {
    return FailTensor("has data_offsets ", ShapeLabel(entry_.offsets), ", expected [begin, end]");
  }
  const uint64_t begin = entry_.offsets[0];
  const uint64_t end = entry_.offsets[1];
  if (begin > end) return FailTensor("has data_offsets [", begin, ", ", end, "], begin after end");
  if (end > data_size_) {
    return Fail(Corrupt("truncated: tensor '", name_, "' needs bytes [", begin, ", ", end,
                        ") but the data section has only ", data_size_, " bytes"));
  }
  if (end - begin != nbytes) {
    return FailTensor("has ", end - begin, " bytes but ", DtypeLabel(entry_.dtype), " ",
                      ShapeLabel(entry_.shape), " needs ", nbytes);
  }
  entries_.emplace(std::move(name_), std::move(entry_));
  at_ = At::kTop;
  return true;
}

absl::Status CheckNoOverlap(const std::map<std::string, Entry>& entries) {
  std::vector<std::pair<int64_t, const std::string*>> starts;  // Non-empty ranges only.
  for (const auto& [name, e] : entries) {
    if (e.offsets[1] > e.offsets[0]) starts.emplace_back(e.offsets[0], &name);
  }
  std::sort(starts.begin(), starts.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  for (size_t i = 1; i < starts.size(); ++i) {
    const std::string& a = *starts[i - 1].second;
    const std::string& b = *starts[i].second;
    const std::vector<int64_t>& a_range = entries.at(a).offsets;
    const std::vector<int64_t>& b_range = entries.at(b).offsets;
    if (b_range[0] < a_range[1]) {
      return Corrupt("tensors '", a, "' [", a_range[0], ", ", a_range[1], ") and '", b, "' [",
                     b_range[0], ", ", b_range[1], ") overlap");
    }
  }
  return absl::OkStatus();
}

// The header, its length prefix and padding, for tensors laid out in map order.
absl::StatusOr<std::string> BuildHead(const TensorMap& tensors,
                                      const SafetensorsMetadata& metadata) {
  // Insertion-ordered so the bytes match the reference writer's: metadata
  // first, then tensors in data order, fields as dtype, shape, data_offsets.
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header[kMetadataKey] = metadata;
  uint64_t offset = 0;
  for (const auto& [name, tensor] : tensors) {
    if (name == kMetadataKey) {
      return absl::InvalidArgumentError("safetensors: tensor name '__metadata__' is reserved");
    }
    if (!tensor.defined() || tensor.layout() != c10::kStrided) {
      return absl::InvalidArgumentError(
          absl::StrCat("safetensors: tensor '", name, "' is undefined or not dense"));
    }
    const char* dtype = SafetensorsDtypeName(tensor.scalar_type());
    if (dtype == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("safetensors: tensor '", name, "' has dtype ",
                                                     DtypeLabel(tensor.scalar_type()),
                                                     ", which this codec does not store"));
    }
    const uint64_t nbytes = tensor.numel() * tensor.element_size();
    nlohmann::ordered_json info;
    info["dtype"] = dtype;
    info["shape"] = tensor.sizes().vec();
    info["data_offsets"] = nlohmann::ordered_json::array({offset, offset + nbytes});
    header[name] = std::move(info);
    offset += nbytes;
  }
  std::string text;
  try {
    text = header.dump();
  } catch (const nlohmann::ordered_json::exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat("safetensors: a tensor name or metadata string is not UTF-8: ", e.what()));
  }
  // Aligns the data section to 8 bytes, as the reference writer does.
  text.append((8 - text.size() % 8) % 8, ' ');
  std::string head(8, '\0');
  for (int i = 0; i < 8; ++i) head[i] = static_cast<char>((text.size() >> (8 * i)) & 0xff);
  return head + text;
}

std::string_view TensorBytes(const at::Tensor& contiguous_cpu) {
  const size_t nbytes = contiguous_cpu.numel() * contiguous_cpu.element_size();
  if (nbytes == 0) return {};
  return {static_cast<const char*>(contiguous_cpu.data_ptr()), nbytes};
}

absl::Status IoError(int error, const char* what, const std::string& path) {
  return absl::ErrnoToStatus(error, absl::StrCat("safetensors: ", what, " '", path, "'"));
}

absl::StatusOr<std::string> ReadAll(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return IoError(errno, "cannot open", path);
  struct stat st;
  // One spare byte so that the read reporting end of file needs no regrowth.
  std::string bytes(fstat(fd, &st) == 0 && st.st_size > 0 ? st.st_size + 1 : 4096, '\0');
  size_t used = 0;
  ssize_t n;
  do {
    if (used == bytes.size()) bytes.resize(2 * bytes.size());  // The file grew.
    n = read(fd, bytes.data() + used, bytes.size() - used);
    used += n > 0 ? n : 0;
  } while (n > 0 || (n < 0 && errno == EINTR));
  const int error = errno;
  close(fd);
  if (n < 0) return IoError(error, "cannot read", path);
  bytes.resize(used);
  return bytes;
}

absl::Status WriteAll(int fd, std::string_view bytes, const std::string& path) {
  while (!bytes.empty()) {
    const ssize_t n = write(fd, bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return IoError(errno, "cannot write", path);
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  return absl::OkStatus();
}

// Converts one tensor at a time so that saving a GPU model needs host memory
// for its largest tensor only.
absl::Status WriteTensors(int fd, const TensorMap& tensors, const std::string& path) {
  for (const auto& [name, tensor] : tensors) {
    at::Tensor cpu;
    try {
      cpu = tensor.cpu().contiguous();
    } catch (const c10::Error& e) {
      return absl::InternalError(absl::StrCat("safetensors: cannot copy tensor '", name,
                                              "' to the CPU: ", e.what_without_backtrace()));
    }
    LINSERVE_RETURN_IF_ERROR(WriteAll(fd, TensorBytes(cpu), path));
  }
  return absl::OkStatus();
}

absl::Status SyncDirectory(const std::string& path) {
  const size_t slash = path.rfind('/');
  const std::string dir =
      slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
  const int fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return IoError(errno, "cannot open directory", dir);
  const int result = fsync(fd);
  const int error = errno;
  close(fd);
  if (result != 0) return IoError(error, "cannot fsync directory", dir);
  return absl::OkStatus();
}

// Asks the kernel to map the whole pages inside [p, p + n) for writing in one
// call. A fresh tensor of a state file's size (a 64x64 float64 matrix per
// head: 128 KiB and up) is memory the allocator just took from the kernel,
// and touching it page by page costs a fault per 4 KiB page: on a virtual
// machine, about 10 us each, 1.3 ms for a 538 KB state against 0.6 ms when
// mapped in one call. Best effort: kernels before 5.14 refuse the advice and
// the pages fault in as before.
void PrefaultForWrite(void* p, size_t n) {
#ifdef MADV_POPULATE_WRITE
  constexpr size_t kMinBytes = size_t{64} << 10;
  if (n < kMinBytes) return;
  const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t begin = (reinterpret_cast<uintptr_t>(p) + page - 1) / page * page;
  const uintptr_t end = (reinterpret_cast<uintptr_t>(p) + n) / page * page;
  if (end > begin) ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_POPULATE_WRITE);
#else
  (void)p;
  (void)n;
#endif
}

// ParseSafetensors and ParseSafetensorsInPlace.
absl::StatusOr<SafetensorsContents> Parse(std::string_view bytes, bool in_place) {
  if (bytes.size() < 8) {
    return Corrupt("truncated: file has ", bytes.size(),
                   " bytes, fewer than the 8-byte header length");
  }
  uint64_t header_size = 0;
  for (int i = 7; i >= 0; --i) header_size = (header_size << 8) | static_cast<uint8_t>(bytes[i]);
  if (header_size > kMaxHeaderBytes) {
    return Corrupt("header length ", header_size, " exceeds the ", kMaxHeaderBytes, "-byte cap");
  }
  if (header_size > bytes.size() - 8) {
    return Corrupt("truncated: header needs ", header_size, " bytes but only ", bytes.size() - 8,
                   " follow the length");
  }
  const std::string_view header = bytes.substr(8, header_size);
  const std::string_view data = bytes.substr(8 + header_size);
  HeaderReader reader(data.size());
  const bool parsed = json::sax_parse(header.begin(), header.end(), &reader);
  LINSERVE_RETURN_IF_ERROR(reader.status());
  if (!parsed) return Corrupt("header is not valid JSON");  // Every failure sets a status.
  LINSERVE_RETURN_IF_ERROR(CheckNoOverlap(reader.entries()));

  // Every range is now inside `data` and disjoint: allocation is bounded by the input.
  SafetensorsContents contents;
  contents.metadata = std::move(reader.metadata());
  for (const auto& [name, e] : reader.entries()) {
    const std::string_view src = data.substr(e.offsets[0], e.offsets[1] - e.offsets[0]);
    if (e.dtype == c10::ScalarType::Bool &&
        std::any_of(src.begin(), src.end(), [](char c) { return c != 0 && c != 1; })) {
      return Corrupt("tensor '", name, "' holds a BOOL byte other than 0 or 1");
    }
    const auto element_bytes = static_cast<uintptr_t>(c10::elementSize(e.dtype));
    if (in_place && reinterpret_cast<uintptr_t>(src.data()) % element_bytes == 0) {
      // from_blob writes nothing; the const is the caller's promise to keep.
      contents.tensors.emplace(
          name, torch::from_blob(const_cast<char*>(src.data()), e.shape, torch::dtype(e.dtype)));
      continue;
    }
    at::Tensor tensor = torch::empty(e.shape, torch::dtype(e.dtype));
    PrefaultForWrite(tensor.data_ptr(), src.size());
    if (!src.empty()) std::memcpy(tensor.data_ptr(), src.data(), src.size());
    contents.tensors.emplace(name, std::move(tensor));
  }
  return contents;
}

}  // namespace

absl::StatusOr<SafetensorsContents> ParseSafetensors(std::string_view bytes) {
  return Parse(bytes, /*in_place=*/false);
}

absl::StatusOr<SafetensorsContents> ParseSafetensorsInPlace(std::string_view bytes) {
  return Parse(bytes, /*in_place=*/true);
}

std::string SerializeSafetensors(const TensorMap& tensors, const SafetensorsMetadata& metadata) {
  absl::StatusOr<std::string> head = BuildHead(tensors, metadata);
  TORCH_CHECK(head.ok(), head.status().ToString());
  std::string out = *std::move(head);
  for (const auto& [name, tensor] : tensors) {
    const at::Tensor cpu = tensor.cpu().contiguous();
    const std::string_view bytes = TensorBytes(cpu);
    out.append(bytes.data(), bytes.size());
  }
  return out;
}

absl::StatusOr<SafetensorsContents> ReadSafetensorsFile(const std::string& path) {
  LINSERVE_ASSIGN_OR_RETURN(const std::string bytes, ReadAll(path));
  absl::StatusOr<SafetensorsContents> contents = ParseSafetensors(bytes);
  if (!contents.ok()) {
    return absl::Status(contents.status().code(),
                        absl::StrCat(contents.status().message(), " (in '", path, "')"));
  }
  return contents;
}

absl::Status WriteSafetensorsFile(const std::string& path, const TensorMap& tensors,
                                  const SafetensorsMetadata& metadata) {
  LINSERVE_ASSIGN_OR_RETURN(const std::string head, BuildHead(tensors, metadata));
  std::string temp = path + ".tmp.XXXXXX";
  const int fd = mkstemp(temp.data());
  if (fd < 0) return IoError(errno, "cannot create a temporary file for", path);
  absl::Status status = WriteAll(fd, head, temp);
  if (status.ok()) status = WriteTensors(fd, tensors, temp);
  // mkstemp creates 0600; a checkpoint is as readable as any other file.
  if (status.ok() && fchmod(fd, 0644) != 0) status = IoError(errno, "cannot chmod", temp);
  if (status.ok() && fsync(fd) != 0) status = IoError(errno, "cannot fsync", temp);
  if (close(fd) != 0 && status.ok()) status = IoError(errno, "cannot close", temp);
  if (status.ok() && rename(temp.c_str(), path.c_str()) != 0) {
    status = IoError(errno, "cannot rename a temporary file onto", path);
  }
  if (!status.ok()) {
    unlink(temp.c_str());
    return status;
  }
  return SyncDirectory(path);
}

absl::Status CheckTensors(const TensorMap& tensors,
                          const std::map<std::string, TensorSpec>& expected) {
  std::vector<std::string> problems;
  for (const auto& [name, spec] : expected) {
    const auto it = tensors.find(name);
    if (it == tensors.end()) {
      problems.push_back(absl::StrCat("missing tensor '", name, "' (expected ",
                                      DtypeLabel(spec.dtype), " ", ShapeLabel(spec.shape), ")"));
      continue;
    }
    const at::Tensor& tensor = it->second;
    if (!tensor.defined()) {
      problems.push_back(absl::StrCat("tensor '", name, "' is undefined"));
      continue;
    }
    if (tensor.scalar_type() != spec.dtype) {
      problems.push_back(absl::StrCat("tensor '", name, "' has dtype ",
                                      DtypeLabel(tensor.scalar_type()), ", expected ",
                                      DtypeLabel(spec.dtype)));
    }
    if (!tensor.sizes().equals(spec.shape)) {
      problems.push_back(absl::StrCat("tensor '", name, "' has shape ", ShapeLabel(tensor.sizes()),
                                      ", expected ", ShapeLabel(spec.shape)));
    }
  }
  for (const auto& entry : tensors) {
    if (expected.count(entry.first) == 0) {
      problems.push_back(absl::StrCat("unknown tensor '", entry.first, "' in file"));
    }
  }
  if (problems.empty()) return absl::OkStatus();
  const size_t shown = std::min(problems.size(), kMaxReportedMismatches);
  std::string message = absl::StrCat(
      "safetensors: ", absl::StrJoin(problems.begin(), problems.begin() + shown, "; "));
  if (shown < problems.size())
    absl::StrAppend(&message, "; and ", problems.size() - shown, " more");
  return absl::InvalidArgumentError(message);
}

}  // namespace linserve
