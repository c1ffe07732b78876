// End to end: the prefix-state cache on a real server, for every kind (and
// the tiny trained RWKV-7 where its fixture is beside the checkout): those
// whose state has a constant size and the softmax baseline, whose KV cache
// grows (a snapshot holds the KV of its prefix; Qwen3.5's hybrid state is
// checked in server_qwen35_test). A prompt served cold and then warm gives the same
// tokens and logprobs, bit for bit, as on a server with the cache off; a hit
// resumes from the longest cached boundary; the cache keeps within its bytes;
// and a session's own continuation never changes.

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "engine/model/language_model.h"
#include "engine/base/model_config.h"
#include "tests/rwkv7_fixture.h"
#include "tests/server/e2e_helpers.h"
#include "tests/server/server_process.h"

namespace linserve {
namespace {

constexpr int kChunk = 32;  // every model here prefills in chunks of 32

// A model of `kind` big enough that a whole chunk's matrix products take
// BLAS's blocked path (server/scheduling/prefill_pieces.h): 2 heads of 32, chunk 32,
// and 32 slots a head, so that even the slot projection has 64 outputs. (With
// 4 slots its 8 outputs times a chunk's 32 rows went through OpenBLAS's
// small-matrix path, whose sums differ in the last bit from the blocked
// one's: a warm run's logprobs then differed by one unit in the last place.)
ModelConfig ConfigOf(AttentionKind kind, bool rope, bool shift) {
  ModelConfig c;
  c.d_model = 64;
  c.n_layers = 2;
  c.n_heads = 2;
  c.head_dim = 32;
  c.mlp_hidden = 128;
  c.attention.kind = kind;
  c.attention.rope = rope;
  c.attention.token_shift = shift;
  c.attention.chunk_size = kChunk;
  c.attention.codebook_size = 16;
  c.attention.window = 5;
  c.attention.slots = 32;
  return c;
}

// The model directory for a case name: "rwkv7", or an attention kind with
// optional "+rope" / "+shift". Empty when the RWKV-7 fixture is missing.
std::string ModelDirFor(const std::string& name) {
  if (name == "rwkv7") {
    if (!std::filesystem::exists(Rwkv7FixturePath("tiny-rwkv7-fp32.pth"))) return "";
    return WriteTinyRwkv7Dir(FreshDir("prefix-rwkv7-model"));
  }
  const std::string base = name.substr(0, name.find('+'));
  auto kind = ParseAttentionKind(base);
  EXPECT_TRUE(kind.ok()) << kind.status();
  const ModelConfig config = ConfigOf(*kind, name.find("+rope") != std::string::npos,
                                      name.find("+shift") != std::string::npos);
  auto dir = WriteModel(FreshDir("prefix-" + base + "-model"), config, 17);
  EXPECT_TRUE(dir.ok()) << dir.status();
  return dir.ok() ? *dir : "";
}

std::unique_ptr<ServerProcess> Start(const std::string& model_dir, const std::string& name,
                                     std::vector<std::string> flags = {}) {
  flags.push_back("--model=" + model_dir);
  flags.push_back("--store_dir=" + FreshDir(name + "-store"));
  flags.push_back("--dtype=float32");
  auto server = ServerProcess::Start(flags);
  EXPECT_TRUE(server.ok()) << server.status();
  return server.ok() ? *std::move(server) : nullptr;
}

// What a client sees of a turn but the timings: text, tokens, logprobs.
std::string Output(const GenerateOutcome& outcome) {
  std::string out;
  for (const v1::GenerateResponse& message : outcome.messages) {
    v1::GenerateResponse copy = message;
    copy.clear_finished();
    out += copy.SerializeAsString();
  }
  return out;
}

GenerateOutcome Sample(v1::Linserve::Stub& stub, const std::string& prompt,
                       const std::string& session = "", const std::string& cache_salt = "") {
  v1::GenerateRequest request = MakeRequest(prompt, session, 24, 99, 0.9f);
  request.set_cache_salt(cache_salt);
  request.set_logprobs(true);
  request.set_top_logprobs(3);
  GenerateOutcome outcome = RunGenerate(stub, request);
  EXPECT_TRUE(outcome.status.ok()) << outcome.status.error_message();
  EXPECT_EQ(outcome.finished.usage().generated_tokens(), 24);
  return outcome;
}

// 150 bytes (= tokens): four whole chunks and 22 more.
const std::string kPrompt =
    "It was the best of times, it was the worst of times, it was the age of wisdom, it "
    "was the age of foolishness, it was the epoch of belief, it was the e";

// The parts of PrefixCacheKindTest below share one server with the cache off
// and one with it on: starting a server is most of their time (about 1 s
// here, 4 s under ASan), and CI runs the suite five times (scripts/test, the
// three passes of scripts/test-bit-identity, ASan). Each part sends a cache
// salt of its own where it counts cached tokens, so that what another part
// cached never changes its counts.

// docs/DESIGN.md, "What is bit-identical", row "prefill in pieces ending on
// chunk boundaries": the warm server's tokens and logprobs are the cold one's.
void ColdAndWarmGiveTheSameTokensAndLogprobs(const ServerProcess& off, const ServerProcess& on) {
  ASSERT_EQ(kPrompt.size(), 150u);
  auto off_stub = off.Stub();
  auto stub = on.Stub();
  const std::string salt = "cold-and-warm";

  const GenerateOutcome alone = Sample(*off_stub, kPrompt);
  EXPECT_EQ(alone.finished.usage().cached_tokens(), 0);
  // First sighting: no snapshot. Second: a snapshot at the deepest boundary
  // the two share (4 chunks), but no hit yet. Third: resumed from it.
  const GenerateOutcome first = Sample(*stub, kPrompt, "", salt);
  const GenerateOutcome second = Sample(*stub, kPrompt, "", salt);
  const GenerateOutcome warm = Sample(*stub, kPrompt, "", salt);
  EXPECT_EQ(first.finished.usage().cached_tokens(), 0);
  EXPECT_EQ(second.finished.usage().cached_tokens(), 0);
  EXPECT_EQ(warm.finished.usage().cached_tokens(), 4 * kChunk);
  EXPECT_EQ(warm.finished.usage().prompt_tokens(), 150);
  EXPECT_FALSE(Output(alone).empty());
  EXPECT_EQ(Output(first), Output(alone));
  EXPECT_EQ(Output(second), Output(alone));
  EXPECT_EQ(Output(warm), Output(alone)) << "warm differs from the cache-off server";

  // A longer prompt with the same beginning resumes from the longest cached
  // boundary, 128, and still matches the cache-off server.
  const std::string longer = kPrompt + "poch of incredulity, it was the season of Light";
  const GenerateOutcome extended = Sample(*stub, longer, "", salt);
  EXPECT_EQ(extended.finished.usage().cached_tokens(), 4 * kChunk);
  EXPECT_EQ(Output(extended), Output(Sample(*off_stub, longer)));

  // A new session's first turn, and CreateSession with a prompt, hit too.
  auto session = CreateSession(*stub);
  ASSERT_TRUE(session.ok()) << session.status();
  const GenerateOutcome first_turn = Sample(*stub, kPrompt, session->id(), salt);
  EXPECT_EQ(first_turn.finished.usage().cached_tokens(), 4 * kChunk);
  EXPECT_EQ(Output(first_turn), Output(alone));
  auto created = CreateSession(*stub, kPrompt, salt);
  ASSERT_TRUE(created.ok()) << created.status();
  EXPECT_EQ(created->cached_tokens(), 4 * kChunk);
  auto created_off = CreateSession(*off_stub, kPrompt);
  ASSERT_TRUE(created_off.ok()) << created_off.status();
  EXPECT_EQ(created_off->cached_tokens(), 0);
  EXPECT_EQ(Output(Sample(*stub, " and", created->id())),
            Output(Sample(*off_stub, " and", created_off->id())));

  // A salt keeps a prompt apart.
  v1::GenerateRequest salted = MakeRequest(kPrompt, "", 4, 99, 0.9f);
  salted.set_cache_salt("mine");
  const GenerateOutcome apart = RunGenerate(*stub, salted);
  ASSERT_TRUE(apart.status.ok()) << apart.status.error_message();
  EXPECT_EQ(apart.finished.usage().cached_tokens(), 0);

  const std::string metrics = ScrapeMetrics(on.metrics_port()).value_or("");
  EXPECT_GE(MetricValue(metrics, "linserve_prefix_cache_hits_total"), 4);
  EXPECT_GE(MetricValue(metrics, "linserve_prefix_cache_hit_tokens_total"), 4 * 4 * kChunk);
  EXPECT_GT(MetricValue(metrics, "linserve_prefix_cache_bytes"), 0);
}

void ASessionsThreeTurnsStillEqualOnePrompt(const ServerProcess& on) {
  auto stub = on.Stub();
  const std::string salt = "three-turns";
  // Twice, so that the first turn's prompt is cached when the session runs.
  Sample(*stub, kPrompt, "", salt);
  Sample(*stub, kPrompt, "", salt);
  auto greedy = [&](const std::string& prompt, const std::string& session,
                    v1::Finished* finished = nullptr) {
    v1::GenerateRequest request = MakeRequest(prompt, session, 16, 1, 0.0f);
    request.set_cache_salt(salt);
    GenerateOutcome outcome = RunGenerate(*stub, request);
    EXPECT_TRUE(outcome.status.ok()) << outcome.status.error_message();
    if (finished != nullptr) *finished = outcome.finished;
    return outcome.text;
  };
  auto session = CreateSession(*stub);
  ASSERT_TRUE(session.ok()) << session.status();
  v1::Finished finished;
  const std::string p2 = "\n\nThen ", p3 = "\n\nAt last ";
  const std::string t1 = greedy(kPrompt, session->id(), &finished);
  EXPECT_EQ(finished.usage().cached_tokens(), 4 * kChunk);
  const std::string t2 = greedy(p2, session->id());
  const std::string t3 = greedy(p3, session->id());
  const std::string whole = kPrompt + t1 + p2 + t2 + p3;
  ASSERT_EQ(whole.size(), kPrompt.size() + p2.size() + p3.size() + 32)
      << "a turn's text is not one byte a token";
  EXPECT_EQ(greedy(whole, ""), t3);
}

// A named state made from P, then a turn X, is the single prompt P+X: P ends
// on a chunk boundary, so the state after it is the one the whole prompt's
// prefill passes through (the row above). With the cache on and off.
void ANamedStateThenATurnEqualsOnePrompt(const ServerProcess& off, const ServerProcess& on) {
  const std::string p = kPrompt.substr(0, 4 * kChunk), x = kPrompt.substr(4 * kChunk);
  for (const ServerProcess* server : {&off, &on}) {
    auto stub = server->Stub();
    const GenerateOutcome alone = Sample(*stub, kPrompt);
    ASSERT_NE(Output(Sample(*stub, x)), Output(alone)) << "the state after p must matter";
    grpc::ClientContext context;
    v1::CreateNamedStateRequest create;
    create.set_name("preamble");
    create.set_prompt(p);
    v1::NamedState made;
    const grpc::Status status = stub->CreateNamedState(&context, create, &made);
    ASSERT_TRUE(status.ok()) << status.error_message();
    EXPECT_EQ(made.position(), 4 * kChunk);
    EXPECT_EQ(made.prompt_tokens(), 4 * kChunk);
    EXPECT_EQ(made.source(), "prompt");
    EXPECT_EQ(made.digest().size(), 64u);

    v1::GenerateRequest request = MakeRequest(x, "", 24, 99, 0.9f);
    request.set_logprobs(true);
    request.set_top_logprobs(3);
    request.set_initial_state("preamble");
    for (int run = 0; run < 2; ++run) {  // the second may hit the prefix cache
      const GenerateOutcome after = RunGenerate(*stub, request);
      ASSERT_TRUE(after.status.ok()) << after.status.error_message();
      EXPECT_EQ(after.finished.usage().prompt_tokens(), static_cast<int>(x.size()));
      EXPECT_EQ(Output(after), Output(alone)) << "run " << run;
    }
    // A session made from it continues the same way.
    grpc::ClientContext session_context;
    v1::CreateSessionRequest from;
    from.set_initial_state("preamble");
    v1::Session session;
    ASSERT_TRUE(stub->CreateSession(&session_context, from, &session).ok());
    EXPECT_EQ(session.position(), 4 * kChunk);
    EXPECT_EQ(Output(Sample(*stub, x, session.id())), Output(alone));
  }
}

class PrefixCacheKindTest : public ::testing::TestWithParam<std::string> {};

TEST_P(PrefixCacheKindTest, CacheOnGivesWhatCacheOffGives) {
  const std::string model_dir = ModelDirFor(GetParam());
  if (model_dir.empty()) GTEST_SKIP() << "no " << Rwkv7FixturePath("tiny-rwkv7-fp32.pth");
  // Cold on one engine thread, warm on two: a cached prefix resumes to the
  // same bits whatever the pool's size.
  auto off = Start(model_dir, "prefix-off", {"--prefix_cache_bytes=0", "--threads=1"});
  auto on = Start(model_dir, "prefix-on", {"--threads=2"});
  ASSERT_TRUE(off && on);
  {
    SCOPED_TRACE("ColdAndWarmGiveTheSameTokensAndLogprobs");
    ColdAndWarmGiveTheSameTokensAndLogprobs(*off, *on);
  }
  {
    SCOPED_TRACE("ASessionsThreeTurnsStillEqualOnePrompt");
    ASessionsThreeTurnsStillEqualOnePrompt(*on);
  }
  {
    SCOPED_TRACE("ANamedStateThenATurnEqualsOnePrompt");
    ANamedStateThenATurnEqualsOnePrompt(*off, *on);
  }
}

INSTANTIATE_TEST_SUITE_P(Kinds, PrefixCacheKindTest,
                         ::testing::Values("linear_elu", "linear_elu+rope", "linear_elu+shift",
                                           "linear_softmax", "linear_cosine+shift", "vq",
                                           "compressed", "softmax", "rwkv7"),
                         [](const auto& info) {
                           std::string name = info.param;
                           for (char& c : name) {
                             if (c == '+') c = '_';
                           }
                           return name;
                         });

TEST(PrefixCacheTest, EvictionKeepsTheCacheWithinItsBytesAndTheMetricsAgree) {
  const std::string model_dir = ModelDirFor("linear_elu");
  // Room for three snapshots and a half.
  auto model = LanguageModel::Load(model_dir, LoadOptions{});
  ASSERT_TRUE(model.ok()) << model.status();
  const int64_t state_bytes = (*model)->StateBytes(0);
  const int64_t bound = 3 * state_bytes + state_bytes / 2;
  auto server = Start(model_dir, "prefix-evict",
                      {"--prefix_cache_bytes=" + std::to_string(bound), "--warmup_steps=0"});
  ASSERT_NE(server, nullptr);
  auto stub = server->Stub();
  grpc::ClientContext context;
  v1::ModelInfo info;
  ASSERT_TRUE(stub->GetModelInfo(&context, v1::GetModelInfoRequest(), &info).ok());
  EXPECT_EQ(info.prefix_cache_block_tokens(), kChunk);
  EXPECT_EQ(info.prefix_cache_bytes(), bound);
  EXPECT_EQ(info.state_bytes_per_session(), state_bytes);
  constexpr int kPrompts = 8;
  for (int i = 0; i < kPrompts; ++i) {
    // Distinct from the first byte, and seen twice: one snapshot each, at
    // its deepest boundary (6 chunks of its 214 tokens).
    const std::string prompt = std::string(60, static_cast<char>('a' + i)) + "abcd" + kPrompt;
    for (int sighting = 0; sighting < 2; ++sighting) {
      ASSERT_TRUE(RunGenerate(*stub, MakeRequest(prompt, "", 2, 1)).status.ok());
    }
    const std::string metrics = ScrapeMetrics(server->metrics_port()).value_or("");
    const double bytes = MetricValue(metrics, "linserve_prefix_cache_bytes");
    EXPECT_LE(bytes, bound) << "after prompt " << i;
    EXPECT_EQ(bytes, std::min(i + 1, 3) * state_bytes) << "after prompt " << i;
    EXPECT_EQ(MetricValue(metrics, "linserve_prefix_cache_evictions_total"), std::max(0, i - 2));
    EXPECT_EQ(MetricValue(metrics, "linserve_prefix_cache_lookups_total"), 2 * (i + 1));
  }
  // The oldest were evicted, the newest are there.
  const std::string newest =
      std::string(60, static_cast<char>('a' + kPrompts - 1)) + "abcd" + kPrompt;
  const std::string oldest = std::string(60, 'a') + "abcd" + kPrompt;
  EXPECT_EQ(RunGenerate(*stub, MakeRequest(newest, "", 2, 1)).finished.usage().cached_tokens(),
            6 * kChunk);
  EXPECT_EQ(RunGenerate(*stub, MakeRequest(oldest, "", 2, 1)).finished.usage().cached_tokens(), 0);
}

}  // namespace
}  // namespace linserve
