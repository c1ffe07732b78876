#ifndef LINSERVE_ENGINE_ZIP_WRITER_H_
#define LINSERVE_ENGINE_ZIP_WRITER_H_

// Writes a zip archive of stored (uncompressed) entries in the layout
// PyTorch's archive writer uses: each entry's data aligned by padding its
// local header's extra field, CRC-32s filled in, and zip64 end records
// always present. What engine/formats/zip_directory.h reads; used by pth_writer.h
// and by tests that need archives with contents of their own.

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace linserve {

struct ZipWriteOptions {
  // Each entry's data starts at a multiple of this (torch.save: 64).
  uint64_t alignment = 64;
  // Describes every entry in zip64 extra fields and defers the end record
  // to the zip64 one, as an archive past 4 GiB needs, so that this path can
  // be tested with small archives.
  bool force_zip64 = false;
};

// Entries (name, data) in the order given. Names must be unique and shorter
// than 64 KiB.
std::string WriteStoredZip(const std::vector<std::pair<std::string, std::string_view>>& entries,
                           const ZipWriteOptions& options = {});

}  // namespace linserve

#endif  // LINSERVE_ENGINE_ZIP_WRITER_H_
