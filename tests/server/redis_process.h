#ifndef LINSERVE_TESTS_SERVER_REDIS_PROCESS_H_
#define LINSERVE_TESTS_SERVER_REDIS_PROCESS_H_

// A real redis-server on a free loopback port, for the tests of the Redis
// store. Tests skip when Debian's redis-server is not installed.

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace linserve {

class RedisProcess {
 public:
  static bool Available();
  // `extra` are more redis-server arguments (e.g. "--maxmemory", "1mb").
  static absl::StatusOr<std::unique_ptr<RedisProcess>> Start(std::vector<std::string> extra = {},
                                                             int port = 0);
  ~RedisProcess();

  int port() const { return port_; }
  std::string url() const { return "redis://127.0.0.1:" + std::to_string(port_); }
  void Kill();

 private:
  pid_t pid_ = -1;
  int port_ = 0;
};

}  // namespace linserve

#endif  // LINSERVE_TESTS_SERVER_REDIS_PROCESS_H_
