// End to end: a real linserve process and a real gRPC client. Constrained
// generation: every turn's text is a sentence of its grammar or one of its
// choices, whatever the seed, alone or in a batch; a session goes on from the
// constrained text; bad constraints are refused naming the field and limit.

#include <functional>
#include <regex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "tests/server/e2e_helpers.h"
#include "tests/server/server_process.h"

namespace linserve {
namespace {

// A JSON object of two fields, as a schema would compile to.
constexpr char kPersonGrammar[] =
    R"(root ::= "{\"name\": \"" [a-z]{1,8} "\", \"age\": " [1-9] [0-9]? "}")";
const std::regex kPerson(R"(\{"name": "[a-z]{1,8}", "age": [1-9][0-9]?\})");

class ConstraintTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto model = WriteTinyModel(FreshDir("constraint-model"), 11, /*add_bos=*/false);
    ASSERT_TRUE(model.ok()) << model.status();
    auto server = ServerProcess::Start({"--model=" + *model,
                                        "--store_dir=" + FreshDir("constraint-store"),
                                        "--max_grammar_bytes=256", "--max_choices=4"});
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = server->release();
  }
  static void TearDownTestSuite() { delete server_; }

  static ServerProcess* server_;
};
ServerProcess* ConstraintTest::server_ = nullptr;

// Sixteen seeds at a high temperature, all at once so that they share decode
// batches: the untrained model would write anything, the grammar lets it
// write only what parses.
TEST_F(ConstraintTest, EveryTurnIsASentenceOfItsGrammarAloneOrInABatch) {
  std::vector<GenerateOutcome> outcomes(16);
  std::vector<std::thread> clients;
  for (int i = 0; i < 16; ++i) {
    clients.emplace_back([&, i] {
      auto stub = server_->Stub();
      v1::GenerateRequest request = MakeRequest("Person: ", "", 200, 100 + i, 1.5f);
      request.set_grammar(kPersonGrammar);
      outcomes[i] = RunGenerate(*stub, request);
    });
  }
  for (std::thread& client : clients) client.join();
  std::set<std::string> texts;
  for (const GenerateOutcome& outcome : outcomes) {
    ASSERT_TRUE(outcome.status.ok()) << outcome.status.error_message();
    EXPECT_TRUE(std::regex_match(outcome.text, kPerson)) << outcome.text;
    EXPECT_EQ(outcome.finished.reason(), v1::FINISH_REASON_GRAMMAR);
    texts.insert(outcome.text);
  }
  EXPECT_GT(texts.size(), 1u);  // the seeds still choose
}

TEST_F(ConstraintTest, AChoiceGivesOneOfItsStrings) {
  auto stub = server_->Stub();
  const std::set<std::string> choices = {"yes", "no", "say \"maybe\"", "日本"};
  std::set<std::string> seen;
  for (int seed = 1; seed <= 12; ++seed) {
    v1::GenerateRequest request = MakeRequest("Answer: ", "", 50, seed, 1.5f);
    for (const std::string& choice : choices) request.mutable_choice()->add_choices(choice);
    GenerateOutcome outcome = RunGenerate(*stub, request);
    ASSERT_TRUE(outcome.status.ok()) << outcome.status.error_message();
    EXPECT_EQ(choices.count(outcome.text), 1u) << outcome.text;
    EXPECT_EQ(outcome.finished.reason(), v1::FINISH_REASON_GRAMMAR);
    seen.insert(outcome.text);
  }
  EXPECT_GT(seen.size(), 1u);
}

// max_new_tokens before the grammar is done: the text is cut, as documented.
TEST_F(ConstraintTest, ATurnCutByMaxNewTokensEndsWithLength) {
  auto stub = server_->Stub();
  v1::GenerateRequest request = MakeRequest("Person: ", "", 5, 7, 1.0f);
  request.set_grammar(kPersonGrammar);
  GenerateOutcome outcome = RunGenerate(*stub, request);
  ASSERT_TRUE(outcome.status.ok()) << outcome.status.error_message();
  EXPECT_EQ(outcome.finished.reason(), v1::FINISH_REASON_LENGTH);
  EXPECT_EQ(outcome.text, "{\"nam");
}

