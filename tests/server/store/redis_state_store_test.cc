// The Redis store against a real redis-server.

#include "server/store/redis_state_store.h"

#include <gtest/gtest.h>
#include <hiredis/hiredis.h>

#include "absl/time/clock.h"
#include "tests/server/redis_process.h"

namespace linserve {
namespace {

class RedisStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!RedisProcess::Available()) GTEST_SKIP() << "redis-server is not installed";
    auto redis = RedisProcess::Start();
    ASSERT_TRUE(redis.ok()) << redis.status();
    redis_ = *std::move(redis);
  }

  std::unique_ptr<RedisStateStore> Open(absl::Duration ttl = absl::ZeroDuration()) {
    auto address = ParseRedisUrl(redis_->url() + "?prefix=test");
    EXPECT_TRUE(address.ok());
    auto store = RedisStateStore::Open(*address, ttl, absl::Seconds(2));
    EXPECT_TRUE(store.ok()) << store.status();
    return store.ok() ? *std::move(store) : nullptr;
  }

  // The reply of one command from a connection of the test's own, beside
  // the store's: an integer, or -3 when the command failed.
  long long IntegerCommand(const std::vector<std::string>& argv) {
    redisContext* context = redisConnect("127.0.0.1", redis_->port());
    if (context == nullptr || context->err != 0) {
      if (context != nullptr) redisFree(context);
      return -3;
    }
    std::vector<const char*> args;
    std::vector<size_t> lengths;
    for (const std::string& a : argv) {
      args.push_back(a.data());
      lengths.push_back(a.size());
    }
    auto* reply = static_cast<redisReply*>(
        redisCommandArgv(context, static_cast<int>(args.size()), args.data(), lengths.data()));
    const long long value =
        reply != nullptr && reply->type == REDIS_REPLY_INTEGER ? reply->integer : -3;
    if (reply != nullptr) freeReplyObject(reply);
    redisFree(context);
    return value;
  }

  std::unique_ptr<RedisProcess> redis_;
};

// A digest as the server makes them (64 hex digits), one per letter.
std::string Digest(char c) { return std::string(64, c); }

TEST(RedisUrlTest, ParsesAndNamesWhatIsWrong) {
  auto full = ParseRedisUrl("redis://cache.local:6380/2?prefix=prod");
  ASSERT_TRUE(full.ok());
  EXPECT_EQ(full->host, "cache.local");
  EXPECT_EQ(full->port, 6380);
  EXPECT_EQ(full->db, 2);
  EXPECT_EQ(full->prefix, "prod");
  auto plain = ParseRedisUrl("redis://r");
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->port, 6379);
  EXPECT_EQ(plain->prefix, "linserve");
  for (const char* bad : {"http://r", "redis://", "redis://r:0", "redis://r:x", "redis://r/x",
                          "redis://r?foo=1"}) {
    auto parsed = ParseRedisUrl(bad);
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(parsed.status().message().find("--store"), std::string::npos);
  }
}

TEST_F(RedisStoreTest, PutGetDeleteLoadAllAndTenantsApart) {
  auto store = Open();
  ASSERT_NE(store, nullptr);
  const StoredSessionKey a{"alice", "0123456789abcdef0123456789abcdef"};
  const StoredSessionKey b{"bob", "0123456789abcdef0123456789abcdef"};
  std::string binary("state\0file\xff", 11);
  ASSERT_TRUE(store->Put(a, binary).ok());
  ASSERT_TRUE(store->Put(b, "bob's").ok());
  EXPECT_EQ(*store->Get(a), binary);
  EXPECT_EQ(*store->Get(b), "bob's");
  EXPECT_NE(store->KeyOf(a), store->KeyOf(b));
  EXPECT_EQ(store->KeyOf(a).rfind("test:session:", 0), 0u);
  auto all = store->LoadAll();
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->size(), 2u);
  ASSERT_TRUE(store->Delete(a).ok());
  EXPECT_EQ(store->Get(a).status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(store->Delete(a).ok());  // deleting twice is fine
}

