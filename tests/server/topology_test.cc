// End to end on the multi-replica topology that deploy/local/topology starts
// from Debian's packages on loopback: a real Redis as the shared session
// store, three `linserve` replicas, nginx routing gRPC and the HTTP API with
// the session affinity hash, and a real Prometheus server scraping the
// replicas. What a single server answers (a reference with its own disk
// store) is what the topology must answer.

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "tests/server/e2e_helpers.h"
#include "tests/server/http_client.h"
#include "tests/server/raw_http.h"
#include "tests/server/server_process.h"

namespace linserve {
namespace {

struct Replica {
  int port = 0;
  int http_port = 0;
  int metrics_port = 0;
  pid_t pid = -1;
};

// One deploy/local/topology run, stopped at the end of the test.
class Topology {
 public:
  static bool Available() {
    for (const char* program : {"/usr/bin/redis-server", "/usr/sbin/nginx", "/usr/bin/prometheus"}) {
      if (access(program, X_OK) != 0) return false;
    }
    return true;
  }

  static absl::StatusOr<std::unique_ptr<Topology>> Start(int replicas,
                                                         std::vector<std::string> flags) {
    auto topology = std::unique_ptr<Topology>(new Topology());
    topology->dir_ = FreshDir("topology");
    std::vector<std::string> args = {Script(), "start", absl::StrCat("--replicas=", replicas),
                                     "--dir=" + topology->dir_, "--model=" + DefaultModelDir(),
                                     "--"};
    args.insert(args.end(), flags.begin(), flags.end());
    ProcessResult started = RunProcess(args);
    if (started.exit_code != 0) {
      return absl::InternalError(absl::StrCat("topology start failed: ", started.err));
    }
    std::map<std::string, int> env;
    std::ifstream in(topology->dir_ + "/topology.env");
    for (std::string line; std::getline(in, line);) {
      std::pair<std::string, std::string> kv = absl::StrSplit(line, absl::MaxSplits('=', 1));
      int value = 0;
      if (absl::SimpleAtoi(kv.second, &value)) env[kv.first] = value;
    }
    topology->nginx_port = env["NGINX_PORT"];
    topology->nginx_http_port = env["NGINX_HTTP_PORT"];
    topology->prometheus_port = env["PROMETHEUS_PORT"];
    for (int i = 1; i <= env["REPLICAS"]; ++i) {
      topology->replicas.push_back({env[absl::StrCat("REPLICA_", i, "_PORT")],
                                    env[absl::StrCat("REPLICA_", i, "_HTTP_PORT")],
                                    env[absl::StrCat("REPLICA_", i, "_METRICS_PORT")],
                                    env[absl::StrCat("REPLICA_", i, "_PID")]});
    }
    if (topology->nginx_port == 0 || topology->nginx_http_port == 0 ||
        topology->replicas.size() != static_cast<size_t>(replicas)) {
      return absl::InternalError("topology.env lacks ports");
    }
    return topology;
  }

  ~Topology() {
    ProcessResult stopped = RunProcess({Script(), "stop", "--dir=" + dir_});
    EXPECT_EQ(stopped.exit_code, 0) << stopped.err;
  }

  static std::unique_ptr<v1::Linserve::Stub> StubFor(int port) {
    return v1::Linserve::NewStub(grpc::CreateChannel(absl::StrCat("127.0.0.1:", port),
                                                     grpc::InsecureChannelCredentials()));
  }
  std::unique_ptr<v1::Linserve::Stub> ThroughNginx() const { return StubFor(nginx_port); }
  std::unique_ptr<v1::Linserve::Stub> Direct(int replica) const {
    return StubFor(replicas[replica].port);
  }

  // A PromQL instant query through Prometheus's HTTP API: the sum of the
  // result's values (0 for an empty result).
  absl::StatusOr<double> Query(const std::string& promql) const {
    std::string encoded;
    for (unsigned char c : promql) {
      if (std::isalnum(c) || c == '_') {
        encoded += static_cast<char>(c);
      } else {
        encoded += absl::StrCat("%", absl::Hex(c, absl::kZeroPad2));
      }
    }
    absl::StatusOr<std::string> body = HttpGet(prometheus_port, "/api/v1/query?query=" + encoded);
    if (!body.ok()) return body.status();
    const nlohmann::json answer = nlohmann::json::parse(*body, nullptr, false);
    if (answer.is_discarded() || answer.value("status", "") != "success") {
      return absl::InternalError("prometheus answered: " + *body);
    }
    double sum = 0;
    for (const auto& series : answer["data"]["result"]) {
      double value = 0;
      if (absl::SimpleAtod(series["value"][1].get<std::string>(), &value)) sum += value;
    }
    return sum;
  }

