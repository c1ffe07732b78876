#include "tests/server/server_process.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

extern char** environ;

namespace linserve {

std::string LinserveBinary() { return LINSERVE_BINARY_PATH; }
std::string ClientBinary() { return LINSERVE_CLIENT_BINARY_PATH; }

namespace {

std::string ReadWhole(const std::string& path) {
  std::string text;
  if (FILE* f = std::fopen(path.c_str(), "rb")) {
    char buffer[4096];
    size_t n;
    while ((n = std::fread(buffer, 1, sizeof(buffer), f)) > 0) text.append(buffer, n);
    std::fclose(f);
  }
  return text;
}

}  // namespace

ProcessResult RunProcess(const std::vector<std::string>& args, const std::string& input) {
  // Files rather than pipes: nothing to drain while waiting.
  char dir_template[] = "/tmp/linserve-run-XXXXXX";
  const std::string dir = mkdtemp(dir_template);
  const std::string in_path = dir + "/in", out_path = dir + "/out", err_path = dir + "/err";
  if (FILE* f = std::fopen(in_path.c_str(), "wb")) {
    std::fwrite(input.data(), 1, input.size(), f);
    std::fclose(f);
  }
  std::vector<std::string> copy = args;
  std::vector<char*> argv;
  for (std::string& a : copy) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, in_path.c_str(), O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, out_path.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, err_path.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  pid_t pid;
  ProcessResult result;
  if (posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ) == 0) {
    int status = 0;
    waitpid(pid, &status, 0);
    result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
  posix_spawn_file_actions_destroy(&actions);
  result.out = ReadWhole(out_path);
  result.err = ReadWhole(err_path);
  const std::string report = SanitizerReport(result.err);
  if (!report.empty()) ADD_FAILURE() << args[0] << " reported:\n" << report;
  std::remove(in_path.c_str());
  std::remove(out_path.c_str());
  std::remove(err_path.c_str());
  rmdir(dir.c_str());
  return result;
}

absl::StatusOr<std::unique_ptr<ServerProcess>> ServerProcess::Start(
    std::vector<std::string> flags, absl::Duration timeout, const std::string& wait_for) {
  std::unique_ptr<ServerProcess> server(new ServerProcess());
  // Free ports everywhere (a test's own flags come later and win). No
  // warm-up: its 16 decode steps took a second of every start under a
  // sanitizer, nothing a test looks at; GenerateTest's server keeps it.
  std::vector<std::string> args = {LinserveBinary(), "--listen=127.0.0.1:0",
                                   "--http_listen=127.0.0.1:0", "--metrics_port=0",
                                   "--metrics_host=127.0.0.1", "--warmup_steps=0"};
  // LINSERVE_TEST_DEVICE=cuda runs the end-to-end suites with the server's
  // engine on that device (the GPU machine); a test's own --device wins.
  if (const char* device = std::getenv("LINSERVE_TEST_DEVICE"); device && *device) {
    args.push_back(absl::StrCat("--device=", device));
  }
  args.insert(args.end(), flags.begin(), flags.end());
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);

  int pipe_fds[2];
  if (pipe2(pipe_fds, O_CLOEXEC) != 0) return absl::InternalError("pipe failed");
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], STDERR_FILENO);
  // Not the test's stdout: a server left behind by a test that crashed
  // would hold ctest's pipe open, and ctest would wait for it until the
  // test's timeout instead of reporting the crash.
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
  const int spawned =
      posix_spawn(&server->pid_, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  close(pipe_fds[1]);
  if (spawned != 0) {
    close(pipe_fds[0]);
    return absl::InternalError(absl::StrCat("cannot start ", argv[0]));
  }
  server->reader_ = std::thread([s = server.get(), fd = pipe_fds[0]] { s->ReadLog(fd); });

  if (!server->WaitForLog(absl::StrCat("\"event\":\"", wait_for, "\""), timeout)) {
    std::string log;
    for (const std::string& line : server->Log()) log += line + "\n";
    return absl::DeadlineExceededError(absl::StrCat("the server did not start:\n", log));
  }
  for (const std::string& line : server->Log()) {
    if (!absl::StrContains(line, "\"event\":\"listening\"")) continue;
    const nlohmann::json event = nlohmann::json::parse(line);
    server->port_ = event["port"];
    server->metrics_port_ = event["metrics_port"];
    server->http_port_ = event.value("http_port", 0);
    server->health_port_ = event.value("health_port", 0);
  }
  server->channel_ = grpc::CreateChannel(server->address(), grpc::InsecureChannelCredentials());
  return server;
}

ServerProcess::~ServerProcess() {
  if (!exited_ && pid_ > 0) {
    kill(pid_, SIGKILL);
    Wait();
  }
  if (reader_.joinable()) reader_.join();
}

