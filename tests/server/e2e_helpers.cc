#include "tests/server/e2e_helpers.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <system_error>
#include <vector>

#include <gtest/gtest.h>

#include "absl/base/thread_annotations.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "engine/transformer/transformer_model.h"
#include "tests/tiny_model.h"

namespace linserve {

absl::StatusOr<std::string> WriteTinyModel(const std::string& dir, uint64_t seed, bool add_bos) {
  ModelConfig config = TinyModelConfig();
  config.add_bos = add_bos;
  return WriteModel(dir, config, seed);
}

absl::StatusOr<std::string> WriteModel(const std::string& dir, const ModelConfig& config,
                                       uint64_t seed) {
  std::unique_ptr<TransformerModel> model = TransformerModel::Create(config, seed, torch::kCPU);
  absl::Status saved = model->Save(dir);
  if (!saved.ok()) return saved;
  return dir;
}

namespace {

// The directories FreshDir made in this process. They hold models, stores
// and logs of megabytes each, so they go when the program ends, unless a
// test failed: then they stay for a look.
absl::Mutex fresh_dirs_mutex;
std::vector<std::string>* fresh_dirs ABSL_GUARDED_BY(fresh_dirs_mutex) = nullptr;

void RemoveFreshDirs() {
  if (!::testing::UnitTest::GetInstance()->Passed()) return;
  absl::MutexLock lock(&fresh_dirs_mutex);
  for (const std::string& dir : *fresh_dirs) {
    std::error_code ignored;  // a server still writing there: nothing to do
    std::filesystem::remove_all(dir, ignored);
  }
}

}  // namespace

int SeedsForThisRun(int full) {
  const char* text = std::getenv("LINSERVE_TEST_SEEDS");
  int limit = 0;
  if (text == nullptr || !absl::SimpleAtoi(text, &limit) || limit <= 0) return full;
  return std::min(full, limit);
}

std::string FreshDir(const std::string& name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  std::filesystem::path dir = std::filesystem::path(tmp ? tmp : "/tmp") /
                              absl::StrCat("linserve-e2e-", getpid(), "-", name);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  absl::MutexLock lock(&fresh_dirs_mutex);
  if (fresh_dirs == nullptr) {
    fresh_dirs = new std::vector<std::string>;
    std::atexit(RemoveFreshDirs);
  }
  fresh_dirs->push_back(dir.string());
  return dir.string();
}

std::string DefaultModelDir() { return std::string(LINSERVE_SOURCE_DIR) + "/models/default"; }

HeldModel HoldModel(const std::string& model_dir, const std::string& name) {
  HeldModel held{FreshDir(name), ""};
  std::filesystem::copy_file(model_dir + "/model.safetensors", held.dir + "/model.safetensors");
  std::ifstream in(model_dir + "/config.json");
  std::stringstream config;
  config << in.rdbuf();
  held.config = config.str();
  EXPECT_EQ(mkfifo((held.dir + "/config.json").c_str(), 0600), 0);
  return held;
}

void ReleaseModel(const HeldModel& held) {
  std::ofstream out(held.dir + "/config.json");  // opens once the server reads
  out << held.config;
}

v1::GenerateRequest MakeRequest(const std::string& prompt, const std::string& session_id,
                                int32_t max_new_tokens, uint64_t seed, float temperature) {
  v1::GenerateRequest request;
  request.set_prompt(prompt);
  request.set_session_id(session_id);
  request.set_max_new_tokens(max_new_tokens);
  if (seed != 0) request.mutable_sampling()->set_seed(seed);
  request.mutable_sampling()->set_temperature(temperature);
  request.set_ignore_eos(true);
  return request;
}

std::unique_ptr<v1::Linserve::Stub> NarrowWindowStub(const std::string& address) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  args.SetInt(GRPC_ARG_HTTP2_BDP_PROBE, 0);
  args.SetInt(GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES, 1024);
  return v1::Linserve::NewStub(
      grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args));
}

GenerateOutcome RunGenerate(v1::Linserve::Stub& stub, const v1::GenerateRequest& request,
                            absl::Duration deadline) {
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + deadline));
  // As linserve-client does: a router's affinity hash reads it.
  if (!request.session_id().empty()) context.AddMetadata("x-session-id", request.session_id());
  std::unique_ptr<grpc::ClientReader<v1::GenerateResponse>> reader =
      stub.Generate(&context, request);
  GenerateOutcome outcome;
  v1::GenerateResponse response;
  while (reader->Read(&response)) {
    outcome.text += response.text();
    if (response.has_finished()) {
      outcome.finished = response.finished();
      outcome.has_finished = true;
    }
    outcome.messages.push_back(response);
  }
  outcome.status = reader->Finish();
  return outcome;
}

int SessionCount(v1::Linserve::Stub& stub) {
  grpc::ClientContext context;
  v1::ListSessionsRequest request;
  request.set_page_size(1000);
  v1::ListSessionsResponse response;
  EXPECT_TRUE(stub.ListSessions(&context, request, &response).ok());
  return response.sessions_size();
}

v1::Session GetSession(v1::Linserve::Stub& stub, const std::string& id) {
  grpc::ClientContext context;
  v1::GetSessionRequest request;
  request.set_session_id(id);
  v1::Session session;
  EXPECT_TRUE(stub.GetSession(&context, request, &session).ok());
  return session;
}

absl::StatusOr<v1::Session> CreateSession(v1::Linserve::Stub& stub, const std::string& prompt,
                                          const std::string& cache_salt) {
  grpc::ClientContext context;
  v1::CreateSessionRequest request;
  request.set_prompt(prompt);
  request.set_cache_salt(cache_salt);
  v1::Session session;
  grpc::Status status = stub.CreateSession(&context, request, &session);
  if (!status.ok()) {
    return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                        status.error_message());
  }
  return session;
}

absl::StatusOr<std::string> ExportSession(v1::Linserve::Stub& stub, const std::string& id) {
  grpc::ClientContext context;
  v1::ExportSessionRequest request;
  request.set_session_id(id);
  auto reader = stub.ExportSession(&context, request);
  std::string file;
  v1::StateChunk chunk;
  while (reader->Read(&chunk)) file += chunk.data();
  grpc::Status status = reader->Finish();
  if (!status.ok()) {
    return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                        status.error_message());
  }
  return file;
}

grpc::Status ImportSession(v1::Linserve::Stub& stub, const std::string& file,
                           v1::Session* session, size_t chunk_bytes) {
  grpc::ClientContext context;
  auto writer = stub.ImportSession(&context, session);
  for (size_t offset = 0; offset < file.size(); offset += chunk_bytes) {
    v1::StateChunk chunk;
    chunk.set_data(file.substr(offset, chunk_bytes));
    if (!writer->Write(chunk)) break;
  }
  writer->WritesDone();
  return writer->Finish();
}

}  // namespace linserve