  int nginx_port = 0;       // gRPC
  int nginx_http_port = 0;  // the HTTP API
  int prometheus_port = 0;
  std::vector<Replica> replicas;

 private:
  Topology() = default;
  static std::string Script() { return LINSERVE_TOPOLOGY_SCRIPT; }
  std::string dir_;
};

// The reference server: a single linserve with its own disk store.
absl::StatusOr<std::unique_ptr<ServerProcess>> StartReference() {
  return ServerProcess::Start(
      {"--model=" + DefaultModelDir(), "--store_dir=" + FreshDir("topology-reference")});
}

// The reference's session after `prompt`.
std::string ReferenceSession(ServerProcess& reference, const std::string& prompt) {
  auto session = CreateSession(*reference.Stub(), prompt);
  EXPECT_TRUE(session.ok()) << session.status();
  return session.ok() ? session->id() : "";
}

// The tests that leave every replica running share one topology with the
// default flags and one reference, started once for the suite: a topology
// takes seconds to start, more under the sanitizers. ctest runs topology_test
// as one process (tests/server/CMakeLists.txt), so the suite is started once
// per run. Each test makes its own sessions, and the counters it checks are
// differences over its own traffic.
class TopologyTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!Topology::Available()) return;
    auto reference = StartReference();
    if (!reference.ok()) {
      setup_error_ = reference.status().ToString();
      return;
    }
    reference_ = *std::move(reference);
    auto topology = Topology::Start(3, {});
    if (!topology.ok()) {
      setup_error_ = topology.status().ToString();
      return;
    }
    topology_ = *std::move(topology);
  }

  static void TearDownTestSuite() {
    topology_.reset();
    reference_.reset();
  }

  void SetUp() override {
    if (!Topology::Available()) GTEST_SKIP() << "redis-server, nginx or prometheus missing";
    ASSERT_NE(topology_, nullptr) << setup_error_;
  }

  static std::string ReferenceSession(const std::string& prompt) {
    return linserve::ReferenceSession(*reference_, prompt);
  }

  static inline std::unique_ptr<ServerProcess> reference_;
  static inline std::unique_ptr<Topology> topology_;
  static inline std::string setup_error_;
};

// A topology of its own, with a short session lease: the test kills
// replicas.
class TopologyFailoverTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!Topology::Available()) GTEST_SKIP() << "redis-server, nginx or prometheus missing";
    auto reference = StartReference();
    ASSERT_TRUE(reference.ok()) << reference.status();
    reference_ = *std::move(reference);
    // A short lease, so the session is free soon after its replica dies.
    auto topology = Topology::Start(3, {"--session_lease_ms=2000"});
    ASSERT_TRUE(topology.ok()) << topology.status();
    topology_ = *std::move(topology);
  }

  std::string ReferenceSession(const std::string& prompt) {
    return linserve::ReferenceSession(*reference_, prompt);
  }

  std::unique_ptr<ServerProcess> reference_;
  std::unique_ptr<Topology> topology_;
};

struct TurnResult {
  std::string text;
  int64_t position = 0;
};

TurnResult MustTurn(v1::Linserve::Stub& stub, const std::string& session,
                    const std::string& prompt, uint64_t seed, int32_t tokens = 24) {
  GenerateOutcome outcome = RunGenerate(stub, MakeRequest(prompt, session, tokens, seed));
  EXPECT_TRUE(outcome.status.ok()) << outcome.status.error_code() << ": "
                                   << outcome.status.error_message();
  return {outcome.text, outcome.finished.position()};
}

