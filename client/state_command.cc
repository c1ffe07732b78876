// linserve-client state: named states, made from a prompt or uploaded, got,
// listed and deleted.

#include <string>
#include <vector>

#include "client/command_support.h"
#include "client/commands.h"

namespace linserve {
namespace {

// UploadNamedState in chunks of the server's default chunk limit.
grpc::Status Upload(v1::Linserve::Stub& stub, grpc::ClientContext& context,
                    const std::string& name, const std::string& bytes, v1::NamedState* made) {
  constexpr size_t kChunk = 64 << 10;
  auto writer = stub.UploadNamedState(&context, made);
  for (size_t offset = 0; offset == 0 || offset < bytes.size(); offset += kChunk) {
    v1::NamedStateChunk chunk;
    if (offset == 0) chunk.set_name(name);
    chunk.set_data(bytes.substr(offset, kChunk));
    if (!writer->Write(chunk)) break;  // the server has answered: Finish says why
  }
  writer->WritesDone();
  return writer->Finish();
}

}  // namespace

int StateCommand(const ConnectionOptions& connection, const std::vector<std::string>& args,
                 const std::string& prompt, const std::string& file) {
  const std::string usage =
      "linserve-client state create NAME --prompt=TEXT | upload NAME [--file=PATH] | "
      "get NAME | list | delete NAME";
  if (args.empty()) return Usage(usage);
  const std::string& verb = args[0];
  if ((verb == "list") != (args.size() == 1) || args.size() > 2) return Usage(usage);
  const std::string name = args.size() == 2 ? args[1] : "";
  auto stub = StubOrNull(connection);
  if (!stub) return 1;
  grpc::ClientContext context;
  PrepareCall(connection, "", context);
  v1::NamedState state;
  grpc::Status status;
  if (verb == "create") {
    v1::CreateNamedStateRequest request;
    request.set_name(name);
    request.set_prompt(prompt);
    status = stub->CreateNamedState(&context, request, &state);
  } else if (verb == "upload") {
    absl::StatusOr<std::string> bytes = ReadInput(file);
    if (!bytes.ok()) {
      return Failed(
          grpc::Status(grpc::StatusCode::NOT_FOUND, std::string(bytes.status().message())));
    }
    status = Upload(*stub, context, name, *bytes, &state);
  } else if (verb == "get") {
    v1::GetNamedStateRequest request;
    request.set_name(name);
    status = stub->GetNamedState(&context, request, &state);
  } else if (verb == "list") {
    v1::ListNamedStatesResponse response;
    status = stub->ListNamedStates(&context, v1::ListNamedStatesRequest(), &response);
    if (!status.ok()) return Failed(status);
    for (const v1::NamedState& s : response.states()) PrintJson(s);
    return 0;
  } else if (verb == "delete") {
    v1::DeleteNamedStateRequest request;
    request.set_name(name);
    v1::DeleteNamedStateResponse response;
    status = stub->DeleteNamedState(&context, request, &response);
    if (status.ok()) std::printf("deleted %s\n", name.c_str());
    return status.ok() ? 0 : Failed(status);
  } else {
    return Usage(usage);
  }
  if (!status.ok()) return Failed(status);
  PrintJson(state);
  return 0;
}

}  // namespace linserve
