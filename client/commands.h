#ifndef LINSERVE_CLIENT_COMMANDS_H_
#define LINSERVE_CLIENT_COMMANDS_H_

// The client's one-shot commands. Each returns the process exit code: 0 on
// success, 1 when the server said no (the status is printed on stderr), 2 for
// a usage error.

#include <string>
#include <vector>

#include "client/connection.h"
#include "linserve/v1/linserve.pb.h"

namespace linserve {

// Streams the completion to stdout as it arrives; usage and timing to stderr.
int GenerateCommand(const ConnectionOptions& connection, const v1::GenerateRequest& request);

// session create|get|list|delete|fork|export|import. `prompt` and
// `initial_state` are for create, `page_size` for list, `file` for export
// (output) and import (input); "-" is stdout/stdin.
int SessionCommand(const ConnectionOptions& connection, const std::vector<std::string>& args,
                   const std::string& prompt, const std::string& initial_state, int32_t page_size,
                   const std::string& file);

// state create NAME --prompt=TEXT | upload NAME [--file=PATH] | get NAME |
// list | delete NAME: named states (made from a prompt, or uploaded: a
// state file, an RWKV-PEFT .pth or an ai00 .state), printed as JSON.
int StateCommand(const ConnectionOptions& connection, const std::vector<std::string>& args,
                 const std::string& prompt, const std::string& file);

// The served model's info as JSON.
int ModelCommand(const ConnectionOptions& connection);

// grpc.health.v1 Check of `service` ("" = the whole server): exit 0 only when
// SERVING, so it serves as a container health probe.
int HealthCommand(const ConnectionOptions& connection, const std::string& service);

}  // namespace linserve

#endif  // LINSERVE_CLIENT_COMMANDS_H_