// A constraint holds for one turn: the next turn of the session is free and
// goes on from the constrained text.
TEST_F(ConstraintTest, ASessionGoesOnFromTheConstrainedText) {
  auto stub = server_->Stub();
  absl::StatusOr<v1::Session> session = CreateSession(*stub, "Q: ");
  ASSERT_TRUE(session.ok()) << session.status();
  v1::GenerateRequest constrained = MakeRequest("yes or no? ", session->id(), 20, 3, 1.0f);
  constrained.mutable_choice()->add_choices("yes");
  constrained.mutable_choice()->add_choices("no");
  GenerateOutcome first = RunGenerate(*stub, constrained);
  ASSERT_TRUE(first.status.ok()) << first.status.error_message();
  ASSERT_TRUE(first.text == "yes" || first.text == "no") << first.text;
  GenerateOutcome second =
      RunGenerate(*stub, MakeRequest(" then ", session->id(), 30, 4, 1.0f));
  ASSERT_TRUE(second.status.ok()) << second.status.error_message();
  EXPECT_EQ(second.finished.usage().generated_tokens(), 30);
  // The session's history holds the constrained turn: its position counts
  // every token of both turns (and the pending last token of the first).
  EXPECT_GE(GetSession(*stub, session->id()).position(),
            static_cast<int64_t>(3 + 11 + first.text.size() + 6 + 29));
}

TEST_F(ConstraintTest, BadConstraintsAreRefusedNamingTheFieldAndTheLimit) {
  auto stub = server_->Stub();
  struct Case {
    std::function<void(v1::GenerateRequest&)> set;
    const char* message;
  };
  const std::vector<Case> cases = {
      {[](auto& r) { r.set_grammar("root ::= \"a"); },
       "grammar: GBNF line 1, column 12: a literal is not closed"},
      {[](auto& r) { r.set_grammar("root ::= x"); }, "grammar: GBNF: rule 'x' is used but never defined"},
      {[](auto& r) { r.set_grammar("root ::= \"" + std::string(300, 'a') + "\""); },
       "grammar is 311 bytes; at most max_grammar_bytes = 256"},
      {[](auto& r) { r.mutable_choice(); }, "choice has 0 strings; 1 to max_choices = 4"},
      {[](auto& r) {
         for (int i = 0; i < 5; ++i) r.mutable_choice()->add_choices("x");
       },
       "choice has 5 strings; 1 to max_choices = 4"},
      {[](auto& r) {
         r.mutable_choice()->add_choices("a");
         r.mutable_choice()->add_choices("");
       },
       "choice[1] is empty"},
  };
  for (const Case& c : cases) {
    v1::GenerateRequest request = MakeRequest("x", "", 5, 1);
    c.set(request);
    GenerateOutcome outcome = RunGenerate(*stub, request);
    EXPECT_EQ(outcome.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << c.message;
    EXPECT_NE(outcome.status.error_message().find(c.message), std::string::npos)
        << outcome.status.error_message();
  }
}

TEST_F(ConstraintTest, ModelInfoListsTheConstraintsAndTheirLimits) {
  auto stub = server_->Stub();
  grpc::ClientContext context;
  v1::ModelInfo info;
  ASSERT_TRUE(stub->GetModelInfo(&context, v1::GetModelInfoRequest(), &info).ok());
  EXPECT_EQ(std::vector<std::string>(info.constraints().begin(), info.constraints().end()),
            (std::vector<std::string>{"grammar", "choice"}));
  EXPECT_EQ(info.limits().max_grammar_bytes(), 256);
  EXPECT_EQ(info.limits().max_choices(), 4);
}

}  // namespace
}  // namespace linserve