// Retries what a client should retry (the replica died, or the session's
// lease is still held by it) until the turn goes through.
GenerateOutcome TurnWithRetries(v1::Linserve::Stub& stub, const v1::GenerateRequest& request,
                                absl::Duration patience, std::vector<grpc::StatusCode>* seen) {
  const absl::Time give_up = absl::Now() + patience;
  while (true) {
    GenerateOutcome outcome = RunGenerate(stub, request);
    if (outcome.status.ok() || absl::Now() > give_up) return outcome;
    seen->push_back(outcome.status.error_code());
    const grpc::StatusCode code = outcome.status.error_code();
    if (code != grpc::StatusCode::UNAVAILABLE && code != grpc::StatusCode::ABORTED &&
        code != grpc::StatusCode::FAILED_PRECONDITION) {
      return outcome;
    }
    absl::SleepFor(absl::Milliseconds(100));
  }
}

TEST_F(TopologyTest, ASessionMovesBetweenReplicasAndAnswersAsOneServerWould) {
  auto first = CreateSession(*topology_->Direct(0), "ROMEO:\n");
  ASSERT_TRUE(first.ok()) << first.status();
  const std::string id = first->id(), alone = ReferenceSession("ROMEO:\n");
  auto reference = reference_->Stub();
  // Replica 0 comes back to the session after replica 1 advanced it: its
  // own copy is stale and must be read again from Redis.
  const struct {
    int replica;
    const char* prompt;
    uint64_t seed;  // 0: the session's own random stream
  } turns[] = {{0, "", 5}, {1, "\nJULIET:\n", 7}, {0, "\nROMEO:\n", 0}, {2, "", 11}, {1, "\n", 0}};
  for (const auto& turn : turns) {
    auto stub = topology_->Direct(turn.replica);
    const TurnResult got = MustTurn(*stub, id, turn.prompt, turn.seed);
    const TurnResult want = MustTurn(*reference, alone, turn.prompt, turn.seed);
    EXPECT_EQ(got.text, want.text) << "replica " << turn.replica;
    EXPECT_EQ(got.position, want.position) << "replica " << turn.replica;
  }
}

// Starts a long turn through `stub`; once it streams, kill -9 the replica
// serving it (the one whose metrics show a running request). The stream's
// status, and which replica died.
std::pair<grpc::Status, int> KillMidStream(v1::Linserve::Stub& stub, const std::string& session,
                                           Topology& topology, std::vector<bool>& alive) {
  grpc::ClientContext context;
  context.AddMetadata("x-session-id", session);
  v1::GenerateRequest long_turn = MakeRequest("\nJULIET:\n", session, 4000, 4);
  long_turn.set_ignore_eos(true);
  auto reader = stub.Generate(&context, long_turn);
  v1::GenerateResponse piece;
  if (!reader->Read(&piece)) return {reader->Finish(), -1};
  int serving = -1;
  for (size_t i = 0; i < topology.replicas.size(); ++i) {
    if (!alive[i]) continue;
    auto metrics = ScrapeMetrics(topology.replicas[i].metrics_port);
    if (metrics.ok() && MetricValue(*metrics, "linserve_active_requests") >= 1) {
      serving = static_cast<int>(i);
    }
  }
  if (serving < 0) return {grpc::Status(grpc::StatusCode::UNKNOWN, "no replica serves it"), -1};
  ::kill(topology.replicas[serving].pid, SIGKILL);
  alive[serving] = false;
  while (reader->Read(&piece)) {
  }
  return {reader->Finish(), serving};
}

