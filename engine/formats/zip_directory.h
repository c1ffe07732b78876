#ifndef LINSERVE_ENGINE_ZIP_DIRECTORY_H_
#define LINSERVE_ENGINE_ZIP_DIRECTORY_H_

// The directory of a zip archive whose entries are stored uncompressed, as
// PyTorch's torch.save writes them (and as any reader of its checkpoints
// needs them: a tensor's bytes are used where they lie). Zip64 is supported,
// since published checkpoints pass 4 GiB; compression, encryption and
// multi-disk archives are refused.
//
// Built for hostile input. Every offset and size the archive declares is
// checked against the file's size before anything is allocated or read, and
// each entry (local header and data) must lie before the central directory
// and overlap no other, so the entries' data together never exceed the file.
// Errors are DataLoss naming the byte offset of what is wrong, e.g.
//   truncated: the central directory at byte 3441011 (28271 bytes) runs past
//   the end records at byte 3440935
// CRC-32s are not checked (LibTorch does not check them either); a reader
// finds corruption by the structure it breaks.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/formats/byte_source.h"

namespace linserve {

struct ZipEntry {
  std::string name;
  uint64_t header_offset = 0;  // Of the entry's local header.
  uint64_t data_offset = 0;    // Of its first byte of data.
  uint64_t size = 0;           // Bytes of data (stored: compressed = uncompressed).
};

// The entries in central-directory order, each name unique. Messages carry
// no prefix, so callers can say which format the archive was meant to be.
// Thread-safe.
absl::StatusOr<std::vector<ZipEntry>> ReadZipDirectory(const ByteSource& source);

}  // namespace linserve

#endif  // LINSERVE_ENGINE_ZIP_DIRECTORY_H_
