#ifndef LINSERVE_TESTS_SERVER_SERVER_PROCESS_H_
#define LINSERVE_TESTS_SERVER_SERVER_PROCESS_H_

// A real `linserve` process on loopback for the end-to-end tests, with a
// real gRPC client: what a user would run, nothing faked.

#include <sys/types.h>

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "linserve/v1/linserve.grpc.pb.h"

namespace linserve {

class ServerProcess {
 public:
  // Starts the binary with `flags` (plus --listen on a free loopback port,
  // --metrics_port=0 and --warmup_steps=0) and waits until its log has the event `wait_for`
  // ("serving": the model is loaded; "listening": the ports are open).
  static absl::StatusOr<std::unique_ptr<ServerProcess>> Start(
      std::vector<std::string> flags, absl::Duration timeout = absl::Seconds(120),
      const std::string& wait_for = "serving");
  // SIGKILL if it is still running.
  ~ServerProcess();

  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  int port() const { return port_; }
  int metrics_port() const { return metrics_port_; }
  // The HTTP API's port (0: the test turned it off).
  int http_port() const { return http_port_; }
  int health_port() const { return health_port_; }  // 0 without --health_listen
  pid_t pid() const { return pid_; }

  std::unique_ptr<v1::Linserve::Stub> Stub() const;
  std::shared_ptr<grpc::Channel> channel() const { return channel_; }

  void Signal(int signal);
  // The exit code, or 128 + signal. A sanitizer report in the server's
  // output (sanitized builds) adds a test failure.
  int Wait();
  // Every log line so far.
  std::vector<std::string> Log() const;
  // Blocks until a log line contains `text` (true) or the timeout passes.
  bool WaitForLog(const std::string& text, absl::Duration timeout) const;

 private:
  ServerProcess() = default;
  void ReadLog(int fd);

  pid_t pid_ = -1;
  int port_ = 0;
  int metrics_port_ = 0;
  int http_port_ = 0;
  int health_port_ = 0;
  bool exited_ = false;
  int exit_code_ = 0;
  std::shared_ptr<grpc::Channel> channel_;
  mutable absl::Mutex mu_;
  std::vector<std::string> log_ ABSL_GUARDED_BY(mu_);
  std::thread reader_;
};

// Path of the built `linserve` and `linserve-client` binaries.
std::string LinserveBinary();
std::string ClientBinary();

struct ProcessResult {
  int exit_code = -1;  // or 128 + signal
  std::string out;
  std::string err;
};

// Runs a program to the end with `input` on its stdin. A sanitizer report in
// its stderr (sanitized builds) adds a test failure.
ProcessResult RunProcess(const std::vector<std::string>& args, const std::string& input = "");

// The report of ASan, LSan, TSan or UBSan in a process's output, from its
// first line on; empty when there is none.
std::string SanitizerReport(const std::string& output);

// GET /metrics on loopback; the body.
absl::StatusOr<std::string> ScrapeMetrics(int port);
// A TCP connection to 127.0.0.1:`port`: the socket, or -1.
int ConnectLoopback(int port);
// GET `path` (with its query) from 127.0.0.1:`port`; the body of a 200.
absl::StatusOr<std::string> HttpGet(int port, const std::string& path);
// The value of one series ("name{labels}" exactly as exposed, or a bare
// name); 0 when absent.
double MetricValue(const std::string& metrics, const std::string& series);

}  // namespace linserve

#endif  // LINSERVE_TESTS_SERVER_SERVER_PROCESS_H_
