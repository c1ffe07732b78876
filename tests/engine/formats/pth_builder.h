#ifndef LINSERVE_TESTS_ENGINE_FORMATS_PTH_BUILDER_H_
#define LINSERVE_TESTS_ENGINE_FORMATS_PTH_BUILDER_H_

// Protocol-2 pickles written opcode by opcode, and .pth archives around
// them, for the files torch.save would not write: the malformed and hostile
// ones the reader must refuse.

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "engine/formats/zip_writer.h"

namespace linserve {

inline bool Contains(const absl::Status& status, const std::string& text) {
  return std::string(status.message()).find(text) != std::string::npos;
}

inline std::string Le32(uint32_t n) {
  std::string out;
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>(n >> (8 * i)));
  return out;
}

class Pickle {
 public:
  Pickle() : bytes_("\x80\x02") {}

  Pickle& Op(std::string_view op) {
    bytes_.append(op);
    return *this;
  }
  Pickle& Int(int32_t n) { return Op("J").Op(Le32(static_cast<uint32_t>(n))); }
  Pickle& Str(std::string_view s) { return Op("X").Op(Le32(s.size())).Op(s); }
  Pickle& Global(std::string_view module, std::string_view name) {
    return Op("c").Op(module).Op("\n").Op(name).Op("\n");
  }
  Pickle& Ints(const std::vector<int32_t>& values) {
    Op("(");
    for (int32_t v : values) Int(v);
    return Op("t");
  }
  // BINPUT and BINGET: memoizes the top of the stack as `index`, pushes it again.
  Pickle& Put(uint8_t index) { return Op("q").Op(std::string(1, static_cast<char>(index))); }
  Pickle& Get(uint8_t index) { return Op("h").Op(std::string(1, static_cast<char>(index))); }
  // Pushes _rebuild_tensor_v2 of storage `key`, as torch.save writes it.
  Pickle& Tensor(std::string_view key, std::string_view type, int32_t numel, int32_t offset,
                 const std::vector<int32_t>& sizes, const std::vector<int32_t>& strides) {
    Global("torch._utils", "_rebuild_tensor_v2").Op("((").Str("storage").Global("torch", type);
    Str(key).Str("cpu").Int(numel).Op("tQ").Int(offset).Ints(sizes).Ints(strides);
    return Op("\x89").Global("collections", "OrderedDict").Op(")RtR");
  }
  std::string Stop() const { return bytes_ + "."; }

 private:
  std::string bytes_;
};

// A checkpoint holding `pickle` and storages "archive/data/<key>".
inline std::string Pth(const std::string& pickle,
                       const std::vector<std::pair<std::string, std::string>>& storages = {}) {
  std::vector<std::pair<std::string, std::string_view>> entries = {{"archive/data.pkl", pickle}};
  for (const auto& [key, bytes] : storages) entries.emplace_back("archive/data/" + key, bytes);
  return WriteStoredZip(entries);
}

}  // namespace linserve

#endif  // LINSERVE_TESTS_ENGINE_FORMATS_PTH_BUILDER_H_