TEST_F(TopologyFailoverTest, AReplicaKilledMidStreamLosesNoFinishedTurn) {
  std::vector<bool> alive(topology_->replicas.size(), true);
  auto nginx = topology_->ThroughNginx();
  auto session = CreateSession(*nginx, "ROMEO:\n");
  ASSERT_TRUE(session.ok()) << session.status();
  const std::string id = session->id(), alone = ReferenceSession("ROMEO:\n");
  auto reference = reference_->Stub();
  const TurnResult finished = MustTurn(*nginx, id, "", 3);
  EXPECT_EQ(finished.text, MustTurn(*reference, alone, "", 3).text);

  // Through nginx. nginx has sent the response headers by then, so it can
  // only reset the HTTP/2 stream: gRPC reports that as INTERNAL "RST_STREAM
  // with error code 2" rather than the UNAVAILABLE a direct client sees.
  auto [cut, killed] = KillMidStream(*nginx, id, *topology_, alive);
  ASSERT_GE(killed, 0) << cut.error_message();
  EXPECT_TRUE(cut.error_code() == grpc::StatusCode::UNAVAILABLE ||
              (cut.error_code() == grpc::StatusCode::INTERNAL &&
               cut.error_message().find("RST_STREAM") != std::string::npos))
      << cut.error_code() << ": " << cut.error_message();

  // Retried through nginx: another replica continues from the last finished
  // turn, as if the cut turn never happened.
  std::vector<grpc::StatusCode> seen;
  GenerateOutcome retried =
      TurnWithRetries(*nginx, MakeRequest("\nJULIET:\n", id, 24, 9), absl::Seconds(30), &seen);
  ASSERT_TRUE(retried.status.ok()) << retried.status.error_message();
  TurnResult want = MustTurn(*reference, alone, "\nJULIET:\n", 9);
  EXPECT_EQ(retried.text, want.text);
  EXPECT_EQ(retried.finished.position(), want.position);

  // Directly on the replica now holding it: the client sees UNAVAILABLE.
  int holder = -1;
  for (size_t i = 0; i < alive.size(); ++i) {
    if (alive[i]) holder = static_cast<int>(i);
  }
  auto direct = topology_->Direct(holder);
  auto [direct_cut, direct_killed] = KillMidStream(*direct, id, *topology_, alive);
  ASSERT_EQ(direct_killed, holder) << direct_cut.error_message();
  EXPECT_EQ(direct_cut.error_code(), grpc::StatusCode::UNAVAILABLE) << direct_cut.error_message();

  // The last replica standing continues it, again from the last finished turn.
  retried = TurnWithRetries(*nginx, MakeRequest("\nROMEO:\n", id, 24, 10), absl::Seconds(30),
                            &seen);
  ASSERT_TRUE(retried.status.ok()) << retried.status.error_message();
  want = MustTurn(*reference, alone, "\nROMEO:\n", 10);
  EXPECT_EQ(retried.text, want.text);
  EXPECT_EQ(retried.finished.position(), want.position);
  std::cerr << "failed attempts before the session moved on: " << seen.size() << "\n";
}

TEST_F(TopologyTest, TwoClientsOnTwoReplicasApplyEveryTurnOnceInSomeOrder) {
  auto created = CreateSession(*topology_->Direct(0), "ROMEO:\n");
  ASSERT_TRUE(created.ok()) << created.status();
  const std::string id = created->id();
  constexpr int kTurnsEach = 8;
  struct Applied {
    int64_t position;
    std::string prompt;
    uint64_t seed;
    std::string text;
  };
  std::vector<Applied> applied[2];
  int conflicts[2] = {0, 0};
  std::vector<std::thread> clients;
  for (int c = 0; c < 2; ++c) {
    clients.emplace_back([&, c] {
      auto stub = topology_->Direct(c);  // each client on its own replica
      for (int k = 0; k < kTurnsEach; ++k) {
        const std::string prompt = absl::StrCat("\n[", c, "-", k, "] ");
        const uint64_t seed = 100 * (c + 1) + k;
        while (true) {
          GenerateOutcome outcome = RunGenerate(*stub, MakeRequest(prompt, id, 6, seed));
          if (outcome.status.ok()) {
            applied[c].push_back({outcome.finished.position(), prompt, seed, outcome.text});
            break;
          }
          const grpc::StatusCode code = outcome.status.error_code();
          // The other replica holds the session's lease (ABORTED), or this
          // replica still runs the other client's turn (FAILED_PRECONDITION).
          ASSERT_TRUE(code == grpc::StatusCode::ABORTED ||
                      code == grpc::StatusCode::FAILED_PRECONDITION)
              << code << ": " << outcome.status.error_message();
          ++conflicts[c];
          absl::SleepFor(absl::Milliseconds(2 + (k * 7 + c * 3) % 9));
        }
      }
    });
  }
  for (auto& client : clients) client.join();
  std::vector<Applied> order = applied[0];
  order.insert(order.end(), applied[1].begin(), applied[1].end());
  ASSERT_EQ(order.size(), 2u * kTurnsEach);
  // Every turn reports where it left the session: that is the order they
  // were applied in. Replayed in that order on one server, each turn must
  // say exactly what it said: none lost, none applied twice, none interleaved.
  std::sort(order.begin(), order.end(),
            [](const Applied& a, const Applied& b) { return a.position < b.position; });
  const std::string alone = ReferenceSession("ROMEO:\n");
  auto reference = reference_->Stub();
  for (size_t i = 0; i < order.size(); ++i) {
    if (i > 0) ASSERT_LT(order[i - 1].position, order[i].position);
    const TurnResult want = MustTurn(*reference, alone, order[i].prompt, order[i].seed, 6);
    EXPECT_EQ(order[i].text, want.text) << "turn " << i << " " << order[i].prompt;
    EXPECT_EQ(order[i].position, want.position) << "turn " << i;
  }
  grpc::ClientContext context;
  v1::GetSessionRequest get;
  get.set_session_id(id);
  v1::Session final_state;
  ASSERT_TRUE(topology_->Direct(2)->GetSession(&context, get, &final_state).ok());
  EXPECT_EQ(final_state.position(), order.back().position);
  std::cerr << "conflicts retried: " << conflicts[0] << " + " << conflicts[1] << "\n";
}