void ServerProcess::ReadLog(int fd) {
  FILE* in = fdopen(fd, "r");
  char* line = nullptr;
  size_t capacity = 0;
  ssize_t n;
  while ((n = getline(&line, &capacity, in)) > 0) {
    std::string text(line, static_cast<size_t>(n));
    if (!text.empty() && text.back() == '\n') text.pop_back();
    if (std::getenv("LINSERVE_TEST_SERVER_LOG")) std::fprintf(stderr, "[server] %s\n", text.c_str());
    absl::MutexLock lock(&mu_);
    log_.push_back(std::move(text));
  }
  free(line);
  fclose(in);
}

std::unique_ptr<v1::Linserve::Stub> ServerProcess::Stub() const {
  return v1::Linserve::NewStub(channel_);
}

void ServerProcess::Signal(int signal) { kill(pid_, signal); }

int ServerProcess::Wait() {
  if (exited_) return exit_code_;
  int status = 0;
  waitpid(pid_, &status, 0);
  exited_ = true;
  exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  // The process is gone, so its log ends here: read it whole, then look for
  // a sanitizer's report, which must fail the test even when the server was
  // killed before a client noticed anything.
  if (reader_.joinable()) reader_.join();
  std::string log;
  for (const std::string& line : Log()) absl::StrAppend(&log, line, "\n");
  const std::string report = SanitizerReport(log);
  if (!report.empty()) ADD_FAILURE() << "linserve (pid " << pid_ << ") reported:\n" << report;
  return exit_code_;
}

std::string SanitizerReport(const std::string& output) {
  // The first line of every report of ASan, LSan, TSan and UBSan.
  static constexpr const char* kMarkers[] = {"ERROR: AddressSanitizer", "ERROR: LeakSanitizer",
                                             "WARNING: ThreadSanitizer",
                                             "ERROR: ThreadSanitizer", ": runtime error: "};
  size_t first = std::string::npos;
  for (const char* marker : kMarkers) first = std::min(first, output.find(marker));
  if (first == std::string::npos) return "";
  const size_t line_start = output.rfind('\n', first);
  return output.substr(line_start == std::string::npos ? 0 : line_start + 1, 16000);
}

std::vector<std::string> ServerProcess::Log() const {
  absl::MutexLock lock(&mu_);
  return log_;
}

bool ServerProcess::WaitForLog(const std::string& text, absl::Duration timeout) const {
  struct Args {
    const std::vector<std::string>* log;
    const std::string* text;
  } args{&log_, &text};
  absl::MutexLock lock(&mu_);
  return mu_.AwaitWithTimeout(
      absl::Condition(
          +[](Args* a) {
            for (const std::string& line : *a->log) {
              if (absl::StrContains(line, *a->text)) return true;
            }
            return false;
          },
          &args),
      timeout);
}

absl::StatusOr<std::string> ScrapeMetrics(int port) { return HttpGet(port, "/metrics"); }

int ConnectLoopback(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, "127.0.0.1", &address.sin_addr);
  if (connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

absl::StatusOr<std::string> HttpGet(int port, const std::string& path) {
  const int fd = ConnectLoopback(port);
  if (fd < 0) return absl::UnavailableError(absl::StrCat("cannot connect to 127.0.0.1:", port));
  // HTTP/1.0: the body is not chunked and ends when the server closes.
  const std::string request =
      absl::StrCat("GET ", path, " HTTP/1.0\r\nHost: localhost\r\nConnection: close\r\n\r\n");
  send(fd, request.data(), request.size(), MSG_NOSIGNAL);
  std::string response;
  char buffer[4096];
  ssize_t n;
  while ((n = recv(fd, buffer, sizeof(buffer), 0)) > 0) response.append(buffer, n);
  close(fd);
  const size_t body = response.find("\r\n\r\n");
  if (!absl::StartsWith(response, "HTTP/1.") || response.compare(8, 5, " 200 ") != 0 ||
      body == std::string::npos) {
    return absl::InternalError(absl::StrCat("bad response to GET ", path, ": ",
                                            response.substr(0, 200)));
  }
  return response.substr(body + 4);
}

double MetricValue(const std::string& metrics, const std::string& series) {
  for (absl::string_view line : absl::StrSplit(metrics, '\n')) {
    if (!absl::StartsWith(line, series)) continue;
    const absl::string_view rest = line.substr(series.size());
    if (rest.empty() || rest[0] != ' ') continue;
    double value = 0;
    if (absl::SimpleAtod(rest.substr(1), &value)) return value;
  }
  return 0;
}

}  // namespace linserve
