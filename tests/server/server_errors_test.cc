// End to end: every error row of the API at its boundary and one step past
// it, on a real server with small limits; busy sessions and cancellation.

#include <cmath>
#include <functional>
#include <limits>
#include <memory>
#include <string>

#include <gtest/gtest.h>

#include "tests/server/e2e_helpers.h"
#include "tests/server/server_process.h"

namespace linserve {
namespace {

class ErrorsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    model_dir_ = new std::string(*WriteTinyModel(FreshDir("errors-model"), 3));
    auto server = ServerProcess::Start(
        {"--model=" + *model_dir_, "--store_dir=" + FreshDir("errors-store"),
         "--max_prompt_bytes=64", "--max_new_tokens_cap=100000", "--default_max_new_tokens=8",
         "--max_stop_sequences=2", "--max_stop_bytes=4", "--max_top_logprobs=5",
         "--stream_buffer_messages=2", "--max_sessions=6"});
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = server->release();
  }
  static void TearDownTestSuite() {
    delete server_;
    delete model_dir_;
  }

  static std::string* model_dir_;
  static ServerProcess* server_;
};

std::string* ErrorsTest::model_dir_ = nullptr;
ServerProcess* ErrorsTest::server_ = nullptr;

struct Row {
  std::string name;
  std::function<void(v1::GenerateRequest&)> set;
  grpc::StatusCode code;
  std::string message;  // a piece the error must contain
};

TEST_F(ErrorsTest, EveryGenerateFieldAtItsBoundAndOneStepPast) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  const grpc::StatusCode ok = grpc::StatusCode::OK, bad = grpc::StatusCode::INVALID_ARGUMENT;
  auto sampling = [](auto setter) {
    return [setter](v1::GenerateRequest& r) { setter(*r.mutable_sampling()); };
  };
  const std::vector<Row> rows = {
      {"empty prompt", [](auto& r) { r.set_prompt(""); }, bad, "prompt is empty"},
      {"invalid UTF-8", [](auto& r) { r.set_prompt("ab\xff"); }, bad,
       "prompt is not valid UTF-8 (first bad byte at offset 2)"},
      {"prompt at limit", [](auto& r) { r.set_prompt(std::string(64, 'a')); }, ok, ""},
      {"prompt past limit", [](auto& r) { r.set_prompt(std::string(65, 'a')); }, bad,
       "prompt is 65 bytes; at most 64"},
      {"max_new_tokens default", [](auto& r) { r.set_max_new_tokens(0); }, ok, ""},
      {"max_new_tokens negative", [](auto& r) { r.set_max_new_tokens(-1); }, bad,
       "max_new_tokens = -1 is outside [1, 100000]"},
      {"max_new_tokens past cap", [](auto& r) { r.set_max_new_tokens(100001); }, bad,
       "max_new_tokens = 100001"},
      {"temperature at max", sampling([](auto& s) { s.set_temperature(100); }), ok, ""},
      {"temperature past max", sampling([](auto& s) { s.set_temperature(100.5f); }), bad,
       "temperature = 100.5"},
      {"temperature negative", sampling([](auto& s) { s.set_temperature(-0.1f); }), bad,
       "temperature"},
      {"temperature NaN", sampling([nan](auto& s) { s.set_temperature(nan); }), bad, "temperature"},
      {"temperature inf", sampling([inf](auto& s) { s.set_temperature(inf); }), bad, "temperature"},
      {"top_k at vocab", sampling([](auto& s) { s.set_top_k(258); }), ok, ""},
      {"top_k past vocab", sampling([](auto& s) { s.set_top_k(259); }), bad,
       "top_k = 259 is outside [0, 258]"},
      {"top_k negative", sampling([](auto& s) { s.set_top_k(-1); }), bad, "top_k = -1"},
      {"top_p at 1", sampling([](auto& s) { s.set_top_p(1); }), ok, ""},
      {"top_p zero", sampling([](auto& s) { s.set_top_p(0); }), bad, "top_p = 0"},
      {"top_p past 1", sampling([](auto& s) { s.set_top_p(1.01f); }), bad, "top_p"},
      {"min_p at 1", sampling([](auto& s) { s.set_min_p(1); }), ok, ""},
      {"min_p past 1", sampling([](auto& s) { s.set_min_p(1.01f); }), bad, "min_p"},
      {"min_p negative", sampling([](auto& s) { s.set_min_p(-0.01f); }), bad, "min_p"},
      {"repetition_penalty at max", sampling([](auto& s) { s.set_repetition_penalty(10); }), ok,
       ""},
      {"repetition_penalty past max",
       sampling([](auto& s) { s.set_repetition_penalty(10.5f); }), bad, "repetition_penalty"},
      {"repetition_penalty zero", sampling([](auto& s) { s.set_repetition_penalty(0); }), bad,
       "repetition_penalty = 0"},
      {"presence_penalty at max", sampling([](auto& s) { s.set_presence_penalty(2); }), ok, ""},
      {"presence_penalty past max", sampling([](auto& s) { s.set_presence_penalty(2.5f); }), bad,
       "presence_penalty"},
      {"frequency_penalty at min", sampling([](auto& s) { s.set_frequency_penalty(-2); }), ok,
       ""},
      {"frequency_penalty past min", sampling([](auto& s) { s.set_frequency_penalty(-2.5f); }),
       bad, "frequency_penalty"},
      {"two stops", [](auto& r) { r.add_stop("zz"); r.add_stop("yy"); }, ok, ""},
      {"three stops", [](auto& r) { r.add_stop("a"); r.add_stop("b"); r.add_stop("c"); }, bad,
       "stop has 3 sequences; at most 2"},
      {"empty stop", [](auto& r) { r.add_stop(""); }, bad, "stop[0] is empty"},
      {"stop at limit", [](auto& r) { r.add_stop("abcd"); }, ok, ""},
      {"stop past limit", [](auto& r) { r.add_stop("abcde"); }, bad, "stop[0] is 5 bytes"},
      {"top_logprobs at max", [](auto& r) { r.set_logprobs(true); r.set_top_logprobs(5); }, ok,
       ""},
      {"top_logprobs past max", [](auto& r) { r.set_logprobs(true); r.set_top_logprobs(6); },
       bad, "top_logprobs = 6 is outside [0, 5]"},
      {"malformed session id", [](auto& r) { r.set_session_id("../../etc/passwd"); }, bad,
       "session_id is malformed"},
      {"unknown session id",
       [](auto& r) { r.set_session_id("0123456789abcdef0123456789abcdef"); },
       grpc::StatusCode::NOT_FOUND, "is not a session"},
  };
  auto stub = server_->Stub();
  for (const Row& row : rows) {
    v1::GenerateRequest request = MakeRequest("hello", "", 2, 1);
    row.set(request);
    GenerateOutcome outcome = RunGenerate(*stub, request);
    EXPECT_EQ(outcome.status.error_code(), row.code)
        << row.name << ": " << outcome.status.error_message();
    EXPECT_NE(outcome.status.error_message().find(row.message), std::string::npos)
        << row.name << ": " << outcome.status.error_message();
    if (row.code == ok) EXPECT_TRUE(outcome.has_finished) << row.name;
    if (row.code != ok) EXPECT_TRUE(outcome.messages.empty()) << row.name;
  }
}

