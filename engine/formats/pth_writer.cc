#include "engine/formats/pth_writer.h"

#include <torch/types.h>

#include <cstring>
#include <string_view>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/formats/zip_writer.h"

namespace linserve {
namespace {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "tensor bytes are written as they lie in memory, and the file says little-endian");

void PutLe(std::string* out, uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) out->push_back(static_cast<char>(value >> (8 * i)));
}

const char* StorageType(c10::ScalarType dtype) {
  switch (dtype) {
    case c10::ScalarType::Float:
      return "FloatStorage";
    case c10::ScalarType::BFloat16:
      return "BFloat16Storage";
    case c10::ScalarType::Half:
      return "HalfStorage";
    default:
      return nullptr;
  }
}

// The protocol-2 pickle Python's pickler writes for torch.save's dict,
// without the memo (Python memoizes repeats; readers need not see any).
class PickleWriter {
 public:
  std::string Finish() && { return std::move(out_); }

  void Op(char op) { out_.push_back(op); }
  void Int(int64_t n) {
    if (n >= 0 && n < (int64_t{1} << 31)) {
      Op('J');
      PutLe(&out_, static_cast<uint64_t>(n), 4);
    } else {
      Op('\x8a');  // LONG1 with 8 bytes.
      out_.push_back(8);
      PutLe(&out_, static_cast<uint64_t>(n), 8);
    }
  }
  void String(std::string_view s) {
    Op('X');
    PutLe(&out_, s.size(), 4);
    out_.append(s);
  }
  void Global(std::string_view module, std::string_view name) {
    Op('c');
    out_.append(module);
    out_.push_back('\n');
    out_.append(name);
    out_.push_back('\n');
  }
  void IntTuple(c10::IntArrayRef values) {
    Op('(');
    for (int64_t v : values) Int(v);
    Op('t');
  }

 private:
  std::string out_;
};

std::string Pickle(const std::vector<std::pair<std::string, at::Tensor>>& tensors) {
  PickleWriter p;
  p.Op('\x80');
  p.Op('\x02');
  p.Op('}');
  p.Op('(');
  for (size_t i = 0; i < tensors.size(); ++i) {
    const at::Tensor& t = tensors[i].second;
    const char* storage_type = StorageType(t.scalar_type());
    TORCH_CHECK(storage_type != nullptr, "SerializePth: tensor '", tensors[i].first, "' has dtype ",
                t.scalar_type(), "; only float32, bfloat16, float16 are written");
    p.String(tensors[i].first);
    p.Global("torch._utils", "_rebuild_tensor_v2");
    p.Op('(');
    p.Op('(');  // Persistent id: ('storage', type, key, location, numel).
    p.String("storage");
    p.Global("torch", storage_type);
    p.String(std::to_string(i));
    p.String("cpu");
    p.Int(t.numel());
    p.Op('t');
    p.Op('Q');
    p.Int(0);  // Storage offset.
    p.IntTuple(t.sizes());
    p.IntTuple(t.strides());
    p.Op('\x89');  // requires_grad = False.
    p.Global("collections", "OrderedDict");
    p.Op(')');
    p.Op('R');  // Backward hooks: OrderedDict().
    p.Op('t');
    p.Op('R');
  }
  p.Op('u');
  p.Op('.');
  return std::move(p).Finish();
}

}  // namespace

std::string SerializePth(const TensorMap& tensors, const PthWriteOptions& options) {
  std::vector<std::pair<std::string, at::Tensor>> contiguous;
  contiguous.reserve(tensors.size());
  for (const auto& [name, tensor] : tensors) {
    TORCH_CHECK(tensor.defined() && tensor.layout() == c10::kStrided, "SerializePth: tensor '",
                name, "' is undefined or not dense");
    contiguous.emplace_back(name, tensor.cpu().contiguous());
  }
  const std::string& dir = options.archive_name;
  const std::string pickle = Pickle(contiguous);
  std::vector<std::pair<std::string, std::string_view>> entries;
  entries.emplace_back(dir + "/data.pkl", pickle);
  entries.emplace_back(dir + "/byteorder", "little");
  for (size_t i = 0; i < contiguous.size(); ++i) {
    const at::Tensor& t = contiguous[i].second;
    const size_t nbytes = t.numel() * t.element_size();
    entries.emplace_back(absl::StrCat(dir, "/data/", i),
                         nbytes == 0
                             ? std::string_view()
                             : std::string_view(static_cast<const char*>(t.data_ptr()), nbytes));
  }
  entries.emplace_back(dir + "/version", "3\n");
  ZipWriteOptions zip_options;
  zip_options.force_zip64 = options.force_zip64;
  return WriteStoredZip(entries, zip_options);
}

}  // namespace linserve
