#include "client/commands.h"

#include <cstdio>
#include <fstream>
#include <memory>

#include "absl/strings/str_format.h"
#include "client/command_support.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "linserve/v1/linserve.grpc.pb.h"

namespace linserve {
namespace {

const char* ReasonName(v1::FinishReason reason) {
  switch (reason) {
    case v1::FINISH_REASON_LENGTH:
      return "length";
    case v1::FINISH_REASON_STOP:
      return "stop";
    case v1::FINISH_REASON_EOS:
      return "eos";
    case v1::FINISH_REASON_CANCELLED:
      return "cancelled";
    default:
      return "unspecified";
  }
}

}  // namespace

int GenerateCommand(const ConnectionOptions& connection, const v1::GenerateRequest& request) {
  auto stub = StubOrNull(connection);
  if (!stub) return 1;
  grpc::ClientContext context;
  PrepareCall(connection, request.session_id(), context);
  auto reader = stub->Generate(&context, request);
  v1::GenerateResponse response;
  v1::Finished finished;
  bool has_finished = false;
  while (reader->Read(&response)) {
    if (!response.text().empty()) {
      std::fwrite(response.text().data(), 1, response.text().size(), stdout);
      std::fflush(stdout);
    }
    for (const v1::SampledToken& token : response.tokens()) {
      std::string line = absl::StrFormat("[token %d logprob %.4f", token.token().token(),
                                         token.token().logprob());
      for (const v1::TokenLogprob& alt : token.top()) {
        absl::StrAppendFormat(&line, " | %d %.4f", alt.token(), alt.logprob());
      }
      std::fprintf(stderr, "%s]\n", line.c_str());
    }
    if (response.has_finished()) {
      finished = response.finished();
      has_finished = true;
    }
  }
  const grpc::Status status = reader->Finish();
  if (!status.ok()) return Failed(status);
  if (has_finished) {
    std::fprintf(stderr,
                 "\n[finished: %s; prompt %d tokens, generated %d; queue %.1f ms, prefill %.1f ms, "
                 "decode %.1f ms; position %lld; seed %llu]\n",
                 ReasonName(finished.reason()), finished.usage().prompt_tokens(),
                 finished.usage().generated_tokens(), finished.timing().queue_ms(),
                 finished.timing().prefill_ms(), finished.timing().decode_ms(),
                 static_cast<long long>(finished.position()),
                 static_cast<unsigned long long>(finished.seed()));
  }
  return 0;
}

int SessionCommand(const ConnectionOptions& connection, const std::vector<std::string>& args,
                   const std::string& prompt, const std::string& initial_state, int32_t page_size,
                   const std::string& file) {
  const std::string usage =
      "linserve-client session create [--prompt=TEXT] [--initial_state=NAME] | get ID | "
      "list [--page_size=N] | delete ID | fork ID | export ID [--file=PATH] | "
      "import [--file=PATH]";
  if (args.empty()) return Usage(usage);
  const std::string& verb = args[0];
  const bool needs_id = verb == "get" || verb == "delete" || verb == "fork" || verb == "export";
  if (needs_id && args.size() != 2) return Usage(usage);
  const std::string id = needs_id ? args[1] : "";
  auto stub = StubOrNull(connection);
  if (!stub) return 1;
  grpc::ClientContext context;
  PrepareCall(connection, id, context);
  v1::Session session;
  grpc::Status status;
  if (verb == "create") {
    v1::CreateSessionRequest request;
    request.set_prompt(prompt);
    request.set_initial_state(initial_state);
    status = stub->CreateSession(&context, request, &session);
  } else if (verb == "get") {
    v1::GetSessionRequest request;
    request.set_session_id(id);
    status = stub->GetSession(&context, request, &session);
  } else if (verb == "fork") {
    v1::ForkSessionRequest request;
    request.set_session_id(id);
    status = stub->ForkSession(&context, request, &session);
  } else if (verb == "delete") {
    v1::DeleteSessionRequest request;
    request.set_session_id(id);
    v1::DeleteSessionResponse response;
    status = stub->DeleteSession(&context, request, &response);
    if (status.ok()) std::printf("deleted %s\n", id.c_str());
    return status.ok() ? 0 : Failed(status);
  } else if (verb == "list") {
    // Every page, one JSON object per session.
    std::string token;
    do {
      grpc::ClientContext page_context;
      PrepareCall(connection, "", page_context);
      v1::ListSessionsRequest request;
      request.set_page_size(page_size);
      request.set_page_token(token);
      v1::ListSessionsResponse response;
      status = stub->ListSessions(&page_context, request, &response);
      if (!status.ok()) return Failed(status);
      for (const v1::Session& s : response.sessions()) PrintJson(s);
      token = response.next_page_token();
    } while (!token.empty());
    return 0;
  } else if (verb == "export") {
    v1::ExportSessionRequest request;
    request.set_session_id(id);
    auto reader = stub->ExportSession(&context, request);
    std::string bytes;
    v1::StateChunk chunk;
    while (reader->Read(&chunk)) bytes += chunk.data();
    status = reader->Finish();
    if (!status.ok()) return Failed(status);
    if (file.empty() || file == "-") {
      std::fwrite(bytes.data(), 1, bytes.size(), stdout);
    } else {
      std::ofstream out(file, std::ios::binary);
      out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
      if (!out) return Failed(grpc::Status(grpc::StatusCode::INTERNAL, "cannot write " + file));
      std::fprintf(stderr, "wrote %zu bytes to %s\n", bytes.size(), file.c_str());
    }
    return 0;
  } else if (verb == "import") {
    absl::StatusOr<std::string> input = ReadInput(file);
    if (!input.ok()) {
      return Failed(
          grpc::Status(grpc::StatusCode::NOT_FOUND, std::string(input.status().message())));
    }
    const std::string& bytes = *input;
    auto writer = stub->ImportSession(&context, &session);
    constexpr size_t kChunk = 64 << 10;  // the server's default chunk limit
    for (size_t offset = 0; offset < bytes.size(); offset += kChunk) {
      v1::StateChunk chunk;
      chunk.set_data(bytes.substr(offset, kChunk));
      if (!writer->Write(chunk)) break;
    }
    writer->WritesDone();
    status = writer->Finish();
  } else {
    return Usage(usage);
  }
  if (!status.ok()) return Failed(status);
  PrintJson(session);
  return 0;
}

int ModelCommand(const ConnectionOptions& connection) {
  auto stub = StubOrNull(connection);
  if (!stub) return 1;
  grpc::ClientContext context;
  PrepareCall(connection, "", context);
  v1::ModelInfo info;
  const grpc::Status status = stub->GetModelInfo(&context, v1::GetModelInfoRequest(), &info);
  if (!status.ok()) return Failed(status);
  PrintJson(info);
  return 0;
}

int HealthCommand(const ConnectionOptions& connection, const std::string& service) {
  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel = Connect(connection);
  if (!channel.ok()) {
    std::fprintf(stderr, "error: %s\n", channel.status().ToString().c_str());
    return 1;
  }
  auto stub = grpc::health::v1::Health::NewStub(*channel);
  grpc::ClientContext context;
  PrepareCall(connection, "", context);
  grpc::health::v1::HealthCheckRequest request;
  request.set_service(service);
  grpc::health::v1::HealthCheckResponse response;
  const grpc::Status status = stub->Check(&context, request, &response);
  if (!status.ok()) return Failed(status);
  std::printf("%s\n",
              grpc::health::v1::HealthCheckResponse::ServingStatus_Name(response.status()).c_str());
  return response.status() == grpc::health::v1::HealthCheckResponse::SERVING ? 0 : 1;
}

}  // namespace linserve
