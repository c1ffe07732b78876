// The HTTP port against an attacker: a real `linserve` process with its
// default limits, and raw sockets that send what no polite client would.
// Each attack is answered or cut off, the server's resident memory grows by
// less than 64 MiB, and the server then serves a normal request.

#include <gtest/gtest.h>
#include <sys/resource.h>

#include <algorithm>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "tests/server/e2e_helpers.h"
#include "tests/server/http_client.h"
#include "tests/server/raw_http.h"
#include "tests/server/server_process.h"

namespace linserve {
namespace {

using Json = nlohmann::json;

constexpr int64_t kMaxGrowth = 64 << 20;
constexpr int64_t kMaxStateBytes = 1 << 20;  // a session import's body (the state is 538 KB)

// A request that must never run: it is counted under "Models", which no
// other request of these tests calls.
const std::string kSmuggled = "GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n";

// A streamed completion that cannot end by itself (4096 tokens, EOS
// ignored): a reader that never reads holds its connection open.
std::string EndlessStream() {
  return Request(
      "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n",
      Json{{"prompt", "ROMEO:"}, {"max_tokens", 4096}, {"ignore_eos", true}, {"stream", true}}
          .dump());
}

// Sends `head` and then 16 MiB of chunked body (or until the server closes),
// and returns what the server answered.
std::string SendSixteenMiBChunked(int port, const std::string& head) {
  RawConnection connection(port);
  EXPECT_TRUE(connection.connected());
  connection.Send(head);
  const std::string chunk =
      absl::StrCat(absl::Hex(1 << 16), "\r\n", std::string(1 << 16, 'a'), "\r\n");
  // 16 MiB, or until the server closes: past the limit it only drops what
  // still comes, for a moment, so that the client can read its answer.
  for (int sent = 0; sent < 256 && connection.Send(chunk); ++sent) {
  }
  connection.Send("0\r\n\r\n");
  return connection.ReadUntilClose();
}

class HttpAttackTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto server = ServerProcess::Start({"--model=" + DefaultModelDir(),
                                        "--store_dir=" + FreshDir("http-attack-store"),
                                        "--health_listen=127.0.0.1:0",
                                        absl::StrCat("--max_state_bytes=", kMaxStateBytes)});
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = server->release();
  }
  static void TearDownTestSuite() { delete server_; }

  void SetUp() override { resident_before_ = ResidentBytes(server_->pid()); }

  // After every attack: bounded memory, and a normal request still served.
  void TearDown() override {
    const int64_t growth = ResidentBytes(server_->pid()) - resident_before_;
    std::cerr << "resident memory grew by " << growth / 1024 << " KiB\n";
    EXPECT_LT(growth, kMaxGrowth);
    HttpTestClient http(server_->http_port());
    const HttpReply reply =
        http.Post("/v1/completions", Json{{"prompt", "ROMEO:"}, {"max_tokens", 2}});
    EXPECT_EQ(reply.status, 200) << reply.body;
  }

  static int port() { return server_->http_port(); }

  static ServerProcess* server_;
  int64_t resident_before_ = 0;
};
ServerProcess* HttpAttackTest::server_ = nullptr;