nlohmann::json CompletionBody(const std::string& prompt, uint64_t seed, int max_tokens) {
  // As MakeRequest: the same sampling as the reference's gRPC turns.
  return {{"prompt", prompt},
          {"max_tokens", max_tokens},
          {"temperature", 0.8},
          {"seed", seed},
          {"ignore_eos", true}};
}

// linserve_generated_tokens_total of each replica.
std::vector<double> GeneratedTokens(const Topology& topology) {
  std::vector<double> counts;
  for (const Replica& replica : topology.replicas) {
    auto metrics = ScrapeMetrics(replica.metrics_port);
    counts.push_back(metrics.ok() ? MetricValue(*metrics, "linserve_generated_tokens_total") : -1);
  }
  return counts;
}

// The HTTP API through nginx's HTTP port: a session made by one completion
// and continued by the next ones with only the new text, its id in the
// x-session-id header that nginx hashes, answers as one server does over
// gRPC; the continued calls stay on one replica, and a streamed one arrives
// event by event as it is generated.
TEST_F(TopologyTest, HttpCompletionsThroughNginxContinueASessionOnOneReplica) {
  HttpTestClient nginx(topology_->nginx_http_port);
  auto reference = reference_->Stub();
  auto alone = CreateSession(*reference);
  ASSERT_TRUE(alone.ok()) << alone.status();

  nlohmann::json first_request = CompletionBody("ROMEO:\n", 3, 24);
  first_request["session"] = "new";
  const HttpReply first = nginx.Post("/v1/completions", first_request);
  ASSERT_EQ(first.status, 200) << httplib::to_string(first.error) << " " << first.body;
  const std::string id = first.json.value("session_id", "");
  ASSERT_FALSE(id.empty()) << first.body;
  EXPECT_EQ(Header(first, "x-session-id"), id);
  TurnResult want = MustTurn(*reference, alone->id(), "ROMEO:\n", 3);
  EXPECT_EQ(CompletionText(first), want.text);
  EXPECT_EQ(first.json.value("session_position", int64_t{-1}), want.position);

  const std::vector<double> before = GeneratedTokens(*topology_);
  const HttpReply second =
      nginx.Post("/v1/completions", CompletionBody("\nJULIET:\n", 7, 24), {{"x-session-id", id}});
  ASSERT_EQ(second.status, 200) << httplib::to_string(second.error) << " " << second.body;
  EXPECT_EQ(second.json.value("session_id", ""), id);
  EXPECT_EQ(Header(second, "x-session-id"), id);
  const int64_t previous = want.position;
  want = MustTurn(*reference, alone->id(), "\nJULIET:\n", 7);
  EXPECT_EQ(CompletionText(second), want.text);
  EXPECT_EQ(second.json.value("session_position", int64_t{-1}), want.position);
  EXPECT_GT(want.position, previous);

  nlohmann::json streamed_request = CompletionBody("\nROMEO:\n", 11, 48);
  streamed_request["stream"] = true;
  std::vector<absl::Time> arrivals;
  const HttpReply streamed = nginx.Stream("/v1/completions", streamed_request,
                                          {{"x-session-id", id}}, [&](const nlohmann::json&) {
                                            arrivals.push_back(absl::Now());
                                            return true;
                                          });
  ASSERT_EQ(streamed.status, 200) << httplib::to_string(streamed.error) << " " << streamed.body;
  EXPECT_EQ(Header(streamed, "x-session-id"), id);
  EXPECT_TRUE(streamed.done) << "no data: [DONE]";
  ASSERT_FALSE(streamed.events.empty());
  int64_t position = -1;
  for (const nlohmann::json& chunk : streamed.events) {
    EXPECT_EQ(chunk.value("session_id", ""), id) << chunk.dump();
    position = chunk.value("session_position", position);
  }
  want = MustTurn(*reference, alone->id(), "\nROMEO:\n", 11, 48);
  EXPECT_EQ(CompletionText(streamed), want.text);
  EXPECT_EQ(position, want.position);
  // Events that came after a pause (in a read of their own): passed on as
  // they were made, 48 tokens give dozens; held back to the end of the
  // answer by any hop, none.
  int apart = 0;
  for (size_t i = 1; i < arrivals.size(); ++i) {
    if (arrivals[i] - arrivals[i - 1] > absl::Microseconds(100)) ++apart;
  }
  std::cerr << "streamed through nginx: " << streamed.events.size() << " events, " << apart
            << " of them apart, over " << absl::FormatDuration(arrivals.back() - arrivals.front())
            << "\n";
  EXPECT_GE(apart, 4) << "the stream arrived all at once";

  // Both continued calls on one replica: it generated all 72 tokens.
  std::vector<double> grown;
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  do {
    const std::vector<double> after = GeneratedTokens(*topology_);
    grown.clear();
    for (size_t r = 0; r < after.size(); ++r) grown.push_back(after[r] - before[r]);
    if (*std::max_element(grown.begin(), grown.end()) == 72) break;
    absl::SleepFor(absl::Milliseconds(100));
  } while (absl::Now() < deadline);
  std::sort(grown.begin(), grown.end());
  EXPECT_EQ(grown, (std::vector<double>{0, 0, 72})) << "generated tokens per replica";
}

