#ifndef LINSERVE_CLIENT_COMMAND_SUPPORT_H_
#define LINSERVE_CLIENT_COMMAND_SUPPORT_H_

// What the one-shot commands share: the stub, the exit codes and their
// messages, JSON output, files in and out.

#include <memory>
#include <string>

#include <google/protobuf/message.h>

#include "absl/status/statusor.h"
#include "client/connection.h"
#include "linserve/v1/linserve.grpc.pb.h"

namespace linserve {

// Prints the status on stderr; returns 1.
int Failed(const grpc::Status& status);
// Prints the usage on stderr; returns 2.
int Usage(const std::string& message);
// The message as one line of JSON on stdout (proto field names, defaults shown).
void PrintJson(const google::protobuf::Message& message);
// A stub on a new channel, or null (the error printed).
std::unique_ptr<v1::Linserve::Stub> StubOrNull(const ConnectionOptions& connection);
// The bytes of `file` ("-" or "": stdin).
absl::StatusOr<std::string> ReadInput(const std::string& file);

}  // namespace linserve

#endif  // LINSERVE_CLIENT_COMMAND_SUPPORT_H_