// Each refusal either reads the body it refused or closes the connection:
// the complete request inside the body is never parsed as one.
TEST_F(HttpAttackTest, ARefusedRequestsBodyNeverRunsAsARequest) {
  const std::string json_head =
      "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n";
  struct Case {
    std::string name;
    std::string bytes;
    int status;
  };
  const std::vector<Case> cases = {
      {"403 origin", Request(json_head + "Origin: https://evil.example\r\n", kSmuggled), 403},
      {"431 headers",
       absl::StrCat("GET /health HTTP/1.1\r\nHost: x\r\nX-Big: ", std::string(20000, 'a'),
                    "\r\n\r\n", kSmuggled),
       431},
      {"431 header count",
       absl::StrCat(
           "GET /health HTTP/1.1\r\nHost: x\r\n",
           [] {
             std::string fields;
             for (int i = 0; i < 100; ++i) absl::StrAppend(&fields, "X-", i, ": a\r\n");
             return fields;
           }(),
           "\r\n", kSmuggled),
       431},
      {"OPTIONS", Request("OPTIONS /v1/completions HTTP/1.1\r\nHost: x\r\n", kSmuggled), 404},
      {"GET with a body", Request("GET /health HTTP/1.1\r\nHost: x\r\n", kSmuggled), 200},
      {"GET with a chunked body",
       absl::StrCat("GET /health HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n",
                    absl::Hex(kSmuggled.size()), "\r\n", kSmuggled, "\r\n0\r\n\r\n"),
       200},
      {"415 gzip", Request(json_head + "Content-Encoding: gzip\r\n", kSmuggled), 415},
      {"411 no length", absl::StrCat(json_head, "\r\n", kSmuggled), 411},
      {"400 length and chunked",
       absl::StrCat(json_head, "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n",
                    absl::Hex(kSmuggled.size()), "\r\n", kSmuggled, "\r\n0\r\n\r\n"),
       400},
      {"501 gzip transfer coding",
       absl::StrCat(json_head, "Transfer-Encoding: gzip, chunked\r\n\r\n",
                    absl::Hex(kSmuggled.size()), "\r\n", kSmuggled, "\r\n0\r\n\r\n"),
       501},
  };
  for (const Case& c : cases) {
    RawConnection connection(port());
    ASSERT_TRUE(connection.connected());
    connection.Send(c.bytes);
    connection.ShutdownWrite();
    const std::string answer = connection.ReadUntilClose();
    EXPECT_EQ(StatusOf(answer), c.status) << c.name << ": " << answer.substr(0, 300);
    EXPECT_EQ(CountResponses(answer), 1) << c.name << ": " << answer;
  }
  auto metrics = ScrapeMetrics(server_->metrics_port());
  ASSERT_TRUE(metrics.ok());
  EXPECT_EQ(MetricValue(*metrics,
                        "linserve_requests_total{code=\"OK\",method=\"Models\",protocol=\"http\"}"),
            0);
}

TEST_F(HttpAttackTest, SixteenMiBChunkedIsCutAtTheBodyLimit) {
  const std::string answer = SendSixteenMiBChunked(
      port(),
      "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
      "Transfer-Encoding: chunked\r\n\r\n");
  // Answered 413, or closed before the client could read it.
  if (!answer.empty()) {
    EXPECT_EQ(StatusOf(answer), 413) << answer.substr(0, 300);
    EXPECT_NE(answer.find("--max_http_body_bytes"), std::string::npos) << answer;
    EXPECT_EQ(CountResponses(answer), 1) << answer;
  }
}

// A session import's body has its own bound, --max_state_bytes: 16 MiB sent
// chunked (no length to refuse from the head) is cut there, never buffered.
TEST_F(HttpAttackTest, SixteenMiBChunkedImportIsCutAtTheStateLimit) {
  const std::string answer = SendSixteenMiBChunked(
      port(),
      "POST /v1/sessions/import HTTP/1.1\r\nHost: x\r\nContent-Type: application/octet-stream\r\n"
      "Transfer-Encoding: chunked\r\n\r\n");
  if (!answer.empty()) {
    EXPECT_EQ(StatusOf(answer), 413) << answer.substr(0, 300);
    EXPECT_NE(answer.find("--max_state_bytes"), std::string::npos) << answer;
    EXPECT_EQ(CountResponses(answer), 1) << answer;
  }
}

TEST_F(HttpAttackTest, AGzipBombIsRefusedBeforeItsBodyIsRead) {
  const std::string bomb = GzipRepeated(std::string(1 << 20, '\0'), 512);  // 512 MiB inflated
  ASSERT_LT(bomb.size(), 1u << 20);
  RawConnection connection(port());
  connection.Send(
      Request("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              "Content-Encoding: gzip\r\n",
              bomb));
  const std::string answer = connection.ReadResponse();
  EXPECT_EQ(StatusOf(answer), 415) << answer;
  EXPECT_NE(answer.find("Content-Encoding"), std::string::npos) << answer;
}

