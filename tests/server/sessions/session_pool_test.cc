#include "server/sessions/session_pool.h"

#include <algorithm>
#include <memory>

#include <gtest/gtest.h>

#include "engine/model/state.h"

namespace linserve {
namespace {

TEST(SessionPoolTest, AnotherTenantsSessionIsNotFoundLikeAnUnknownOne) {
  SessionPool pool(10, 10);
  auto mine = pool.Add("alice", 1);
  ASSERT_TRUE(mine.ok());
  EXPECT_TRUE(pool.Find("alice", (*mine)->id).ok());
  const absl::Status foreign = pool.Find("bob", (*mine)->id).status();
  const absl::Status unknown = pool.Find("bob", "0123456789abcdef0123456789abcdef").status();
  EXPECT_EQ(foreign.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(unknown.code(), absl::StatusCode::kNotFound);
  // Same wording: the answer does not reveal that the id exists.
  EXPECT_EQ(foreign.message().substr(foreign.message().find(" is not")),
            unknown.message().substr(unknown.message().find(" is not")));
  EXPECT_TRUE(pool.ListOf("bob").empty());
  EXPECT_EQ(pool.ListOf("alice").size(), 1u);
}

TEST(SessionPoolTest, IdsAreFreshAndTheLimitIsResourceExhausted) {
  SessionPool pool(3, 3);
  std::vector<std::string> ids;
  for (int i = 0; i < 3; ++i) {
    auto s = pool.Add("", i);
    ASSERT_TRUE(s.ok());
    ids.push_back((*s)->id);
  }
  std::sort(ids.begin(), ids.end());
  EXPECT_EQ(std::unique(ids.begin(), ids.end()), ids.end());
  auto over = pool.Add("", 4);
  EXPECT_EQ(over.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(over.status().message().find("max_sessions = 3"), std::string::npos);
  pool.Remove(ids[0]);
  EXPECT_TRUE(pool.Add("", 5).ok());
}

TEST(SessionPoolTest, EachAuthenticatedTenantHasAQuotaAndTheEmptyTenantNone) {
  SessionPool pool(10, 10, /*max_per_tenant=*/2);
  auto a1 = pool.Add("alice", 1);
  ASSERT_TRUE(a1.ok());
  ASSERT_TRUE(pool.Add("alice", 2).ok());
  auto over = pool.Add("alice", 3);
  EXPECT_EQ(over.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(over.status().message().find("max_sessions_per_tenant = 2"), std::string::npos);
  EXPECT_TRUE(pool.Add("bob", 4).ok()) << "another tenant's quota is its own";
  for (int i = 0; i < 5; ++i) EXPECT_TRUE(pool.Add("", 5 + i).ok()) << "auth off: no quota";
  pool.Remove((*a1)->id);
  EXPECT_EQ(pool.CountOf("alice"), 1);
  EXPECT_TRUE(pool.Add("alice", 10).ok());
  // Sessions read back from the store count but are not refused.
  auto stored = std::make_unique<Session>();
  stored->tenant = "alice";
  stored->id = "0123456789abcdef0123456789abcdef";
  EXPECT_TRUE(pool.AddStored(std::move(stored)).ok());
  EXPECT_EQ(pool.CountOf("alice"), 3);
}

TEST(SessionPoolTest, MakeRoomSpillsTheLeastRecentlyUsedIdleDurableState) {
  SessionPool pool(10, 2);
  auto a = pool.Add("", 1), b = pool.Add("", 2);
  ASSERT_TRUE(a.ok() && b.ok());
  (*a)->state = std::make_unique<State>();
  (*b)->state = std::make_unique<State>();
  pool.Touch(*a);  // b is now the least recently used
  auto c = pool.Add("", 3);
  ASSERT_TRUE(pool.MakeRoom(*c).ok());
  EXPECT_NE((*a)->state, nullptr);
  EXPECT_EQ((*b)->state, nullptr);
  EXPECT_EQ(pool.in_memory(), 1);

  // Busy and not-yet-durable states stay; with nothing else to spill the
  // pool is full.
  (*c)->state = std::make_unique<State>();
  (*a)->busy = true;
  (*c)->pending_writes = 1;
  auto d = pool.Add("", 4);
  const absl::Status full = pool.MakeRoom(*d);
  EXPECT_EQ(full.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(full.message().find("max_sessions_in_memory = 2"), std::string::npos);
  (*c)->pending_writes = 0;
  EXPECT_TRUE(pool.MakeRoom(*d).ok());
  EXPECT_EQ((*c)->state, nullptr);
}

// A growing state weighs by its length: 100 bytes plus 10 a token here.
SessionMemoryBounds Bounds(int64_t max_bytes, int64_t per_tenant) {
  return {max_bytes, per_tenant, [](int64_t position) { return 100 + 10 * position; }};
}

TEST(SessionPoolTest, MakeRoomSpillsByBytesAndRefusesAStateLargerThanTheBound) {
  SessionPool pool(10, 10, 0, Bounds(/*max_bytes=*/500, 0));
  auto a = pool.Add("", 1), b = pool.Add("", 2);
  ASSERT_TRUE(a.ok() && b.ok());
  (*a)->position = 10;  // 200 bytes
  (*b)->position = 5;   // 150 bytes
  (*a)->state = std::make_unique<State>();
  (*b)->state = std::make_unique<State>();
  pool.Touch(*a);  // b is the least recently used
  EXPECT_EQ(pool.ResidentBytes(), 350);
  auto c = pool.Add("", 3);
  (*c)->position = 10;  // 200 more: 550 > 500, so b goes, and only b
  ASSERT_TRUE(pool.MakeRoom(*c).ok());
  EXPECT_EQ((*b)->state, nullptr);
  EXPECT_NE((*a)->state, nullptr);
  (*c)->state = std::make_unique<State>();
  EXPECT_EQ(pool.ResidentBytes(), 400);

  // A state larger than the whole bound is refused by name, and nothing
  // is spilled for it.
  auto d = pool.Add("", 4);
  (*d)->position = 41;  // 510 bytes
  const absl::Status too_big = pool.MakeRoom(*d);
  EXPECT_EQ(too_big.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(too_big.message().find("max_session_memory_bytes = 500"), std::string::npos)
      << too_big;
  EXPECT_EQ(pool.ResidentBytes(), 400);

  // A turn grew c past the bound: Trim spills the least recently used
  // other state; with everything else busy it leaves the rest.
  (*c)->position = 30;  // 400 bytes: 600 in all
  pool.Touch(*c);
  pool.Trim(*c);
  EXPECT_EQ((*a)->state, nullptr);
  EXPECT_EQ(pool.ResidentBytes(), 400);
  EXPECT_EQ(pool.in_memory(), 1);
}

// A session's bytes are its state's, each state it kept for its
// conversation (a state at position 0: the part that does not grow) and its
// tokens (4 bytes each); they count towards the bound, and a spill drops
// them all with the state.
TEST(SessionPoolTest, KeptStatesAndTokensCountAndGoWithTheState) {
  SessionPool pool(10, 10, 0, Bounds(/*max_bytes=*/1000, 0));
  auto a = pool.Add("", 1), b = pool.Add("", 2);
  ASSERT_TRUE(a.ok() && b.ok());
  (*a)->position = 10;  // 200 bytes
  (*a)->state = std::make_unique<State>();
  (*a)->tokens.assign(10, 7);  // 40 bytes
  (*a)->kept = {{3, std::make_shared<const State>()}, {8, std::make_shared<const State>()}};
  EXPECT_EQ(pool.BytesOf(**a), 200 + 2 * 100 + 40);
  EXPECT_EQ(pool.ResidentBytes(), 440);
  (*b)->position = 50;  // 600 bytes: 1040 > 1000, so a goes
  ASSERT_TRUE(pool.MakeRoom(*b).ok());
  EXPECT_EQ((*a)->state, nullptr);
  EXPECT_TRUE((*a)->kept.empty());
  EXPECT_TRUE((*a)->tokens.empty());
  EXPECT_FALSE((*a)->tokens_known);
  EXPECT_EQ(pool.BytesOf(**a), 0);
}

TEST(SessionPoolTest, ATenantsQuotaSpillsOnlyItsOwnStates) {
  SessionPool pool(10, 10, 0, Bounds(/*max_bytes=*/0, /*per_tenant=*/300));
  auto alice1 = pool.Add("alice", 1), bob = pool.Add("bob", 2), alice2 = pool.Add("alice", 3);
  ASSERT_TRUE(alice1.ok() && bob.ok() && alice2.ok());
  for (Session* s : {*alice1, *bob}) {
    s->position = 10;  // 200 bytes each
    s->state = std::make_unique<State>();
  }
  pool.Touch(*alice1);  // bob is the least recently used, but not alice's
  (*alice2)->position = 5;  // 150: alice would hold 350 > 300
  ASSERT_TRUE(pool.MakeRoom(*alice2).ok());
  EXPECT_EQ((*alice1)->state, nullptr);
  EXPECT_NE((*bob)->state, nullptr);
  EXPECT_EQ(pool.ResidentBytesOf("bob"), 200);
  (*alice2)->position = 21;  // 310 > 300 alone
  const absl::Status over = pool.MakeRoom(*alice2);
  EXPECT_NE(over.message().find("max_session_memory_bytes_per_tenant = 300"), std::string::npos)
      << over;
  // The "" tenant (auth off) has no quota.
  auto anyone = pool.Add("", 4);
  (*anyone)->position = 100;
  EXPECT_TRUE(pool.MakeRoom(*anyone).ok());
}

TEST(SessionPoolTest, IdleSinceSkipsBusyAndUnwrittenSessions) {
  SessionPool pool(10, 10);
  auto old_idle = pool.Add("", 100), old_busy = pool.Add("", 100), fresh = pool.Add("", 900);
  (*old_busy)->busy = true;
  auto old_writing = pool.Add("", 100);
  (*old_writing)->pending_writes = 1;
  EXPECT_EQ(pool.IdleSince(500), std::vector<std::string>{(*old_idle)->id});
  (void)fresh;
}

TEST(SessionPoolTest, ListIsOldestFirst) {
  SessionPool pool(10, 10);
  auto late = pool.Add("", 30), early = pool.Add("", 10), middle = pool.Add("", 20);
  std::vector<const Session*> listed = pool.ListOf("");
  ASSERT_EQ(listed.size(), 3u);
  EXPECT_EQ(listed[0], *early);
  EXPECT_EQ(listed[1], *middle);
  EXPECT_EQ(listed[2], *late);
}

}  // namespace
}  // namespace linserve
