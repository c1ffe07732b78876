// The open-stream bounds: server-wide, and per authenticated tenant.

#include "server/grpc/stream_limit.h"

#include <gtest/gtest.h>

#include <utility>
#include <vector>

namespace linserve {
namespace {

TEST(StreamLimitTest, ATenantPastItsShareIsRefusedWhileOthersAndTheServerHaveRoom) {
  StreamLimit limit(/*max_open=*/5, /*max_open_per_tenant=*/2, nullptr);
  std::vector<StreamLimit::Ticket> held;
  for (int i = 0; i < 2; ++i) {
    auto ticket = limit.Acquire("alice");
    ASSERT_TRUE(ticket.ok()) << ticket.status();
    held.push_back(*std::move(ticket));
  }
  const auto refused = limit.Acquire("alice");
  ASSERT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(refused.status().message().find("--max_open_streams_per_tenant"), std::string::npos);
  auto bob = limit.Acquire("bob");
  ASSERT_TRUE(bob.ok());
  EXPECT_EQ(limit.open(), 3);
  // A stream that ends gives its tenant's place back.
  held.pop_back();
  EXPECT_TRUE(limit.Acquire("alice").ok());
}

TEST(StreamLimitTest, WithoutAuthenticationOnlyTheServerWideBoundHolds) {
  StreamLimit limit(/*max_open=*/3, /*max_open_per_tenant=*/1, nullptr);
  std::vector<StreamLimit::Ticket> held;
  for (int i = 0; i < 3; ++i) {
    auto ticket = limit.Acquire("");
    ASSERT_TRUE(ticket.ok()) << i << ": " << ticket.status();
    held.push_back(*std::move(ticket));
  }
  const auto refused = limit.Acquire("carol");
  ASSERT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(refused.status().message().find("--max_open_streams"), std::string::npos);
  EXPECT_EQ(refused.status().message().find("per_tenant"), std::string::npos);
}

TEST(StreamLimitTest, AMovedTicketReleasesOnce) {
  StreamLimit limit(/*max_open=*/1, /*max_open_per_tenant=*/1, nullptr);
  auto ticket = limit.Acquire("alice");
  ASSERT_TRUE(ticket.ok());
  StreamLimit::Ticket moved = *std::move(ticket);
  StreamLimit::Ticket assigned;
  assigned = std::move(moved);
  EXPECT_EQ(limit.open(), 1);
  assigned = StreamLimit::Ticket();
  EXPECT_EQ(limit.open(), 0);
  EXPECT_TRUE(limit.Acquire("alice").ok());
}

}  // namespace
}  // namespace linserve