TEST_F(HttpAttackTest, SixtyFourMiBOfHeadersAreCutAtTheHeaderLimit) {
  RawConnection connection(port());
  connection.Send("GET /health HTTP/1.1\r\nHost: x\r\n");
  std::string lines;
  for (int i = 0; i < 1024; ++i)
    absl::StrAppend(&lines, "X-Pad-", i, ": ", std::string(50, 'a'), "\r\n");
  int64_t sent = 0;
  while (sent < (64 << 20) && connection.Send(lines)) sent += static_cast<int64_t>(lines.size());
  const std::string answer = connection.ReadUntilClose();
  if (!answer.empty()) EXPECT_EQ(StatusOf(answer), 431) << answer.substr(0, 300);
  EXPECT_LT(sent, 64 << 20) << "the server took all 64 MiB of headers";
}

// Clients that open a request and never finish its head hold a socket each
// and no thread: probes are answered at once on both ports.
TEST_F(HttpAttackTest, ThreeHundredHalfOpenRequestsLeaveHealthAnswered) {
  std::vector<std::unique_ptr<RawConnection>> stuck;
  for (int i = 0; i < 300; ++i) {
    stuck.push_back(std::make_unique<RawConnection>(port()));
    ASSERT_TRUE(stuck.back()->connected()) << i;
    stuck.back()->Send("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n");
  }
  for (const int health_port : {port(), server_->health_port()}) {
    RawConnection probe(health_port, /*read_timeout_seconds=*/2);  // Kubernetes' probe timeout
    probe.Send("GET /health HTTP/1.1\r\nHost: x\r\n\r\n");
    const std::string answer = probe.ReadResponse();
    EXPECT_EQ(StatusOf(answer), 200) << "port " << health_port << ": " << answer;
  }
}

// Streams whose readers never read pause their turns and hold their sockets;
// the probes are still answered.
TEST_F(HttpAttackTest, SlowReadersOfStreamsLeaveHealthAnswered) {
  std::vector<std::unique_ptr<RawConnection>> readers;
  for (int i = 0; i < 64; ++i) {
    readers.push_back(std::make_unique<RawConnection>(port()));
    readers.back()->Send(EndlessStream());
  }
  for (const int health_port : {port(), server_->health_port()}) {
    RawConnection probe(health_port, /*read_timeout_seconds=*/2);
    probe.Send("GET /health HTTP/1.1\r\nHost: x\r\n\r\n");
    const std::string answer = probe.ReadResponse();
    EXPECT_EQ(StatusOf(answer), 200) << "port " << health_port << ": " << answer;
  }
}

TEST_F(HttpAttackTest, PipelinedRequestsAreAnsweredInOrder) {
  RawConnection connection(port());
  connection.Send(absl::StrCat("GET /health HTTP/1.1\r\nHost: x\r\n\r\n",
                               "GET /nowhere HTTP/1.1\r\nHost: x\r\n\r\n",
                               "GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"));
  EXPECT_EQ(StatusOf(connection.ReadResponse()), 200);
  EXPECT_EQ(StatusOf(connection.ReadResponse()), 404);
  EXPECT_EQ(StatusOf(connection.ReadResponse()), 200);
  bool closed = false;
  EXPECT_EQ(connection.ReadUntilClose(&closed), "");
  EXPECT_TRUE(closed);
}

// Ending the sending side after a request (shutdown(SHUT_WR), as `nc -N`
// does) is not leaving: the answer still comes, every time, then the close.
TEST_F(HttpAttackTest, AClientThatEndsItsSendingSideStillGetsItsAnswer) {
  for (int i = 0; i < 50; ++i) {
    RawConnection connection(port());
    connection.Send("GET /health HTTP/1.1\r\nHost: x\r\n\r\n");
    connection.ShutdownWrite();
    bool closed = false;
    const std::string answer = connection.ReadUntilClose(&closed);
    ASSERT_EQ(StatusOf(answer), 200) << i << ": " << answer;
    EXPECT_TRUE(closed);
  }
}

