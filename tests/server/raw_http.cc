#include "tests/server/raw_http.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>
#include <zlib.h>

#include <fstream>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "tests/server/server_process.h"

namespace linserve {

RawConnection::RawConnection(int port, int read_timeout_seconds) {
  fd_ = ConnectLoopback(port);
  if (fd_ < 0) return;
  timeval timeout{read_timeout_seconds, 0};
  setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof(timeout));
}

RawConnection::~RawConnection() {
  if (fd_ >= 0) close(fd_);
}

bool RawConnection::Send(const std::string& bytes) {
  size_t sent = 0;
  while (sent < bytes.size()) {
    const ssize_t n = send(fd_, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) return false;
    sent += static_cast<size_t>(n);
  }
  return true;
}

void RawConnection::ShutdownWrite() { shutdown(fd_, SHUT_WR); }

std::string RawConnection::ReadUntilClose(bool* closed) {
  std::string bytes = std::move(pending_);
  pending_.clear();
  char buffer[16384];
  ssize_t n;
  while ((n = recv(fd_, buffer, sizeof(buffer), 0)) > 0) bytes.append(buffer, n);
  if (closed != nullptr) *closed = n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK);
  return bytes;
}

std::string RawConnection::ReadResponse() {
  char buffer[16384];
  size_t head_end;
  while ((head_end = pending_.find("\r\n\r\n")) == std::string::npos) {
    const ssize_t n = recv(fd_, buffer, sizeof(buffer), 0);
    if (n <= 0) return "";
    pending_.append(buffer, n);
  }
  size_t length = 0;
  for (absl::string_view line : absl::StrSplit(pending_.substr(0, head_end), "\r\n")) {
    if (absl::StartsWithIgnoreCase(line, "content-length:")) {
      (void)absl::SimpleAtoi(absl::StripAsciiWhitespace(line.substr(15)), &length);
    }
  }
  const size_t total = head_end + 4 + length;
  while (pending_.size() < total) {
    const ssize_t n = recv(fd_, buffer, sizeof(buffer), 0);
    if (n <= 0) return "";
    pending_.append(buffer, n);
  }
  std::string response = pending_.substr(0, total);
  pending_.erase(0, total);
  return response;
}

std::string Request(const std::string& head_lines, const std::string& body) {
  return absl::StrCat(head_lines, "Content-Length: ", body.size(), "\r\n\r\n", body);
}

std::string GzipRepeated(const std::string& bytes, int repeat) {
  z_stream z{};
  deflateInit2(&z, 9, Z_DEFLATED, 15 + 16, 9, Z_DEFAULT_STRATEGY);  // 15 + 16: gzip framing
  std::string out;
  char buffer[1 << 16];
  for (int i = 0; i < repeat; ++i) {
    z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes.data()));
    z.avail_in = static_cast<uInt>(bytes.size());
    const int flush = i + 1 == repeat ? Z_FINISH : Z_NO_FLUSH;
    int result;
    do {
      z.next_out = reinterpret_cast<Bytef*>(buffer);
      z.avail_out = sizeof(buffer);
      result = deflate(&z, flush);
      out.append(buffer, sizeof(buffer) - z.avail_out);
    } while (z.avail_out == 0 || (flush == Z_FINISH && result != Z_STREAM_END));
  }
  deflateEnd(&z);
  return out;
}

int StatusOf(const std::string& bytes) {
  int status = 0;
  if (!absl::StartsWith(bytes, "HTTP/1.") || bytes.size() < 12) return 0;
  return absl::SimpleAtoi(bytes.substr(9, 3), &status) ? status : 0;
}

int CountResponses(const std::string& bytes) {
  int count = absl::StartsWith(bytes, "HTTP/1.") ? 1 : 0;
  for (size_t at = bytes.find("\nHTTP/1."); at != std::string::npos;
       at = bytes.find("\nHTTP/1.", at + 1)) {
    ++count;
  }
  return count;
}

int64_t ResidentBytes(pid_t pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(status, line)) {
    if (!absl::StartsWith(line, "VmRSS:")) continue;
    int64_t kib = 0;
    const absl::string_view value =
        absl::StripSuffix(absl::StripAsciiWhitespace(absl::string_view(line).substr(6)), "kB");
    if (absl::SimpleAtoi(absl::StripAsciiWhitespace(value), &kib)) return kib * 1024;
  }
  return -1;
}

}  // namespace linserve
