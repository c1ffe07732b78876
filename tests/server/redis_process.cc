#include "tests/server/redis_process.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

extern char** environ;

namespace linserve {
namespace {

constexpr char kRedisServer[] = "/usr/bin/redis-server";

int FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address));
  socklen_t length = sizeof(address);
  getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
  close(fd);
  return ntohs(address.sin_port);
}

bool Answers(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const bool up = connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0;
  close(fd);
  return up;
}

}  // namespace

bool RedisProcess::Available() { return access(kRedisServer, X_OK) == 0; }

absl::StatusOr<std::unique_ptr<RedisProcess>> RedisProcess::Start(std::vector<std::string> extra,
                                                                  int port) {
  auto redis = std::unique_ptr<RedisProcess>(new RedisProcess());
  redis->port_ = port > 0 ? port : FreePort();
  std::vector<std::string> args = {kRedisServer, "--port", std::to_string(redis->port_),
                                   "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                                   "--loglevel", "warning"};
  args.insert(args.end(), extra.begin(), extra.end());
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  if (posix_spawn(&redis->pid_, kRedisServer, nullptr, nullptr, argv.data(), environ) != 0) {
    return absl::InternalError("cannot start redis-server");
  }
  for (int i = 0; i < 500; ++i) {
    if (Answers(redis->port_)) return redis;
    absl::SleepFor(absl::Milliseconds(10));
  }
  return absl::DeadlineExceededError(absl::StrCat("redis-server did not listen on ", redis->port_));
}

void RedisProcess::Kill() {
  if (pid_ <= 0) return;
  kill(pid_, SIGKILL);
  waitpid(pid_, nullptr, 0);
  pid_ = -1;
}

RedisProcess::~RedisProcess() { Kill(); }

}  // namespace linserve
