#ifndef LINSERVE_TESTS_SERVER_GATED_PROXY_H_
#define LINSERVE_TESTS_SERVER_GATED_PROXY_H_

// A TCP proxy on a free loopback port in front of a real server (Redis, in
// the tests), whose gate can hold back what clients send: while it is
// closed, every byte a client sends is kept, and the test can wait until a
// given command has arrived. Answers already on their way still flow. So a
// test can stall the store at a chosen moment and decide by events (the
// command was sent; a stream finished while it was held), not by time.

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace linserve {

class GatedProxy {
 public:
  static absl::StatusOr<std::unique_ptr<GatedProxy>> Start(int target_port);
  ~GatedProxy();

  int port() const { return port_; }
  std::string redis_url() const { return "redis://127.0.0.1:" + std::to_string(port_); }

  // From now on, what clients send is held.
  void Close();
  // Sends what was held, and everything after it.
  void Open();
  // Waits until the bytes held since the last Close contain `needle`.
  bool WaitHeld(absl::string_view needle, absl::Duration timeout);

 private:
  GatedProxy() = default;
  void AcceptLoop();
  void Relay(int client, int target);

  int listen_fd_ = -1;
  int port_ = 0;
  int target_port_ = 0;
  std::thread acceptor_;
  std::vector<std::thread> relays_;  // acceptor thread only, joined at the end

  absl::Mutex mu_;
  bool open_ ABSL_GUARDED_BY(mu_) = true;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::string held_ ABSL_GUARDED_BY(mu_);  // every connection's, in arrival order
};

}  // namespace linserve

#endif  // LINSERVE_TESTS_SERVER_GATED_PROXY_H_