TEST_F(HttpAttackTest, AChunkedBodyWithinTheLimitAndExpectContinueAreServed) {
  const std::string body = Json{{"prompt", "ROMEO:"}, {"max_tokens", 2}}.dump();
  RawConnection chunked(port());
  chunked.Send(
      absl::StrCat("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                   "Transfer-Encoding: chunked\r\n\r\n",
                   absl::Hex(5), "\r\n", body.substr(0, 5), "\r\n", absl::Hex(body.size() - 5),
                   "\r\n", body.substr(5), "\r\n0\r\n\r\n"));
  const std::string answer = chunked.ReadResponse();
  EXPECT_EQ(StatusOf(answer), 200) << answer;

  RawConnection expect(port());
  expect.Send(
      absl::StrCat("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                   "Expect: 100-continue\r\nContent-Length: ",
                   body.size(), "\r\n\r\n"));
  EXPECT_EQ(StatusOf(expect.ReadResponse()), 100);
  expect.Send(body);
  EXPECT_EQ(StatusOf(expect.ReadResponse()), 200);
}

// Short deadlines and a small connection cap, each its own flag.
class HttpDeadlineTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto server = ServerProcess::Start(
        {"--model=" + DefaultModelDir(), "--store_dir=" + FreshDir("http-deadline-store"),
         "--health_listen=127.0.0.1:0", "--http_head_timeout_seconds=1",
         "--http_keepalive_seconds=1", "--http_body_timeout_seconds=1",
         "--http_max_connections=8"});
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = server->release();
  }
  static void TearDownTestSuite() { delete server_; }

  static ServerProcess* server_;
};
ServerProcess* HttpDeadlineTest::server_ = nullptr;

// Decided by events: the client would need 100 s to send its head; the
// server closes long before.
TEST_F(HttpDeadlineTest, ATrickledHeadIsCutOff) {
  RawConnection connection(server_->http_port());
  const std::string head =
      "GET /health HTTP/1.1\r\nHost: x\r\nX-Slow: " + std::string(1000, 'a') + "\r\n\r\n";
  size_t sent = 0;
  while (sent < head.size() && connection.Send(head.substr(sent, 1))) {
    ++sent;
    absl::SleepFor(absl::Milliseconds(100));
  }
  EXPECT_LT(sent, head.size());
}

TEST_F(HttpDeadlineTest, ATrickledBodyAndAnIdleKeepAliveAreClosed) {
  RawConnection trickle(server_->http_port());
  trickle.Send("POST /tokenize HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{");
  bool closed = false;
  EXPECT_EQ(trickle.ReadUntilClose(&closed), "");
  EXPECT_TRUE(closed);
  // The same for a session import's state file.
  RawConnection trickled_import(server_->http_port());
  trickled_import.Send(
      "POST /v1/sessions/import HTTP/1.1\r\nHost: x\r\nContent-Type: application/octet-stream\r\n"
      "Content-Length: 1000\r\n\r\nL");
  closed = false;
  EXPECT_EQ(trickled_import.ReadUntilClose(&closed), "");
  EXPECT_TRUE(closed);

  RawConnection idle(server_->http_port());
  idle.Send("GET /health HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(StatusOf(idle.ReadResponse()), 200);
  EXPECT_EQ(idle.ReadUntilClose(&closed), "");
  EXPECT_TRUE(closed);
}

TEST_F(HttpDeadlineTest, AConnectionOverTheCapIsClosedAndTheHealthPortStillAnswers) {
  // Eight streams nobody reads hold the eight places (their turns pause).
  std::vector<std::unique_ptr<RawConnection>> held;
  for (int i = 0; i < 8; ++i) {
    held.push_back(std::make_unique<RawConnection>(server_->http_port()));
    held.back()->Send(EndlessStream());
    // Its stream has begun: the connection is counted.
    EXPECT_EQ(StatusOf(held.back()->ReadResponse()), 200);
  }
  RawConnection over(server_->http_port());
  over.Send("GET /health HTTP/1.1\r\nHost: x\r\n\r\n");
  bool closed = false;
  EXPECT_EQ(over.ReadUntilClose(&closed), "");
  EXPECT_TRUE(closed);
  auto metrics = ScrapeMetrics(server_->metrics_port());
  ASSERT_TRUE(metrics.ok());
  EXPECT_GE(MetricValue(*metrics, "linserve_rejections_total{reason=\"http_connections\"}"), 1);

  RawConnection probe(server_->health_port(), /*read_timeout_seconds=*/2);
  probe.Send("GET /health HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(StatusOf(probe.ReadResponse()), 200);
}

int Threads(pid_t pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("Threads:", 0) == 0) return std::stoi(line.substr(8));
  }
  return -1;
}

