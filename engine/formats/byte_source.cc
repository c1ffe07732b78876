#include "engine/formats/byte_source.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace linserve {
namespace {

class MemorySource final : public ByteSource {
 public:
  explicit MemorySource(std::string_view bytes) : bytes_(bytes) {}

  uint64_t size() const override { return bytes_.size(); }
  absl::Status Read(uint64_t offset, size_t n, char* out) const override {
    if (n != 0) std::memcpy(out, bytes_.data() + offset, n);
    return absl::OkStatus();
  }

 private:
  const std::string_view bytes_;
};

class FileSource final : public ByteSource {
 public:
  FileSource(int fd, uint64_t size, std::string path)
      : fd_(fd), size_(size), path_(std::move(path)) {}
  ~FileSource() override { close(fd_); }

  uint64_t size() const override { return size_; }
  absl::Status Read(uint64_t offset, size_t n, char* out) const override {
    while (n > 0) {
      // Linux moves at most about 2 GiB per call; larger reads loop.
      const ssize_t got = pread(fd_, out, n, static_cast<off_t>(offset));
      if (got < 0 && errno == EINTR) continue;
      if (got < 0) {
        return absl::ErrnoToStatus(errno,
                                   absl::StrCat("cannot read '", path_, "' at byte ", offset));
      }
      if (got == 0) {
        return absl::DataLossError(absl::StrCat("truncated: '", path_, "' ended at byte ", offset,
                                                " while being read (it had ", size_, " bytes)"));
      }
      out += got;
      offset += static_cast<uint64_t>(got);
      n -= static_cast<size_t>(got);
    }
    return absl::OkStatus();
  }

 private:
  const int fd_;
  const uint64_t size_;
  const std::string path_;
};

}  // namespace

absl::StatusOr<std::string> ByteSource::ReadString(uint64_t offset, size_t n) const {
  std::string out(n, '\0');
  absl::Status status = Read(offset, n, out.data());
  if (!status.ok()) return status;
  return out;
}

std::unique_ptr<ByteSource> MemoryByteSource(std::string_view bytes) {
  return std::make_unique<MemorySource>(bytes);
}

absl::StatusOr<OpenedFile> OpenRegularFile(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return absl::ErrnoToStatus(errno, absl::StrCat("cannot open '", path, "'"));
  struct stat st;
  if (fstat(fd, &st) != 0) {
    const int error = errno;
    close(fd);
    return absl::ErrnoToStatus(error, absl::StrCat("cannot stat '", path, "'"));
  }
  if (!S_ISREG(st.st_mode)) {
    close(fd);
    // A directory or device has no size to check a file's offsets against.
    return absl::FailedPreconditionError(absl::StrCat("'", path, "' is not a regular file"));
  }
  return OpenedFile{fd, static_cast<uint64_t>(st.st_size)};
}

absl::StatusOr<std::unique_ptr<ByteSource>> OpenFileByteSource(const std::string& path) {
  absl::StatusOr<OpenedFile> file = OpenRegularFile(path);
  if (!file.ok()) return file.status();
  return std::make_unique<FileSource>(file->fd, file->size, path);
}

}  // namespace linserve
