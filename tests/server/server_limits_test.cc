// End to end: the limits against exhaustion on a real server. Each overflow
// is RESOURCE_EXHAUSTED naming its flag and counted by reason; connections
// whose peer goes silent are closed by keepalive.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <memory>
#include <string>
#include <vector>

#include <grpc/grpc.h>
#include <gtest/gtest.h>

#include "absl/time/clock.h"
#include "tests/server/e2e_helpers.h"
#include "tests/server/server_process.h"

namespace linserve {
namespace {

std::string ModelDir() {
  static const std::string* dir = new std::string(*WriteTinyModel(FreshDir("limits-model"), 11));
  return *dir;
}

double Metric(const ServerProcess& server, const std::string& series) {
  absl::StatusOr<std::string> metrics = ScrapeMetrics(server.metrics_port());
  EXPECT_TRUE(metrics.ok()) << metrics.status();
  return metrics.ok() ? MetricValue(*metrics, series) : -1;
}

// A connection of its own: gRPC shares connections between channels with
// equal arguments unless told not to.

// A Generate whose reader reads the first message and then stops: on a
// NarrowWindowStub its 4,096 tokens cannot all leave, so the stream stays
// open (its turn pauses on the full buffer) until cancelled.
struct HeldStream {
  HeldStream(v1::Linserve::Stub& stub, const std::string& session_id = "") {
    reader = stub.Generate(&context, MakeRequest("hold", session_id, 4096, 7));
    opened = reader->Read(&first);
  }
  grpc::StatusCode Cancel() {
    context.TryCancel();
    v1::GenerateResponse ignored;
    while (reader->Read(&ignored)) {
    }
    return reader->Finish().error_code();
  }
  grpc::ClientContext context;
  std::unique_ptr<grpc::ClientReader<v1::GenerateResponse>> reader;
  v1::GenerateResponse first;
  bool opened = false;
};

TEST(LimitsTest, StoreBytesAreBoundedCountedAtStartAndFreedByDelete) {
  // The size of one state file of this model, from a server without a budget.
  int64_t file_bytes = 0;
  {
    auto probe = ServerProcess::Start(
        {"--model=" + ModelDir(), "--store_dir=" + FreshDir("store-probe"), "--warmup_steps=0"});
    ASSERT_TRUE(probe.ok()) << probe.status();
    auto stub = (*probe)->Stub();
    auto session = CreateSession(*stub);
    ASSERT_TRUE(session.ok());
    auto file = ExportSession(*stub, session->id());
    ASSERT_TRUE(file.ok());
    file_bytes = static_cast<int64_t>(file->size());
  }
  // Room for two sessions and some slack: a third does not fit.
  const int64_t budget = 2 * file_bytes + file_bytes / 2;
  const std::string dir = FreshDir("store-budget");
  const std::vector<std::string> flags = {"--model=" + ModelDir(), "--store_dir=" + dir,
                                          "--warmup_steps=0",
                                          "--max_store_bytes=" + std::to_string(budget)};
  std::string kept;
  {
    auto server = ServerProcess::Start(flags);
    ASSERT_TRUE(server.ok()) << server.status();
    auto stub = (*server)->Stub();
    auto first = CreateSession(*stub);
    auto second = CreateSession(*stub, "a prompt to prefill");
    ASSERT_TRUE(first.ok() && second.ok());
    kept = second->id();
    auto third = CreateSession(*stub);
    EXPECT_EQ(third.status().code(), absl::StatusCode::kResourceExhausted) << third.status();
    EXPECT_NE(third.status().message().find("max_store_bytes = " + std::to_string(budget)),
              std::string::npos)
        << third.status();
    grpc::ClientContext c;
    v1::ForkSessionRequest fork;
    fork.set_session_id(first->id());
    v1::Session forked;
    EXPECT_EQ(stub->ForkSession(&c, fork, &forked).error_code(),
              grpc::StatusCode::RESOURCE_EXHAUSTED);
    // A full store still serves the sessions it holds: a turn replaces a
    // file of the same size.
    GenerateOutcome turn = RunGenerate(*stub, MakeRequest("go on", first->id(), 4, 1));
    EXPECT_TRUE(turn.status.ok()) << turn.status.error_message();
    EXPECT_EQ(Metric(**server, "linserve_rejections_total{reason=\"store_full\"}"), 2);
    // Deleting a session frees its bytes.
    grpc::ClientContext d;
    v1::DeleteSessionRequest del;
    del.set_session_id(first->id());
    v1::DeleteSessionResponse deleted;
    ASSERT_TRUE(stub->DeleteSession(&d, del, &deleted).ok());
    EXPECT_TRUE(CreateSession(*stub).ok());
  }
  // A restarted server counts the files already there: still full.
  auto restarted = ServerProcess::Start(flags);
  ASSERT_TRUE(restarted.ok()) << restarted.status();
  auto stub = (*restarted)->Stub();
  EXPECT_EQ(CreateSession(*stub).status().code(), absl::StatusCode::kResourceExhausted);
  GenerateOutcome turn = RunGenerate(*stub, MakeRequest("more", kept, 4, 2));
  EXPECT_TRUE(turn.status.ok()) << turn.status.error_message();
}

TEST(LimitsTest, WithoutAuthTheTenantQuotaDoesNotApply) {
  // Every client is the "" tenant then: only --max_sessions bounds it.
  auto server = ServerProcess::Start({"--model=" + ModelDir(), "--store_dir=" + FreshDir("quota-off"),
                                      "--warmup_steps=0", "--max_sessions_per_tenant=1",
                                      "--max_sessions=3"});
  ASSERT_TRUE(server.ok()) << server.status();
  auto stub = (*server)->Stub();
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(CreateSession(*stub).ok()) << i;
  auto over = CreateSession(*stub);
  EXPECT_EQ(over.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(over.status().message().find("max_sessions = 3"), std::string::npos);
  EXPECT_EQ(Metric(**server, "linserve_rejections_total{reason=\"session_limit\"}"), 1);
}

TEST(LimitsTest, StreamsPerConnectionWaitAndOpenStreamsPastTheCapAreRefused) {
  auto server = ServerProcess::Start(
      {"--model=" + ModelDir(), "--store_dir=" + FreshDir("streams-store"), "--warmup_steps=0",
       "--max_streams_per_connection=2", "--max_open_streams=3", "--stream_buffer_messages=2"});
  ASSERT_TRUE(server.ok()) << server.status();
  auto a = NarrowWindowStub((*server)->address());
  auto b = NarrowWindowStub((*server)->address());
  auto c = NarrowWindowStub((*server)->address());
  std::vector<std::unique_ptr<HeldStream>> held;
  held.push_back(std::make_unique<HeldStream>(*a));
  held.push_back(std::make_unique<HeldStream>(*a));
  ASSERT_TRUE(held[0]->opened && held[1]->opened);

  // A third stream on the same connection waits for one of the two: the
  // server never sees it, so its deadline passes.
  GenerateOutcome waiting =
      RunGenerate(*a, MakeRequest("wait", "", 2, 1), absl::Milliseconds(1500));
  EXPECT_EQ(waiting.status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED)
      << waiting.status.error_message();
  EXPECT_TRUE(waiting.messages.empty());

  // Another connection may open streams up to the server-wide cap.
  held.push_back(std::make_unique<HeldStream>(*b));
  ASSERT_TRUE(held[2]->opened);
  EXPECT_EQ(Metric(**server, "linserve_open_streams"), 3);
  GenerateOutcome refused = RunGenerate(*c, MakeRequest("one more", "", 2, 1));
  EXPECT_EQ(refused.status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_NE(refused.status.error_message().find("max_open_streams = 3"), std::string::npos)
      << refused.status.error_message();
  auto exported = ExportSession(*c, "0123456789abcdef0123456789abcdef");
  EXPECT_EQ(exported.status().code(), absl::StatusCode::kResourceExhausted) << exported.status();
  EXPECT_EQ(Metric(**server, "linserve_rejections_total{reason=\"open_streams\"}"), 2);

  // Closing a stream gives its place back.
  EXPECT_EQ(held[0]->Cancel(), grpc::StatusCode::CANCELLED);
  bool served = false;
  for (int i = 0; i < 100 && !served; ++i) {
    served = RunGenerate(*c, MakeRequest("now", "", 2, 1)).status.ok();
    if (!served) absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_TRUE(served);
  for (size_t i = 1; i < held.size(); ++i) EXPECT_EQ(held[i]->Cancel(), grpc::StatusCode::CANCELLED);
  double open = -1;
  for (int i = 0; i < 100 && open != 0; ++i) {
    open = Metric(**server, "linserve_open_streams");
    if (open != 0) absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_EQ(open, 0);
}

TEST(LimitsTest, SessionsInMemoryAllBusyIsResourceExhausted) {
  auto server = ServerProcess::Start({"--model=" + ModelDir(),
                                      "--store_dir=" + FreshDir("memory-store"),
                                      "--warmup_steps=0", "--max_sessions_in_memory=1",
                                      "--stream_buffer_messages=2"});
  ASSERT_TRUE(server.ok()) << server.status();
  auto stub = NarrowWindowStub((*server)->address());
  auto busy = CreateSession(*stub, "held");
  ASSERT_TRUE(busy.ok()) << busy.status();
  // The only state in memory is busy with a turn: nothing can spill.
  HeldStream held(*stub, busy->id());
  ASSERT_TRUE(held.opened);
  auto refused = CreateSession(*stub);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(refused.status().message().find("max_sessions_in_memory = 1"), std::string::npos)
      << refused.status();
  EXPECT_EQ(Metric(**server, "linserve_rejections_total{reason=\"sessions_in_memory\"}"), 1);
  EXPECT_EQ(held.Cancel(), grpc::StatusCode::CANCELLED);
  // Once the turn is over the idle state spills and a new session fits.
  bool created = false;
  for (int i = 0; i < 100 && !created; ++i) {
    created = CreateSession(*stub).ok();
    if (!created) absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_TRUE(created);
}

TEST(LimitsTest, MessagesPastMaxMessageBytesAreResourceExhausted) {
  auto server = ServerProcess::Start({"--model=" + ModelDir(),
                                      "--store_dir=" + FreshDir("message-store"),
                                      "--warmup_steps=0", "--max_message_bytes=4096"});
  ASSERT_TRUE(server.ok()) << server.status();
  auto stub = (*server)->Stub();
  GenerateOutcome fits = RunGenerate(*stub, MakeRequest(std::string(4000, 'a'), "", 2, 1));
  EXPECT_TRUE(fits.status.ok()) << fits.status.error_message();
  GenerateOutcome past = RunGenerate(*stub, MakeRequest(std::string(5000, 'a'), "", 2, 1));
  EXPECT_EQ(past.status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  // gRPC itself refuses it before decoding, with both sizes in the message.
  EXPECT_NE(past.status.error_message().find("4096"), std::string::npos)
      << past.status.error_message();
}

// A TCP peer that completes the HTTP/2 connection preface (client preface,
// SETTINGS both ways, acknowledged) and then never writes again. Returns
// how long after it began connecting the server closed the connection, or
// InfiniteDuration when not within `wait`; `pings` counts the PING frames the
// server sent before that.
absl::Duration SilentPeer(int port, absl::Duration wait, int* pings) {
  const absl::Time start = absl::Now();
  const int fd = ConnectLoopback(port);
  if (fd < 0) {
    ADD_FAILURE() << "cannot connect";
    return absl::ZeroDuration();
  }
  // Client preface, then an empty SETTINGS frame (length 0, type 4).
  std::string hello = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
  hello += std::string("\0\0\0\x04\0\0\0\0\0", 9);
  send(fd, hello.data(), hello.size(), MSG_NOSIGNAL);
  // Frames are parsed as they come: 9-byte header (24-bit length, type,
  // flags, stream), then the payload.
  std::string buffer;
  bool acked = false;
  *pings = 0;
  const absl::Time give_up = absl::Now() + wait;
  while (absl::Now() < give_up) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 50) <= 0) continue;
    char chunk[4096];
    const ssize_t n = recv(fd, chunk, sizeof(chunk), 0);
    if (n <= 0) {
      close(fd);
      return absl::Now() - start;
    }
    buffer.append(chunk, static_cast<size_t>(n));
    while (buffer.size() >= 9) {
      const size_t length = (static_cast<uint8_t>(buffer[0]) << 16) |
                            (static_cast<uint8_t>(buffer[1]) << 8) | static_cast<uint8_t>(buffer[2]);
      if (buffer.size() < 9 + length) break;
      const int type = static_cast<uint8_t>(buffer[3]);
      const int flags = static_cast<uint8_t>(buffer[4]);
      if (type == 4 && (flags & 1) == 0 && !acked) {
        // Acknowledge the server's SETTINGS: the preface is complete, and
        // from here on the peer says nothing.
        const std::string ack("\0\0\0\x04\x01\0\0\0\0", 9);
        send(fd, ack.data(), ack.size(), MSG_NOSIGNAL);
        acked = true;
      }
      if (type == 6 && (flags & 1) == 0) ++*pings;
      buffer.erase(0, 9 + length);
    }
  }
  close(fd);
  return absl::InfiniteDuration();
}

TEST(LimitsTest, KeepaliveClosesAConnectionWhosePeerGoesSilent) {
  auto server = ServerProcess::Start({"--model=" + ModelDir(),
                                      "--store_dir=" + FreshDir("keepalive-store"),
                                      "--warmup_steps=0", "--keepalive_time_ms=500",
                                      "--keepalive_timeout_ms=500"});
  ASSERT_TRUE(server.ok()) << server.status();
  int pings = 0;
  // Only a connection that is never closed waits the whole minute.
  const absl::Duration closed_after = SilentPeer((*server)->port(), absl::Seconds(60), &pings);
  // Closed for keepalive: a ping went out first, and the close came no
  // sooner than a ping after 0.5 s of quiet plus its 0.5 s timeout (how much
  // later depends on the machine, so it is not judged). gRPC rounds its
  // timers to its clock's ticks and was seen to close at 999.98 ms, so the
  // floor leaves it 100 ms: an early close would come after no ping at all.
  EXPECT_NE(closed_after, absl::InfiniteDuration());
  EXPECT_GE(closed_after, absl::Milliseconds(900));
  EXPECT_GE(pings, 1);
  // A real client answers the pings and keeps its connection.
  auto stub = (*server)->Stub();
  absl::SleepFor(absl::Seconds(2));
  EXPECT_TRUE(RunGenerate(*stub, MakeRequest("still here", "", 2, 1)).status.ok());

  // The control: with the default keepalive (a minute) the same silent
  // peer keeps its connection for the 3 s we watch.
  auto patient = ServerProcess::Start({"--model=" + ModelDir(),
                                       "--store_dir=" + FreshDir("keepalive-default"),
                                       "--warmup_steps=0"});
  ASSERT_TRUE(patient.ok()) << patient.status();
  EXPECT_EQ(SilentPeer((*patient)->port(), absl::Seconds(3), &pings), absl::InfiniteDuration());
  EXPECT_EQ(pings, 0);
}

}  // namespace
}  // namespace linserve
