#include "server/store/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace linserve {
namespace {

absl::Status ErrnoStatus(int error, absl::string_view step, const std::string& path) {
  return absl::Status(absl::ErrnoToStatusCode(error),
                      absl::StrCat(step, " ", path, ": ", std::strerror(error)));
}

// Closes the descriptor when it goes out of scope, unless released.
class FileDescriptor {
 public:
  explicit FileDescriptor(int fd) : fd_(fd) {}
  ~FileDescriptor() {
    if (fd_ >= 0) ::close(fd_);
  }
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  int get() const { return fd_; }
  int release() { return std::exchange(fd_, -1); }

 private:
  int fd_;
};

absl::Status WriteAll(int fd, std::string_view bytes, const std::string& path) {
  while (!bytes.empty()) {
    const ssize_t n = ::write(fd, bytes.data(), bytes.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus(errno, "write", path);
    }
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  return absl::OkStatus();
}

absl::Status SyncDirectory(const std::string& dir) {
  FileDescriptor fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (fd.get() < 0) return ErrnoStatus(errno, "open directory", dir);
  if (::fsync(fd.get()) != 0) return ErrnoStatus(errno, "fsync directory", dir);
  return absl::OkStatus();
}

absl::Status WriteTemp(const std::string& temp, std::string_view bytes) {
  FileDescriptor fd(::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
  if (fd.get() < 0) return ErrnoStatus(errno, "create", temp);
  if (absl::Status s = WriteAll(fd.get(), bytes, temp); !s.ok()) return s;
  if (::fsync(fd.get()) != 0) return ErrnoStatus(errno, "fsync", temp);
  if (::close(fd.release()) != 0) return ErrnoStatus(errno, "close", temp);
  return absl::OkStatus();
}

}  // namespace

absl::Status WriteFileAtomically(const std::string& path, std::string_view bytes) {
  static std::atomic<uint64_t> counter{0};
  const std::string temp = absl::StrCat(path, kTempSuffix, ::getpid(), "-", counter++);
  absl::Status status = WriteTemp(temp, bytes);
  if (status.ok() && ::rename(temp.c_str(), path.c_str()) != 0) {
    status = ErrnoStatus(errno, "rename to", path);
  }
  if (!status.ok()) {
    ::unlink(temp.c_str());
    return status;
  }
  const std::string dir = std::filesystem::path(path).parent_path().string();
  return SyncDirectory(dir.empty() ? "." : dir);
}

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  FileDescriptor fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) return ErrnoStatus(errno, "open", path);
  std::string bytes;
  char buffer[1 << 16];
  while (true) {
    const ssize_t n = ::read(fd.get(), buffer, sizeof(buffer));
    if (n == 0) return bytes;
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus(errno, "read", path);
    }
    bytes.append(buffer, static_cast<size_t>(n));
  }
}

absl::StatusOr<int> RemoveStaleTempFiles(const std::string& dir) {
  std::error_code error;
  int removed = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir, error)) {
    if (absl::StrContains(entry.path().filename().string(), kTempSuffix) &&
        std::filesystem::remove(entry.path(), error)) {
      ++removed;
    }
  }
  if (error) return absl::InternalError(absl::StrCat("clean ", dir, ": ", error.message()));
  return removed;
}

}  // namespace linserve
