#include "engine/formats/zip_writer.h"

#include <algorithm>
#include <array>

namespace linserve {
namespace {

constexpr uint16_t kPaddingExtraId = 0x4246;  // "FB", the id torch's writer pads with.
constexpr uint16_t kZip64ExtraId = 0x0001;

void PutLe(std::string* out, uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) out->push_back(static_cast<char>(value >> (8 * i)));
}

uint32_t Crc32(std::string_view bytes) {
  static const std::array<uint32_t, 256> table = [] {
    std::array<uint32_t, 256> t{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xedb88320u ^ (c >> 1) : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  uint32_t crc = 0xffffffffu;
  for (char ch : bytes) crc = table[(crc ^ static_cast<uint8_t>(ch)) & 0xff] ^ (crc >> 8);
  return crc ^ 0xffffffffu;
}

class ZipWriter {
 public:
  explicit ZipWriter(const ZipWriteOptions& options) : options_(options) {}

  void Add(std::string_view name, std::string_view data) {
    const uint64_t header_at = out_.size();
    const bool zip64 = options_.force_zip64 || data.size() >= 0xffffffff || header_at >= 0xffffffff;
    const uint32_t crc = Crc32(data);
    std::string extra;
    if (zip64) {
      PutLe(&extra, kZip64ExtraId, 2);
      PutLe(&extra, 16, 2);
      PutLe(&extra, data.size(), 8);
      PutLe(&extra, data.size(), 8);
    }
    // Pads so that the data starts on the alignment, as torch.save does.
    const uint64_t unpadded = header_at + 30 + name.size() + extra.size() + 4;
    const uint64_t alignment = std::max<uint64_t>(options_.alignment, 1);
    const uint64_t padding = (alignment - unpadded % alignment) % alignment;
    PutLe(&extra, kPaddingExtraId, 2);
    PutLe(&extra, padding, 2);
    extra.append(padding, 'Z');

    PutLe(&out_, 0x04034b50, 4);
    PutLe(&out_, zip64 ? 45 : 20, 2);  // Version needed.
    PutLe(&out_, 1 << 11, 2);          // Names are UTF-8.
    PutLe(&out_, 0, 2);                // Stored.
    PutLe(&out_, 0, 4);                // Time and date.
    PutLe(&out_, crc, 4);
    PutLe(&out_, zip64 ? 0xffffffff : data.size(), 4);
    PutLe(&out_, zip64 ? 0xffffffff : data.size(), 4);
    PutLe(&out_, name.size(), 2);
    PutLe(&out_, extra.size(), 2);
    out_.append(name);
    out_.append(extra);
    out_.append(data);
    central_.push_back({std::string(name), header_at, data.size(), crc, zip64});
  }

  std::string Finish() && {
    const uint64_t cd_at = out_.size();
    for (const Entry& e : central_) {
      std::string extra;
      if (e.zip64) {
        PutLe(&extra, kZip64ExtraId, 2);
        PutLe(&extra, 24, 2);
        PutLe(&extra, e.size, 8);
        PutLe(&extra, e.size, 8);
        PutLe(&extra, e.header_at, 8);
      }
      PutLe(&out_, 0x02014b50, 4);
      PutLe(&out_, 45, 2);  // Version made by.
      PutLe(&out_, e.zip64 ? 45 : 20, 2);
      PutLe(&out_, 1 << 11, 2);
      PutLe(&out_, 0, 2);
      PutLe(&out_, 0, 4);
      PutLe(&out_, e.crc, 4);
      PutLe(&out_, e.zip64 ? 0xffffffff : e.size, 4);
      PutLe(&out_, e.zip64 ? 0xffffffff : e.size, 4);
      PutLe(&out_, e.name.size(), 2);
      PutLe(&out_, extra.size(), 2);
      PutLe(&out_, 0, 2);  // Comment.
      PutLe(&out_, 0, 2);  // Disk.
      PutLe(&out_, 0, 2);  // Internal attributes.
      PutLe(&out_, 0, 4);  // External attributes.
      PutLe(&out_, e.zip64 ? 0xffffffff : e.header_at, 4);
      out_.append(e.name);
      out_.append(extra);
    }
    const uint64_t cd_size = out_.size() - cd_at;
    const uint64_t zip64_end_at = out_.size();
    PutLe(&out_, 0x06064b50, 4);
    PutLe(&out_, 44, 8);  // Bytes after this field.
    PutLe(&out_, 45, 2);
    PutLe(&out_, 45, 2);
    PutLe(&out_, 0, 4);
    PutLe(&out_, 0, 4);
    PutLe(&out_, central_.size(), 8);
    PutLe(&out_, central_.size(), 8);
    PutLe(&out_, cd_size, 8);
    PutLe(&out_, cd_at, 8);
    PutLe(&out_, 0x07064b50, 4);  // Locator.
    PutLe(&out_, 0, 4);
    PutLe(&out_, zip64_end_at, 8);
    PutLe(&out_, 1, 4);
    const bool small = !options_.force_zip64 && central_.size() < 0xffff && cd_size < 0xffffffff &&
                       cd_at < 0xffffffff;
    PutLe(&out_, 0x06054b50, 4);
    PutLe(&out_, 0, 4);  // Disks.
    PutLe(&out_, small ? central_.size() : 0xffff, 2);
    PutLe(&out_, small ? central_.size() : 0xffff, 2);
    PutLe(&out_, small ? cd_size : 0xffffffff, 4);
    PutLe(&out_, small ? cd_at : 0xffffffff, 4);
    PutLe(&out_, 0, 2);  // Comment.
    return std::move(out_);
  }

 private:
  struct Entry {
    std::string name;
    uint64_t header_at;
    uint64_t size;
    uint32_t crc;
    bool zip64;
  };
  const ZipWriteOptions options_;
  std::string out_;
  std::vector<Entry> central_;
};

}  // namespace

std::string WriteStoredZip(const std::vector<std::pair<std::string, std::string_view>>& entries,
                           const ZipWriteOptions& options) {
  ZipWriter zip(options);
  for (const auto& [name, data] : entries) zip.Add(name, data);
  return std::move(zip).Finish();
}

}  // namespace linserve