TEST_F(ErrorsTest, SessionRpcsCheckIdsAndPages) {
  auto stub = server_->Stub();
  const std::string unknown = "fedcba9876543210fedcba9876543210";
  for (const std::string& id : {std::string("short"), std::string("ABCDEF9876543210FEDCBA9876543210"),
                                unknown}) {
    const grpc::StatusCode expected =
        id == unknown ? grpc::StatusCode::NOT_FOUND : grpc::StatusCode::INVALID_ARGUMENT;
    {
      grpc::ClientContext c;
      v1::GetSessionRequest r;
      r.set_session_id(id);
      v1::Session s;
      EXPECT_EQ(stub->GetSession(&c, r, &s).error_code(), expected) << id;
    }
    {
      grpc::ClientContext c;
      v1::ForkSessionRequest r;
      r.set_session_id(id);
      v1::Session s;
      EXPECT_EQ(stub->ForkSession(&c, r, &s).error_code(), expected) << id;
    }
    {
      grpc::ClientContext c;
      v1::DeleteSessionRequest r;
      r.set_session_id(id);
      v1::DeleteSessionResponse s;
      EXPECT_EQ(stub->DeleteSession(&c, r, &s).error_code(), expected) << id;
    }
    auto exported = ExportSession(*stub, id);
    EXPECT_EQ(static_cast<int>(exported.status().code()), static_cast<int>(expected)) << id;
  }
  for (auto [size, token, code] : std::vector<std::tuple<int, std::string, grpc::StatusCode>>{
           {1000, "", grpc::StatusCode::OK},
           {1001, "", grpc::StatusCode::INVALID_ARGUMENT},
           {-1, "", grpc::StatusCode::INVALID_ARGUMENT},
           {10, "garbage", grpc::StatusCode::INVALID_ARGUMENT}}) {
    grpc::ClientContext c;
    v1::ListSessionsRequest r;
    r.set_page_size(size);
    r.set_page_token(token);
    v1::ListSessionsResponse s;
    EXPECT_EQ(stub->ListSessions(&c, r, &s).error_code(), code) << size << " " << token;
  }
  EXPECT_EQ(CreateSession(*stub, std::string(65, 'a')).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CreateSession(*stub, "\xc3").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(ErrorsTest, CorruptImportIsDataLossAndAnotherModelsIsFailedPrecondition) {
  auto stub = server_->Stub();
  auto session = CreateSession(*stub, "some context");
  ASSERT_TRUE(session.ok()) << session.status();
  auto file = ExportSession(*stub, session->id());
  ASSERT_TRUE(file.ok());
  v1::Session imported;
  std::string flipped = *file;
  flipped[flipped.size() / 2] ^= 0x10;
  EXPECT_EQ(ImportSession(*stub, flipped, &imported).error_code(), grpc::StatusCode::DATA_LOSS);
  EXPECT_EQ(ImportSession(*stub, file->substr(0, file->size() - 1), &imported).error_code(),
            grpc::StatusCode::DATA_LOSS);
  EXPECT_EQ(ImportSession(*stub, "", &imported).error_code(), grpc::StatusCode::DATA_LOSS);

  auto other = ServerProcess::Start({"--model=" + *WriteTinyModel(FreshDir("other-model"), 4),
                                     "--store_dir=" + FreshDir("other-store")});
  ASSERT_TRUE(other.ok()) << other.status();
  auto other_stub = (*other)->Stub();
  auto foreign = CreateSession(*other_stub, "context");
  ASSERT_TRUE(foreign.ok());
  auto foreign_file = ExportSession(*other_stub, foreign->id());
  ASSERT_TRUE(foreign_file.ok());
  grpc::Status status = ImportSession(*stub, *foreign_file, &imported);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << status.error_message();
  // The sound file imports.
  EXPECT_TRUE(ImportSession(*stub, *file, &imported).ok());
}

TEST_F(ErrorsTest, SessionLimitIsResourceExhaustedNamingTheFlag) {
  auto server = ServerProcess::Start({"--model=" + *model_dir_,
                                      "--store_dir=" + FreshDir("limit-store"), "--max_sessions=2"});
  ASSERT_TRUE(server.ok());
  auto stub = (*server)->Stub();
  auto first = CreateSession(*stub);
  ASSERT_TRUE(first.ok());
  ASSERT_TRUE(CreateSession(*stub).ok());
  auto third = CreateSession(*stub);
  EXPECT_EQ(third.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(third.status().message().find("max_sessions = 2"), std::string::npos);
  grpc::ClientContext c;
  v1::ForkSessionRequest r;
  r.set_session_id(first->id());
  v1::Session s;
  EXPECT_EQ(stub->ForkSession(&c, r, &s).error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
}

TEST_F(ErrorsTest, SecondGenerateOnABusySessionIsRefusedAndCancelFreesIt) {
  auto stub = server_->Stub();
  auto session = CreateSession(*stub);
  ASSERT_TRUE(session.ok());
  GenerateOutcome first_turn = RunGenerate(*stub, MakeRequest("hi", session->id(), 5, 1));
  ASSERT_TRUE(first_turn.status.ok());
  const int64_t position = first_turn.finished.position();

  // A long turn whose reader stops reading on a narrow window: it cannot
  // finish, so it pauses, holding the session.
  const auto narrow = NarrowWindowStub(server_->address());
  grpc::ClientContext context;
  auto reader = narrow->Generate(&context, MakeRequest("go", session->id(), 100000, 2));
  v1::GenerateResponse response;
  ASSERT_TRUE(reader->Read(&response));

  GenerateOutcome second = RunGenerate(*stub, MakeRequest("also", session->id(), 5, 3));
  EXPECT_EQ(second.status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(second.status.error_message().find("busy"), std::string::npos);

  context.TryCancel();
  while (reader->Read(&response)) {
  }
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::CANCELLED);
  // The slot and the session come back within a step or two.
  v1::Session after;
  for (int i = 0; i < 200; ++i) {
    grpc::ClientContext c;
    v1::GetSessionRequest r;
    r.set_session_id(session->id());
    ASSERT_TRUE(stub->GetSession(&c, r, &after).ok());
    if (!after.busy()) break;
    absl::SleepFor(absl::Milliseconds(5));
  }
  EXPECT_FALSE(after.busy());
  // The cancelled turn left no trace: the session is where its last
  // finished turn put it.
  EXPECT_EQ(after.position(), position);
  auto metrics = ScrapeMetrics(server_->metrics_port());
  ASSERT_TRUE(metrics.ok());
  EXPECT_EQ(MetricValue(*metrics, "linserve_active_requests"), 0);
  EXPECT_EQ(MetricValue(*metrics, "linserve_queue_depth"), 0);
  EXPECT_GE(MetricValue(*metrics, "linserve_rejections_total{reason=\"session_busy\"}"), 1);
  GenerateOutcome again = RunGenerate(*stub, MakeRequest("again", session->id(), 5, 4));
  EXPECT_TRUE(again.status.ok()) << again.status.error_message();
  EXPECT_EQ(again.finished.position(), position + 1 + 5 + 4);
}

}  // namespace
}  // namespace linserve
