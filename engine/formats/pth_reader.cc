#include "engine/formats/pth_reader.h"

#include <torch/types.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/formats/byte_source.h"
#include "engine/base/status_macros.h"
#include "engine/formats/torch_unpickler.h"
#include "engine/formats/zip_directory.h"

namespace linserve {
namespace {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "storages are read as they lie in the file, which says little-endian");

// data.pkl of the largest state dicts is a few MB; past this it is corrupt.
constexpr uint64_t kMaxPickleBytes = uint64_t{64} << 20;
constexpr size_t kMaxShown = 200;
// What torch.save before PyTorch 1.6 wrote first: a pickled magic number.
constexpr char kLegacyMagic[] = "\x80\x02\x8a\x0a\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19";

struct StorageDtype {
  const char* type;
  c10::ScalarType dtype;
};
constexpr StorageDtype kStorageDtypes[] = {
    {"FloatStorage", c10::ScalarType::Float},
    {"BFloat16Storage", c10::ScalarType::BFloat16},
    {"HalfStorage", c10::ScalarType::Half},
};

std::string Shown(std::string_view text) {
  // Debian's Abseil has a string_view of its own, not std's.
  const absl::string_view view(text.data(), std::min(text.size(), kMaxShown));
  return absl::StrCat(absl::CHexEscape(view), text.size() > kMaxShown ? "..." : "");
}

absl::Status WithPrefix(const absl::Status& status) {
  return absl::Status(status.code(), absl::StrCat("pth: ", status.message()));
}

template <typename... Args>
absl::Status Corrupt(const Args&... args) {
  return absl::DataLossError(absl::StrCat("pth: ", args...));
}

// Reads each storage once, however many tensors view it.
class StorageLoader {
 public:
  StorageLoader(const ByteSource& source, const std::vector<ZipEntry>& entries,
                std::string data_dir)
      : source_(source), data_dir_(std::move(data_dir)) {
    for (const ZipEntry& e : entries) entries_.emplace(e.name, &e);
  }

  absl::StatusOr<at::Tensor> Load(const std::string& tensor_name, const PickledTensor& t,
                                  c10::ScalarType dtype);