// Kept-alive connections are sockets and buffers, not threads: 1,000 of
// them idle cost no thread each and well under 100 MiB.
TEST(HttpIdleConnectionsTest, AThousandIdleKeepAliveConnectionsHoldNoThreadEach) {
  // Both processes need a descriptor for each (the server inherits this).
  rlimit files{};
  getrlimit(RLIMIT_NOFILE, &files);
  files.rlim_cur = std::min<rlim_t>(files.rlim_max, 4096);
  setrlimit(RLIMIT_NOFILE, &files);
  ASSERT_GE(files.rlim_cur, 2200u) << "too few file descriptors allowed";
  auto server = ServerProcess::Start({"--model=" + DefaultModelDir(),
                                      "--store_dir=" + FreshDir("http-idle-store"),
                                      "--http_keepalive_seconds=600"});
  ASSERT_TRUE(server.ok()) << server.status();
  const pid_t pid = (*server)->pid();
  const int threads_before = Threads(pid);
  const int64_t resident_before = ResidentBytes(pid);
  std::vector<std::unique_ptr<RawConnection>> idle;
  for (int i = 0; i < 1000; ++i) {
    idle.push_back(std::make_unique<RawConnection>((*server)->http_port()));
    idle.back()->Send("GET /health HTTP/1.1\r\nHost: x\r\n\r\n");
    ASSERT_EQ(StatusOf(idle.back()->ReadResponse()), 200) << i;  // served, and kept open
  }
  const int threads = Threads(pid);
  const int64_t growth = ResidentBytes(pid) - resident_before;
  std::cerr << "1000 idle keep-alive connections: threads " << threads_before << " -> " << threads
            << ", resident memory +" << growth / 1024 << " KiB\n";
  EXPECT_EQ(threads, threads_before);
  EXPECT_LT(growth, 100 << 20);
  // Still open: each answers again.
  for (int i = 0; i < 1000; i += 100) {
    idle[i]->Send("GET /health HTTP/1.1\r\nHost: x\r\n\r\n");
    EXPECT_EQ(StatusOf(idle[i]->ReadResponse()), 200) << i;
  }
}

// A client that leaves before its answer: a non-streamed turn is cut too,
// and a chat turn that finished anyway keeps its session's turn ends.
class HttpClientGoneTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto server = ServerProcess::Start(
        {"--model=" + DefaultModelDir(), "--store_dir=" + FreshDir("http-gone-store")});
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
  }

  // The `n`th turn's log line (from 1), once it is written.
  Json GenerateLine(size_t n) {
    const absl::Time deadline = absl::Now() + absl::Seconds(60);
    while (absl::Now() < deadline) {
      std::vector<Json> turns;
      for (const std::string& line : server_->Log()) {
        if (line.find("\"event\":\"generate\"") != std::string::npos) {
          turns.push_back(Json::parse(line));
        }
      }
      if (turns.size() >= n) return turns[n - 1];
      absl::SleepFor(absl::Milliseconds(20));
    }
    ADD_FAILURE() << "no log line for turn " << n;
    return Json();
  }

  std::unique_ptr<ServerProcess> server_;
};