// nginx passes request bodies on as they are (it decodes none, and takes up
// to 8 MiB): the replicas' own limits must refuse what gets through, and
// nginx must hand their answer back rather than a 502.
TEST_F(TopologyTest, AGzipBombAndAnOversizedChunkedBodyThroughNginxAreRefusedByTheReplicas) {
  const std::string json_head =
      "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n";
  const std::string bomb = GzipRepeated(std::string(1 << 20, '\0'), 512);  // 512 MiB inflated
  RawConnection gzip(topology_->nginx_http_port);
  gzip.Send(Request(json_head + "Content-Encoding: gzip\r\n", bomb));
  const std::string refused = gzip.ReadResponse();
  EXPECT_EQ(StatusOf(refused), 415) << refused;
  EXPECT_NE(refused.find("Content-Encoding"), std::string::npos) << refused;

  // 2 MiB in chunks: under nginx's 8 MiB, over linserve's 1 MiB.
  RawConnection chunked(topology_->nginx_http_port);
  chunked.Send(json_head + "Transfer-Encoding: chunked\r\n\r\n");
  const std::string chunk =
      absl::StrCat(absl::Hex(1 << 16), "\r\n", std::string(1 << 16, 'a'), "\r\n");
  for (int i = 0; i < 32; ++i) chunked.Send(chunk);
  chunked.Send("0\r\n\r\n");
  const std::string too_large = chunked.ReadResponse();
  EXPECT_EQ(StatusOf(too_large), 413) << too_large;
  EXPECT_NE(too_large.find("--max_http_body_bytes"), std::string::npos) << too_large;

  HttpTestClient nginx(topology_->nginx_http_port);
  const HttpReply served = nginx.Post("/v1/completions", CompletionBody("ROMEO:\n", 5, 2));
  EXPECT_EQ(served.status, 200) << served.body;
}

