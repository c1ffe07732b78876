#ifndef LINSERVE_ENGINE_BYTE_SOURCE_H_
#define LINSERVE_ENGINE_BYTE_SOURCE_H_

// Random access to the bytes of a file or of a buffer, so that one parser
// serves both: checkpoints are read from disk piece by piece (each tensor's
// bytes land straight in the tensor, never held twice) and from memory in
// tests and fuzzing.

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace linserve {

class ByteSource {
 public:
  virtual ~ByteSource() = default;

  // The size when the source was opened.
  virtual uint64_t size() const = 0;

  // Copies bytes [offset, offset + n) into `out`. Precondition: the range is
  // inside [0, size()). A file that shrank since it was opened is DataLoss
  // ("truncated"); a failing read is errno-derived. Thread-safe.
  virtual absl::Status Read(uint64_t offset, size_t n, char* out) const = 0;

  // Bytes [offset, offset + n) as a string.
  absl::StatusOr<std::string> ReadString(uint64_t offset, size_t n) const;
};

// A view of caller-owned memory, which must outlive the source.
std::unique_ptr<ByteSource> MemoryByteSource(std::string_view bytes);

// `path` opened read-only (close-on-exec), with its size, where it is a
// regular file; the caller closes `fd`. Errors name the path.
struct OpenedFile {
  int fd = -1;
  uint64_t size = 0;
};
absl::StatusOr<OpenedFile> OpenRegularFile(const std::string& path);

// An open file read with pread; `path` appears in messages.
absl::StatusOr<std::unique_ptr<ByteSource>> OpenFileByteSource(const std::string& path);

}  // namespace linserve

#endif  // LINSERVE_ENGINE_BYTE_SOURCE_H_