// Decided by events: the turn cannot end by itself (4096 tokens, EOS
// ignored) and nothing is ever written to the client before it leaves.
TEST_F(HttpClientGoneTest, ANonStreamedTurnWhoseClientLeftIsCut) {
  {
    RawConnection client(server_->http_port());
    client.Send(
        Request("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n",
                Json{{"prompt", "ROMEO:"}, {"max_tokens", 4096}, {"ignore_eos", true}}.dump()));
  }
  const Json turn = GenerateLine(1);
  EXPECT_EQ(turn["code"], "CANCELLED");
  EXPECT_EQ(turn["protocol"], "http");
  if (turn.contains("generated_tokens")) EXPECT_LT(turn["generated_tokens"].get<int>(), 4096);
}

// The chat turn in the middle loses its client. Whether it was cut or
// finished first (the summary in its log line says which), the next turn must equal the stateless
// chat of the history the session really holds: with the middle turn (and its missing turn end
// supplied) when it finished, without it when it was cut.
TEST_F(HttpClientGoneTest, AChatTurnWhoseClientLeftKeepsTheSessionsTurnEnds) {
  HttpTestClient http(server_->http_port());
  const Json u1 = {{"role", "user"}, {"content", "ROMEO:\nShe speaks, yet she says nothing."}};
  const Json u2 = {{"role", "user"}, {"content", "JULIET:\nWhat man art thou?"}};
  const Json u3 = {{"role", "user"}, {"content", "ROMEO:\nBy a name I know not how to tell thee."}};
  auto chat = [](Json messages, int seed) {
    return Json{
        {"messages", std::move(messages)}, {"max_tokens", 8}, {"seed", seed}, {"temperature", 0.8}};
  };
  Json first = chat(Json::array({u1}), 1);
  first["session"] = "new";
  const HttpReply one = http.Post("/v1/chat/completions", first);
  ASSERT_EQ(one.status, 200) << one.body;
  const std::string session = Header(one, "x-session-id");
  const Json a1 = {{"role", "assistant"}, {"content", CompletionText(one)}};

  {
    // The client reads the stream's head, then leaves: the turn has begun,
    // and its few remaining tokens race the server noticing.
    Json two = chat(Json::array({u2}), 2);
    two["stream"] = true;
    RawConnection client(server_->http_port());
    client.Send(Request(absl::StrCat("POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
                                     "Content-Type: application/json\r\nx-session-id: ",
                                     session, "\r\n"),
                        two.dump()));
    EXPECT_EQ(StatusOf(client.ReadResponse()), 200);
  }
  // Logged CANCELLED, or OK when the turn's end reached the connection
  // before the client's leaving did.
  const Json gone = GenerateLine(2);
  const bool finished = gone.contains("finish") && gone["finish"] != "cancelled";
  RecordProperty("middle_turn", finished ? "finished" : "cut");

  const HttpReply three =
      http.Post("/v1/chat/completions", chat(Json::array({u3}), 3), {{"x-session-id", session}});
  ASSERT_EQ(three.status, 200) << three.body;
  Json history = Json::array({u1, a1});
  if (finished) {
    const HttpReply two = http.Post("/v1/chat/completions", chat(Json::array({u1, a1, u2}), 2));
    ASSERT_EQ(two.status, 200) << two.body;
    history.push_back(u2);
    history.push_back({{"role", "assistant"}, {"content", CompletionText(two)}});
  }
  history.push_back(u3);
  const HttpReply expected = http.Post("/v1/chat/completions", chat(history, 3));
  EXPECT_EQ(CompletionText(three), CompletionText(expected))
      << (finished ? "the middle turn finished" : "the middle turn was cut");
}

}  // namespace
}  // namespace linserve