TEST_F(RedisStoreTest, AFencedWriteLandsOnlyOnTheVersionItExpects) {
  auto store = Open();
  ASSERT_NE(store, nullptr);
  const StoredSessionKey key{"t", "00000000000000000000000000000002"};
  EXPECT_EQ(*store->VersionOf(key), 0);
  ASSERT_EQ(*store->PutFenced(key, "one", WriteFence{0, ""}), 1);
  // A second server that also believed the session new loses, and writes nothing.
  auto stale = store->PutFenced(key, "other", WriteFence{0, ""});
  EXPECT_EQ(stale.status().code(), absl::StatusCode::kAborted) << stale.status();
  EXPECT_NE(stale.status().message().find("version 1"), std::string::npos) << stale.status();
  ASSERT_EQ(*store->PutFenced(key, "two", WriteFence{1, ""}), 2);
  auto stored = store->GetVersioned(key);
  ASSERT_TRUE(stored.ok()) << stored.status();
  EXPECT_EQ(stored->file, "two");
  EXPECT_EQ(stored->version, 2);
  EXPECT_EQ(*store->VersionOf(key), 2);
  // An unfenced Put still counts as a write.
  ASSERT_TRUE(store->Put(key, "three").ok());
  EXPECT_EQ(*store->VersionOf(key), 3);
}