 private:
  struct Loaded {
    std::string type;
    int64_t numel;
    at::Tensor data;  // One dimension, numel elements.
  };
  const ByteSource& source_;
  const std::string data_dir_;
  std::map<std::string_view, const ZipEntry*> entries_;
  std::map<std::string, Loaded> loaded_;
};

absl::StatusOr<at::Tensor> StorageLoader::Load(const std::string& tensor_name,
                                               const PickledTensor& t, c10::ScalarType dtype) {
  const auto it = loaded_.find(t.storage_key);
  if (it != loaded_.end()) {
    if (it->second.type != t.storage_type || it->second.numel != t.storage_numel) {
      return Corrupt("tensor '", Shown(tensor_name), "' reads storage '", Shown(t.storage_key),
                     "' as ", t.storage_numel, " of torch.", Shown(t.storage_type),
                     ", an earlier tensor as ", it->second.numel, " of torch.", it->second.type);
    }
    return it->second.data;
  }
  const std::string entry_name = data_dir_ + t.storage_key;
  const auto entry = entries_.find(entry_name);
  if (entry == entries_.end()) {
    return Corrupt("tensor '", Shown(tensor_name), "': its data '", Shown(entry_name),
                   "' is missing from the archive");
  }
  const ZipEntry& e = *entry->second;
  const uint64_t element_size = c10::elementSize(dtype);
  if (e.size % element_size != 0 ||
      e.size / element_size != static_cast<uint64_t>(t.storage_numel)) {
    return Corrupt("tensor '", Shown(tensor_name), "': its data '", Shown(entry_name), "' at byte ",
                   e.data_offset, " has ", e.size, " bytes, but its storage holds ",
                   t.storage_numel, " elements of ", element_size, " bytes");
  }
  // The entry lies inside the file and overlaps no other, so this allocation
  // is bounded by the file's size.
  at::Tensor data = torch::empty({t.storage_numel}, torch::dtype(dtype));
  if (e.size > 0) {
    absl::Status read = source_.Read(e.data_offset, e.size, static_cast<char*>(data.data_ptr()));
    if (!read.ok()) {
      return absl::Status(read.code(),
                          absl::StrCat("tensor '", Shown(tensor_name), "': ", read.message()));
    }
  }
  loaded_.emplace(t.storage_key, Loaded{t.storage_type, t.storage_numel, data});
  return data;
}

absl::StatusOr<c10::ScalarType> DtypeOf(const std::string& name, const PickledTensor& t) {
  for (const StorageDtype& s : kStorageDtypes) {
    if (t.storage_type == s.type) return s.dtype;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("pth: tensor '", Shown(name), "' is stored as torch.", Shown(t.storage_type),
                   "; only torch.FloatStorage (float32), torch.BFloat16Storage (bfloat16) and "
                   "torch.HalfStorage (float16) are read"));
}

// The number of elements, after checking that the view reads only inside
// its storage and that no size or stride computation overflows. The bytes
// spanned by the non-zero dimensions are bounded even for an empty tensor,
// since torch derives its strides from them.
absl::StatusOr<int64_t> CheckView(const std::string& name, const PickledTensor& t,
                                  c10::ScalarType dtype) {
  auto shape = [&] {
    return absl::StrCat("sizes [", absl::StrJoin(t.sizes, ", "), "], strides [",
                        absl::StrJoin(t.strides, ", "), "] and offset ", t.storage_offset);
  };
  int64_t span_bytes = static_cast<int64_t>(c10::elementSize(dtype));
  bool empty = false;
  int64_t last = t.storage_offset;  // The last element the view reads.
  for (size_t i = 0; i < t.sizes.size(); ++i) {
    if (t.sizes[i] == 0) {
      empty = true;
      continue;
    }
    int64_t reach;
    if (__builtin_mul_overflow(span_bytes, t.sizes[i], &span_bytes) ||
        __builtin_mul_overflow(t.sizes[i] - 1, t.strides[i], &reach) ||
        __builtin_add_overflow(last, reach, &last)) {
      return Corrupt("tensor '", Shown(name), "' of ", shape(), " overflows 64 bits");
    }
  }
  if (empty) return 0;
  if (last >= t.storage_numel) {
    return Corrupt("tensor '", Shown(name), "' of ", shape(), " reads element ", last,
                   " of a storage of ", t.storage_numel);
  }
  return span_bytes / static_cast<int64_t>(c10::elementSize(dtype));
}

absl::StatusOr<TensorMap> Materialize(const ByteSource& source,
                                      const std::vector<ZipEntry>& entries,
                                      const std::string& archive, const PickledStateDict& dict) {
  StorageLoader storages(source, entries, archive + "/data/");
  uint64_t copied_bytes = 0;
  TensorMap tensors;
  for (const auto& [name, t] : dict) {
    LINSERVE_ASSIGN_OR_RETURN(const c10::ScalarType dtype, DtypeOf(name, t));
    LINSERVE_ASSIGN_OR_RETURN(const int64_t numel, CheckView(name, t, dtype));
    LINSERVE_ASSIGN_OR_RETURN(const at::Tensor storage, storages.Load(name, t, dtype));
    if (numel == 0) {
      tensors.emplace(name, torch::empty(t.sizes, torch::dtype(dtype)));
      continue;
    }
    at::Tensor view = storage.as_strided(t.sizes, t.strides, t.storage_offset);
    if (numel != t.storage_numel || !view.is_contiguous()) {
      // A view of part of a storage (or of one element many times): copy
      // it, within a budget, since views cost no bytes in the file.
      copied_bytes += static_cast<uint64_t>(numel) * c10::elementSize(dtype);
      if (copied_bytes > source.size()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "pth: tensor '", Shown(name), "' is a view whose copy would bring the copied views to ",
            copied_bytes, " bytes, more than the file's ", source.size()));
      }
      view = view.contiguous();
    }
    tensors.emplace(name, std::move(view));
  }
  return tensors;
}

