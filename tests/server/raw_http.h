#ifndef LINSERVE_TESTS_SERVER_RAW_HTTP_H_
#define LINSERVE_TESTS_SERVER_RAW_HTTP_H_

// A raw TCP client for the HTTP port's attack tests: it sends exactly the
// bytes it is given (no library fixes a malformed request) and reads what
// comes back until the server closes.

#include <sys/types.h>

#include <cstdint>
#include <string>

namespace linserve {

class RawConnection {
 public:
  // Connects to 127.0.0.1:`port`; reads wait at most `read_timeout_seconds`.
  explicit RawConnection(int port, int read_timeout_seconds = 60);
  ~RawConnection();
  RawConnection(const RawConnection&) = delete;
  RawConnection& operator=(const RawConnection&) = delete;

  bool connected() const { return fd_ >= 0; }
  // Sends all of `bytes`; false once the server has closed or reset.
  bool Send(const std::string& bytes);
  // No more bytes from this side (the server reads its end).
  void ShutdownWrite();
  // Everything the server sends until it closes, resets or the read times
  // out (`closed` says which).
  std::string ReadUntilClose(bool* closed = nullptr);
  // One answer: its head and its Content-Length body; "" when the server
  // closed or the read timed out first.
  std::string ReadResponse();

 private:
  int fd_ = -1;
  std::string pending_;  // read past the last answer
};

// A request of `head_lines` (each ending in CRLF) and `body` with its
// Content-Length.
std::string Request(const std::string& head_lines, const std::string& body);
// `bytes` gzip-compressed, `repeat` times over (a bomb: small on the wire,
// large inflated).
std::string GzipRepeated(const std::string& bytes, int repeat);

// The status of the first answer in `bytes` (0 when none).
int StatusOf(const std::string& bytes);
// How many answers `bytes` holds (status lines at the start of a line).
int CountResponses(const std::string& bytes);
// The process's resident memory, from /proc.
int64_t ResidentBytes(pid_t pid);

}  // namespace linserve

#endif  // LINSERVE_TESTS_SERVER_RAW_HTTP_H_
