#ifndef LINSERVE_CLIENT_CONNECTION_H_
#define LINSERVE_CLIENT_CONNECTION_H_

#include <memory>
#include <string>

#include <grpcpp/grpcpp.h>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace linserve {

// How the client reaches a server.
struct ConnectionOptions {
  std::string server = "localhost:50051";
  bool tls = false;
  std::string ca_cert_file;      // PEM roots; empty: the system's
  std::string client_cert_file;  // mTLS, with client_key_file
  std::string client_key_file;
  std::string token;  // sent as "authorization: Bearer <token>"
  absl::Duration timeout = absl::Seconds(600);  // per call
};

absl::StatusOr<std::shared_ptr<grpc::Channel>> Connect(const ConnectionOptions& options);

// Deadline and credentials of one call; `session_id` also goes in the
// x-session-id header, which a router can hash to keep a session on one
// replica.
void PrepareCall(const ConnectionOptions& options, const std::string& session_id,
                 grpc::ClientContext& context);

// "UNAVAILABLE", "RESOURCE_EXHAUSTED", ...
std::string StatusCodeName(grpc::StatusCode code);

}  // namespace linserve

#endif  // LINSERVE_CLIENT_CONNECTION_H_