// Where torch.save's records lie: every entry is "<archive>/<record>", the
// archive named after the file's stem when it was saved.
absl::StatusOr<std::string> ArchiveName(const std::vector<ZipEntry>& entries) {
  if (entries.empty()) return Corrupt("the zip archive is empty, not a torch.save checkpoint");
  const std::string& first = entries.front().name;
  const size_t slash = first.find('/');
  if (slash == std::string::npos) {
    return Corrupt("entry '", Shown(first), "' is not inside a folder as torch.save writes");
  }
  return first.substr(0, slash);
}

const ZipEntry* FindEntry(const std::vector<ZipEntry>& entries, const std::string& name) {
  for (const ZipEntry& e : entries) {
    if (e.name == name) return &e;
  }
  return nullptr;
}

absl::StatusOr<TensorMap> ReadPth(const ByteSource& source) {
  absl::StatusOr<std::vector<ZipEntry>> entries = ReadZipDirectory(source);
  if (!entries.ok()) {
    constexpr size_t kMagicBytes = sizeof(kLegacyMagic) - 1;
    if (source.size() >= kMagicBytes) {
      LINSERVE_ASSIGN_OR_RETURN(const std::string head, source.ReadString(0, kMagicBytes));
      if (head == std::string_view(kLegacyMagic, kMagicBytes)) {
        return absl::InvalidArgumentError(
            "pth: a checkpoint in torch.save's legacy format (before PyTorch 1.6), which is not "
            "read; save it again with a current torch");
      }
    }
    return WithPrefix(entries.status());
  }
  LINSERVE_ASSIGN_OR_RETURN(const std::string archive, ArchiveName(*entries));

  if (const ZipEntry* order = FindEntry(*entries, archive + "/byteorder")) {
    const std::string expected = "little";
    LINSERVE_ASSIGN_OR_RETURN(
        const std::string byteorder,
        source.ReadString(order->data_offset, std::min<uint64_t>(order->size, 16)));
    if (byteorder != expected) {
      return absl::InvalidArgumentError(absl::StrCat(
          "pth: the checkpoint's byte order is '", Shown(byteorder), "', and only little is read"));
    }
  }

  const std::string pickle_name = archive + "/data.pkl";
  const ZipEntry* pickle_entry = FindEntry(*entries, pickle_name);
  if (pickle_entry == nullptr) {
    return Corrupt("the archive has no '", Shown(pickle_name),
                   "', so it is not a torch.save checkpoint");
  }
  if (pickle_entry->size > kMaxPickleBytes) {
    return Corrupt("'", Shown(pickle_name), "' at byte ", pickle_entry->data_offset, " has ",
                   pickle_entry->size, " bytes, more than the ", kMaxPickleBytes,
                   " any dict of tensors needs");
  }
  LINSERVE_ASSIGN_OR_RETURN(const std::string pickle,
                            source.ReadString(pickle_entry->data_offset, pickle_entry->size));
  absl::StatusOr<PickledStateDict> dict = UnpickleStateDict(pickle, pickle_entry->data_offset);
  if (!dict.ok()) return WithPrefix(dict.status());
  try {
    return Materialize(source, *entries, archive, *dict);
  } catch (const c10::Error& e) {
    // Only allocation can throw here: every view was checked above.
    return absl::ResourceExhaustedError(
        absl::StrCat("pth: cannot allocate the tensors: ", e.what_without_backtrace()));
  }
}

}  // namespace

absl::StatusOr<TensorMap> ReadPthFile(const std::string& path) {
  absl::StatusOr<std::unique_ptr<ByteSource>> source = OpenFileByteSource(path);
  if (!source.ok()) return WithPrefix(source.status());
  absl::StatusOr<TensorMap> tensors = ReadPth(**source);
  if (!tensors.ok()) {
    return absl::Status(tensors.status().code(),
                        absl::StrCat(tensors.status().message(), " (in '", path, "')"));
  }
  return tensors;
}

absl::StatusOr<TensorMap> ParsePth(std::string_view bytes) {
  return ReadPth(*MemoryByteSource(bytes));
}

}  // namespace linserve