TEST_F(RedisStoreTest, AFencedWriteNeverBringsADeletedSessionBack) {
  auto store = Open();
  ASSERT_NE(store, nullptr);
  const StoredSessionKey key{"t", "00000000000000000000000000000003"};
  ASSERT_EQ(*store->PutFenced(key, "one", WriteFence{0, ""}), 1);
  ASSERT_TRUE(store->Delete(key).ok());
  EXPECT_EQ(store->PutFenced(key, "late", WriteFence{1, ""}).status().code(),
            absl::StatusCode::kAborted);
  EXPECT_EQ(store->Get(key).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(*store->VersionOf(key), 0);
}

TEST_F(RedisStoreTest, OneLeaseHolderAtATimeAndOnlyItsWritesLand) {
  auto store = Open();
  ASSERT_NE(store, nullptr);
  SessionLeases* leases = store->leases();
  ASSERT_EQ(leases, store.get());
  const StoredSessionKey key{"t", "00000000000000000000000000000004"};
  const absl::Duration ttl = absl::Seconds(30);
  ASSERT_TRUE(leases->AcquireLease(key, "a", ttl).ok());
  absl::Status other = leases->AcquireLease(key, "b", ttl);
  EXPECT_EQ(other.code(), absl::StatusCode::kAborted) << other;
  EXPECT_NE(other.message().find("another server"), std::string::npos) << other;
  EXPECT_TRUE(leases->AcquireLease(key, "a", ttl).ok());  // the holder may take it again
  EXPECT_EQ(leases->RenewLease(key, "b", ttl).code(), absl::StatusCode::kAborted);
  EXPECT_TRUE(leases->RenewLease(key, "a", ttl).ok());
  // Writes fenced by the lease: only the holder's land.
  EXPECT_EQ(store->PutFenced(key, "b's", WriteFence{0, "b"}).status().code(),
            absl::StatusCode::kAborted);
  EXPECT_EQ(*store->PutFenced(key, "a's", WriteFence{0, "a"}), 1);
  EXPECT_TRUE(leases->ReleaseLease(key, "b").ok());  // not b's: nothing happens
  EXPECT_EQ(leases->AcquireLease(key, "b", ttl).code(), absl::StatusCode::kAborted);
  EXPECT_TRUE(leases->ReleaseLease(key, "a").ok());
  EXPECT_TRUE(leases->AcquireLease(key, "b", ttl).ok());
  EXPECT_EQ(leases->RenewLease(key, "a", ttl).code(), absl::StatusCode::kAborted);
  EXPECT_EQ(store->PutFenced(key, "a's late", WriteFence{1, "a"}).status().code(),
            absl::StatusCode::kAborted);
  EXPECT_EQ(*store->Get(key), "a's");
}

TEST_F(RedisStoreTest, ALeaseNotRenewedExpiresByItself) {
  auto store = Open();
  ASSERT_NE(store, nullptr);
  const StoredSessionKey key{"t", "00000000000000000000000000000005"};
  // Held: a lease long enough to outlast any machine's pause refuses others.
  const StoredSessionKey held{"t", "00000000000000000000000000000007"};
  ASSERT_TRUE(store->AcquireLease(held, "killed", absl::Seconds(60)).ok());
  EXPECT_EQ(store->AcquireLease(held, "next", absl::Seconds(5)).code(),
            absl::StatusCode::kAborted);
  // Not renewed: the lease goes by itself, never before its 200 ms are up
  // (how long after them is Redis's and the machine's business).
  const absl::Time before = absl::Now();
  ASSERT_TRUE(store->AcquireLease(key, "killed", absl::Milliseconds(200)).ok());
  absl::Status next = absl::AbortedError("not tried");
  while (next.code() == absl::StatusCode::kAborted && absl::Now() - before < absl::Seconds(60)) {
    next = store->AcquireLease(key, "next", absl::Seconds(5));
    if (!next.ok()) absl::SleepFor(absl::Milliseconds(20));
  }
  EXPECT_TRUE(next.ok()) << next;
  EXPECT_GE(absl::Now() - before, absl::Milliseconds(200));
}

TEST_F(RedisStoreTest, DeleteRemovesStateVersionAndLease) {
  auto store = Open();
  ASSERT_NE(store, nullptr);
  const StoredSessionKey key{"t", "00000000000000000000000000000006"};
  ASSERT_TRUE(store->AcquireLease(key, "a", absl::Seconds(30)).ok());
  ASSERT_EQ(*store->PutFenced(key, "x", WriteFence{0, "a"}), 1);
  ASSERT_TRUE(store->Delete(key).ok());
  EXPECT_EQ(*store->VersionOf(key), 0);
  EXPECT_TRUE(store->AcquireLease(key, "b", absl::Seconds(30)).ok());
}

TEST_F(RedisStoreTest, EntriesExpireAfterTheTtl) {
  // An entry within its TTL is there (a TTL long enough to outlast any
  // machine's pause).
  auto lasting = Open(absl::Seconds(60));
  ASSERT_NE(lasting, nullptr);
  const StoredSessionKey kept{"", "00000000000000000000000000000003"};
  ASSERT_TRUE(lasting->Put(kept, "x").ok());
  EXPECT_TRUE(lasting->Get(kept).ok());
  // One past its TTL is gone by itself, never before its 300 ms are up.
  auto store = Open(absl::Milliseconds(300));
  ASSERT_NE(store, nullptr);
  const StoredSessionKey key{"", "00000000000000000000000000000001"};
  const absl::Time before = absl::Now();
  ASSERT_TRUE(store->Put(key, "x").ok());
  absl::StatusCode code = absl::StatusCode::kOk;
  while (code == absl::StatusCode::kOk && absl::Now() - before < absl::Seconds(60)) {
    code = store->Get(key).status().code();
    if (code == absl::StatusCode::kOk) absl::SleepFor(absl::Milliseconds(20));
  }
  EXPECT_EQ(code, absl::StatusCode::kNotFound);
  EXPECT_GE(absl::Now() - before, absl::Milliseconds(300));
}

TEST_F(RedisStoreTest, RedisDownIsUnavailableAndTheStoreRecoversWhenItReturns) {
  auto store = Open();
  ASSERT_NE(store, nullptr);
  const StoredSessionKey key{"", "00000000000000000000000000000002"};
  ASSERT_TRUE(store->Put(key, "before").ok());
  const int port = redis_->port();
  redis_->Kill();
  const absl::Status down = store->Put(key, "during");
  EXPECT_EQ(down.code(), absl::StatusCode::kUnavailable) << down;
  EXPECT_NE(down.message().find("redis at 127.0.0.1"), std::string::npos) << down;
  EXPECT_EQ(store->Get(key).status().code(), absl::StatusCode::kUnavailable);
  auto back = RedisProcess::Start({}, port);  // an empty Redis on the same port
  ASSERT_TRUE(back.ok()) << back.status();
  redis_ = *std::move(back);
  EXPECT_TRUE(store->Put(key, "after").ok());
  EXPECT_EQ(*store->Get(key), "after");
}

TEST_F(RedisStoreTest, OutOfMemoryIsResourceExhausted) {
  redis_.reset();
  auto small = RedisProcess::Start({"--maxmemory", "2mb", "--maxmemory-policy", "noeviction"});
  ASSERT_TRUE(small.ok());
  redis_ = *std::move(small);
  auto store = Open();
  ASSERT_NE(store, nullptr);
  const std::string big(256 << 10, 'x');
  absl::Status status;
  for (int i = 0; i < 64 && status.ok(); ++i) {
    status = store->Put({"", std::string(31, '0') + std::to_string(i % 10)} , big + std::to_string(i));
    if (status.ok()) status = store->Put({"t" + std::to_string(i), "x"}, big);
  }
  EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted) << status;
  EXPECT_NE(status.message().find("out of memory"), std::string::npos);
}