// The replicas' own sum of `series` (a line of their /metrics, labels
// included), read directly; -1 when one does not answer.
double SumOverReplicas(const Topology& topology, const std::string& series) {
  double sum = 0;
  for (const Replica& replica : topology.replicas) {
    auto metrics = ScrapeMetrics(replica.metrics_port);
    if (!metrics.ok()) return -1;
    sum += MetricValue(*metrics, series);
  }
  return sum;
}

// Waits until Prometheus's `promql` equals what the replicas report for
// `series` now (it has scraped every replica since their last change); the
// value it agreed on.
absl::StatusOr<double> ScrapedUpToNow(const Topology& topology, const std::string& promql,
                                      const std::string& series) {
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  absl::StatusOr<double> seen = 0;
  double direct = -1;
  while (absl::Now() < deadline) {
    direct = SumOverReplicas(topology, series);
    seen = topology.Query(promql);
    if (seen.ok() && direct >= 0 && *seen == direct) return direct;
    absl::SleepFor(absl::Milliseconds(250));
  }
  if (!seen.ok()) return seen.status();
  return absl::DeadlineExceededError(absl::StrCat("Prometheus has ", *seen, " for ", promql,
                                                  ", the replicas ", direct));
}

TEST_F(TopologyTest, PrometheusScrapesEveryReplicaAndSeesTheTraffic) {
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  absl::StatusOr<double> up = 0;
  while (absl::Now() < deadline) {
    up = topology_->Query("sum(up{job=\"linserve\"})");
    if (up.ok() && *up == 3) break;
    absl::SleepFor(absl::Milliseconds(250));
  }
  ASSERT_TRUE(up.ok()) << up.status();
  EXPECT_EQ(*up, 3) << "replicas Prometheus scrapes successfully";

  // The other tests of the suite may have run first: what Prometheus sees
  // now is the baseline.
  const std::string tokens_query = "sum(linserve_generated_tokens_total{job=\"linserve\"})";
  const std::string tokens_series = "linserve_generated_tokens_total";
  const std::string ok_query =
      "sum(linserve_requests_total{job=\"linserve\",method=\"Generate\",code=\"OK\"})";
  const std::string ok_series =
      "linserve_requests_total{code=\"OK\",method=\"Generate\",protocol=\"grpc\"}";
  absl::StatusOr<double> tokens_before = ScrapedUpToNow(*topology_, tokens_query, tokens_series);
  ASSERT_TRUE(tokens_before.ok()) << tokens_before.status();
  absl::StatusOr<double> ok_before = ScrapedUpToNow(*topology_, ok_query, ok_series);
  ASSERT_TRUE(ok_before.ok()) << ok_before.status();

  int64_t sent = 0;
  for (size_t r = 0; r < topology_->replicas.size(); ++r) {
    auto stub = topology_->Direct(static_cast<int>(r));
    for (int i = 0; i < 3; ++i) {
      v1::GenerateRequest request = MakeRequest("ROMEO:", "", 20 + 10 * i, r * 10 + i + 1);
      request.set_ignore_eos(true);
      GenerateOutcome outcome = RunGenerate(*stub, request);
      ASSERT_TRUE(outcome.status.ok()) << outcome.status.error_message();
      sent += outcome.finished.usage().generated_tokens();
    }
  }
  ASSERT_EQ(sent, 3 * (20 + 30 + 40));
  absl::StatusOr<double> seen = 0;
  const absl::Time scraped_by = absl::Now() + absl::Seconds(30);
  while (absl::Now() < scraped_by) {
    seen = topology_->Query(tokens_query);
    if (seen.ok() && *seen >= *tokens_before + sent) break;
    absl::SleepFor(absl::Milliseconds(250));
  }
  ASSERT_TRUE(seen.ok()) << seen.status();
  // Warm-up decodes are not requests and are not counted: exactly what was sent.
  EXPECT_EQ(*seen - *tokens_before, static_cast<double>(sent));
  absl::StatusOr<double> ok_requests = ScrapedUpToNow(*topology_, ok_query, ok_series);
  ASSERT_TRUE(ok_requests.ok()) << ok_requests.status();
  EXPECT_EQ(*ok_requests - *ok_before, 9);
}

}  // namespace
}  // namespace linserve