TEST_F(RedisStoreTest, NamedStatesPutFindGetListAndDelete) {
  auto store = Open();
  ASSERT_NE(store, nullptr);
  const NamedStateKey prompt{"tenant-a", "system.prompt-v1"};
  const NamedStateKey other{"tenant-a", "another_one"};
  const std::string binary("named\0state\xff", 12);
  EXPECT_EQ(store->FindNamedState(prompt).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(store->GetNamedState(prompt).status().code(), absl::StatusCode::kNotFound);
  ASSERT_TRUE(store->PutNamedState(prompt, Digest('a'), binary).ok());
  ASSERT_TRUE(store->PutNamedState(other, Digest('b'), "other").ok());
  EXPECT_EQ(store->NamedKeyOf(prompt).rfind("test:named-state:", 0), 0u);
  EXPECT_EQ(store->NamedIndexKeyOf("tenant-a").rfind("test:named:", 0), 0u);

  auto found = store->FindNamedState(prompt);
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_EQ(found->name, prompt.name);
  EXPECT_EQ(found->digest, Digest('a'));
  EXPECT_EQ(found->bytes, 12);
  EXPECT_EQ(*store->GetNamedState(prompt), binary);

  auto listed = store->ListNamedStates("tenant-a");
  ASSERT_TRUE(listed.ok()) << listed.status();
  ASSERT_EQ(listed->size(), 2u);
  EXPECT_EQ((*listed)[0].name, "another_one") << "by name";
  EXPECT_EQ((*listed)[0].digest, Digest('b'));
  EXPECT_EQ((*listed)[0].bytes, 5);
  EXPECT_EQ((*listed)[1].name, prompt.name);
  EXPECT_TRUE(store->ListNamedStates("nobody")->empty());

  ASSERT_TRUE(store->DeleteNamedState(prompt).ok());
  EXPECT_EQ(store->FindNamedState(prompt).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(store->GetNamedState(prompt).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(store->DeleteNamedState(prompt).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(IntegerCommand({"EXISTS", store->NamedKeyOf(prompt)}), 0);
  ASSERT_EQ(store->ListNamedStates("tenant-a")->size(), 1u);
  // A name deleted may be made again; the tenant's last one takes the index along.
  ASSERT_TRUE(store->PutNamedState(prompt, Digest('c'), "again").ok());
  EXPECT_EQ(*store->GetNamedState(prompt), "again");
  ASSERT_TRUE(store->DeleteNamedState(prompt).ok());
  ASSERT_TRUE(store->DeleteNamedState(other).ok());
  EXPECT_EQ(IntegerCommand({"EXISTS", store->NamedIndexKeyOf("tenant-a")}), 0);
}

TEST_F(RedisStoreTest, ANamedStateIsNeverReplaced) {
  auto store = Open();
  ASSERT_NE(store, nullptr);
  const NamedStateKey key{"t", "base"};
  ASSERT_TRUE(store->PutNamedState(key, Digest('a'), "first").ok());
  for (char digest : {'a', 'b'}) {
    const absl::Status again = store->PutNamedState(key, Digest(digest), "second");
    EXPECT_EQ(again.code(), absl::StatusCode::kAlreadyExists) << again;
    EXPECT_NE(again.message().find("\"base\""), std::string::npos) << again;
  }
  EXPECT_EQ(*store->GetNamedState(key), "first");
  EXPECT_EQ(store->FindNamedState(key)->digest, Digest('a'));
  EXPECT_EQ(store->FindNamedState(key)->bytes, 5);
  const absl::Status bad = store->PutNamedState({"t", "other"}, "not hex", "x");
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument) << bad;
  EXPECT_EQ(store->ListNamedStates("t")->size(), 1u);
}

TEST_F(RedisStoreTest, NamedStatesOfOneTenantAreNotAnothers) {
  auto store = Open();
  ASSERT_NE(store, nullptr);
  const NamedStateKey alice{"alice", "shared-name"};
  const NamedStateKey bob{"bob", "shared-name"};
  ASSERT_TRUE(store->PutNamedState(alice, Digest('a'), "alice's").ok());
  EXPECT_EQ(store->FindNamedState(bob).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(store->GetNamedState(bob).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(store->DeleteNamedState(bob).code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(store->ListNamedStates("bob")->empty());
  ASSERT_TRUE(store->PutNamedState(bob, Digest('b'), "bob's").ok());
  EXPECT_EQ(*store->GetNamedState(alice), "alice's");
  EXPECT_EQ(*store->GetNamedState(bob), "bob's");
  EXPECT_NE(store->NamedKeyOf(alice), store->NamedKeyOf(bob));
}

TEST_F(RedisStoreTest, NamedStatesAreNotSessionsAndNeverExpire) {
  // Sessions expire; named states, in the same store, do not.
  auto store = Open(absl::Seconds(60));
  ASSERT_NE(store, nullptr);
  const StoredSessionKey session{"t", "0123456789abcdef0123456789abcdef"};
  const NamedStateKey named{"t", "0123456789abcdef0123456789abcdef"};
  ASSERT_TRUE(store->Put(session, "session").ok());
  ASSERT_TRUE(store->PutNamedState(named, Digest('a'), "named state").ok());
  EXPECT_GT(IntegerCommand({"TTL", store->KeyOf(session)}), 0);
  EXPECT_EQ(IntegerCommand({"TTL", store->NamedKeyOf(named)}), -1);
  EXPECT_EQ(IntegerCommand({"TTL", store->NamedIndexKeyOf("t")}), -1);
  auto all = store->LoadAll();
  ASSERT_TRUE(all.ok()) << all.status();
  ASSERT_EQ(all->size(), 1u);
  EXPECT_EQ((*all)[0], "session");
  // Deleting the session leaves the named state of the same name.
  ASSERT_TRUE(store->Delete(session).ok());
  EXPECT_EQ(*store->GetNamedState(named), "named state");
}

TEST_F(RedisStoreTest, NamedStatePutOutOfMemoryIsResourceExhaustedAndWritesNothing) {
  redis_.reset();
  auto small = RedisProcess::Start({"--maxmemory", "2mb", "--maxmemory-policy", "noeviction"});
  ASSERT_TRUE(small.ok());
  redis_ = *std::move(small);
  auto store = Open();
  ASSERT_NE(store, nullptr);
  const std::string big(256 << 10, 'x');
  absl::Status status;
  int i = 0;
  for (; i < 64 && status.ok(); ++i) {
    status = store->PutNamedState({"t", "n" + std::to_string(i)}, Digest('a'), big);
  }
  EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted) << status;
  EXPECT_NE(status.message().find("out of memory"), std::string::npos);
  const NamedStateKey refused{"t", "n" + std::to_string(i - 1)};
  EXPECT_EQ(store->FindNamedState(refused).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(store->GetNamedState(refused).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(store->ListNamedStates("t")->size(), static_cast<size_t>(i - 1));
}

}  // namespace
}  // namespace linserve
