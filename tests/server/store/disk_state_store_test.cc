// The disk store keeps one file per (tenant, session), named by the server,
// and gives back what it was given.

#include "server/store/disk_state_store.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "server/store/atomic_file.h"
#include "server/store/state_file.h"

namespace linserve {
namespace {

namespace fs = std::filesystem;

class DiskStateStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("linserve_disk_store_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  fs::path dir_;
};

TEST_F(DiskStateStoreTest, PutGetDeleteAndLoadAll) {
  auto store = DiskStateStore::Open(dir_.string());
  ASSERT_TRUE(store.ok()) << store.status();
  const StoredSessionKey a{"tenant-a", "0123456789abcdef0123456789abcdef"};
  const StoredSessionKey b{"tenant-b", "0123456789abcdef0123456789abcdef"};
  EXPECT_EQ((*store)->Get(a).status().code(), absl::StatusCode::kNotFound);
  ASSERT_TRUE((*store)->Put(a, "state of a").ok());
  ASSERT_TRUE((*store)->Put(b, "state of b").ok());
  EXPECT_EQ(*(*store)->Get(a), "state of a");
  EXPECT_EQ(*(*store)->Get(b), "state of b") << "same id, other tenant: another file";
  ASSERT_TRUE((*store)->Put(a, "newer state of a").ok());
  EXPECT_EQ(*(*store)->Get(a), "newer state of a");

  auto all = (*store)->LoadAll();
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->size(), 2u);

  ASSERT_TRUE((*store)->Delete(a).ok());
  EXPECT_EQ((*store)->Get(a).status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE((*store)->Delete(a).ok()) << "deleting twice is fine";
}

TEST_F(DiskStateStoreTest, FileNamesComeFromTheServerNotTheClient) {
  auto store = DiskStateStore::Open(dir_.string());
  ASSERT_TRUE(store.ok());
  const StoredSessionKey hostile{"../../etc", "../passwd"};
  const fs::path path = (*store)->PathOf(hostile);
  EXPECT_EQ(path.parent_path(), dir_);
  EXPECT_EQ(path.filename().string().size(), 64u + 6u) << path;  // sha256 hex + ".state"
  // ("ab", "c") and ("a", "bc") are different sessions.
  EXPECT_NE((*store)->PathOf({"ab", "c"}), (*store)->PathOf({"a", "bc"}));
}

TEST_F(DiskStateStoreTest, OpeningRemovesTemporariesOfACrashedWrite) {
  fs::create_directories(dir_);
  std::ofstream(dir_ / (std::string("x.state") + kTempSuffix + "1-0")) << "torn";
  auto store = DiskStateStore::Open(dir_.string());
  ASSERT_TRUE(store.ok());
  EXPECT_TRUE(fs::is_empty(dir_));
}

TEST_F(DiskStateStoreTest, ByteBudgetRefusesGrowthCountsReplacementsAndSurvivesReopen) {
  const StoredSessionKey a{"t", "0123456789abcdef0123456789abcdef"};
  const StoredSessionKey b{"t", "fedcba9876543210fedcba9876543210"};
  {
    auto store = DiskStateStore::Open(dir_.string(), 25);
    ASSERT_TRUE(store.ok());
    ASSERT_TRUE((*store)->Put(a, std::string(10, 'a')).ok());
    ASSERT_TRUE((*store)->Put(b, std::string(10, 'b')).ok());
    EXPECT_EQ((*store)->bytes(), 20);
    // Replacing a file frees its old bytes: 20 - 10 + 15 = 25 fits exactly.
    ASSERT_TRUE((*store)->Put(a, std::string(15, 'a')).ok());
    EXPECT_EQ((*store)->bytes(), 25);
    const absl::Status full = (*store)->Put(b, std::string(11, 'b'));
    EXPECT_EQ(full.code(), absl::StatusCode::kResourceExhausted);
    EXPECT_NE(full.message().find("max_store_bytes = 25"), std::string::npos) << full;
    EXPECT_EQ(*(*store)->Get(b), std::string(10, 'b')) << "a refused put leaves the old file";
    EXPECT_EQ((*store)->CheckRoom(1).code(), absl::StatusCode::kResourceExhausted);
    // Shrinking is always allowed.
    ASSERT_TRUE((*store)->Put(b, std::string(5, 'b')).ok());
    EXPECT_EQ((*store)->bytes(), 20);
  }
  // The files already there count from the start.
  auto reopened = DiskStateStore::Open(dir_.string(), 25);
  ASSERT_TRUE(reopened.ok());
  EXPECT_EQ((*reopened)->bytes(), 20);
  EXPECT_TRUE((*reopened)->CheckRoom(5).ok());
  EXPECT_FALSE((*reopened)->CheckRoom(6).ok());
  ASSERT_TRUE((*reopened)->Delete(a).ok());
  EXPECT_EQ((*reopened)->bytes(), 5);
}

// A digest as the server makes them (64 hex digits), one per letter.
std::string Digest(char c) { return std::string(64, c); }

TEST_F(DiskStateStoreTest, NamedStatesPutFindGetListAndDelete) {
  auto store = DiskStateStore::Open(dir_.string());
  ASSERT_TRUE(store.ok()) << store.status();
  const NamedStateKey prompt{"tenant-a", "system.prompt-v1"};
  const NamedStateKey other{"tenant-a", "another_one"};
  const std::string binary("named\0state\xff", 12);
  EXPECT_EQ((*store)->FindNamedState(prompt).status().code(), absl::StatusCode::kNotFound);
  ASSERT_TRUE((*store)->PutNamedState(prompt, Digest('a'), binary).ok());
  ASSERT_TRUE((*store)->PutNamedState(other, Digest('b'), "other").ok());

  auto found = (*store)->FindNamedState(prompt);
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_EQ(found->name, prompt.name);
  EXPECT_EQ(found->digest, Digest('a'));
  EXPECT_EQ(found->bytes, 12);
  EXPECT_EQ(*(*store)->GetNamedState(prompt), binary);
  EXPECT_TRUE(fs::exists((*store)->NamedPathOf(prompt, Digest('a'))));

  auto listed = (*store)->ListNamedStates("tenant-a");
  ASSERT_TRUE(listed.ok()) << listed.status();
  ASSERT_EQ(listed->size(), 2u);
  EXPECT_EQ((*listed)[0].name, "another_one") << "by name";
  EXPECT_EQ((*listed)[0].digest, Digest('b'));
  EXPECT_EQ((*listed)[0].bytes, 5);
  EXPECT_EQ((*listed)[1].name, prompt.name);
  EXPECT_TRUE((*store)->ListNamedStates("nobody")->empty());

  ASSERT_TRUE((*store)->DeleteNamedState(prompt).ok());
  EXPECT_EQ((*store)->FindNamedState(prompt).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ((*store)->GetNamedState(prompt).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ((*store)->DeleteNamedState(prompt).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ((*store)->ListNamedStates("tenant-a")->size(), 1u);
  // A name deleted may be made again, with other contents.
  ASSERT_TRUE((*store)->PutNamedState(prompt, Digest('c'), "again").ok());
  EXPECT_EQ(*(*store)->GetNamedState(prompt), "again");
  EXPECT_EQ((*store)->FindNamedState(prompt)->digest, Digest('c'));
}

TEST_F(DiskStateStoreTest, ANamedStateIsNeverReplaced) {
  auto store = DiskStateStore::Open(dir_.string());
  ASSERT_TRUE(store.ok());
  const NamedStateKey key{"t", "base"};
  ASSERT_TRUE((*store)->PutNamedState(key, Digest('a'), "first").ok());
  const int64_t bytes = (*store)->bytes();
  // Same digest or another: the name is taken.
  for (char digest : {'a', 'b'}) {
    const absl::Status again = (*store)->PutNamedState(key, Digest(digest), "second");
    EXPECT_EQ(again.code(), absl::StatusCode::kAlreadyExists) << again;
    EXPECT_NE(again.message().find("\"base\""), std::string::npos) << again;
  }
  EXPECT_EQ(*(*store)->GetNamedState(key), "first");
  EXPECT_EQ((*store)->FindNamedState(key)->digest, Digest('a'));
  EXPECT_EQ((*store)->bytes(), bytes) << "a refused put takes no bytes";
  EXPECT_EQ((*store)->ListNamedStates("t")->size(), 1u);
}

TEST_F(DiskStateStoreTest, NamedStatesOfOneTenantAreNotAnothers) {
  auto store = DiskStateStore::Open(dir_.string());
  ASSERT_TRUE(store.ok());
  const NamedStateKey alice{"alice", "shared-name"};
  const NamedStateKey bob{"bob", "shared-name"};
  ASSERT_TRUE((*store)->PutNamedState(alice, Digest('a'), "alice's").ok());
  EXPECT_EQ((*store)->FindNamedState(bob).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ((*store)->GetNamedState(bob).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ((*store)->DeleteNamedState(bob).code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE((*store)->ListNamedStates("bob")->empty());
  // Bob may use the same name for his own.
  ASSERT_TRUE((*store)->PutNamedState(bob, Digest('b'), "bob's").ok());
  EXPECT_EQ(*(*store)->GetNamedState(alice), "alice's");
  EXPECT_EQ(*(*store)->GetNamedState(bob), "bob's");
  // Directories are named by the server: a hostile tenant stays inside.
  const fs::path hostile = (*store)->NamedDirOf("../../etc");
  EXPECT_EQ(hostile.parent_path(), dir_ / "named");
  EXPECT_EQ(hostile.filename().string().size(), 64u);
}

TEST_F(DiskStateStoreTest, NamedStatesAreNotSessions) {
  auto store = DiskStateStore::Open(dir_.string());
  ASSERT_TRUE(store.ok());
  ASSERT_TRUE((*store)->Put({"t", "0123456789abcdef0123456789abcdef"}, "session").ok());
  ASSERT_TRUE((*store)->PutNamedState({"t", "named"}, Digest('a'), "named state").ok());
  auto all = (*store)->LoadAll();
  ASSERT_TRUE(all.ok()) << all.status();
  ASSERT_EQ(all->size(), 1u);
  EXPECT_EQ((*all)[0], "session");
  // Reopened, the named directory neither trips Open nor shows in LoadAll.
  store->reset();
  auto reopened = DiskStateStore::Open(dir_.string());
  ASSERT_TRUE(reopened.ok()) << reopened.status();
  EXPECT_EQ((*reopened)->LoadAll()->size(), 1u);
  EXPECT_EQ(*(*reopened)->GetNamedState({"t", "named"}), "named state");
}

TEST_F(DiskStateStoreTest, ADigestThatIsNotHexIsRefused) {
  auto store = DiskStateStore::Open(dir_.string());
  ASSERT_TRUE(store.ok());
  for (const std::string& digest : {std::string("abc"), std::string(64, '/'),
                                    std::string(63, 'a') + "."}) {
    const absl::Status status = (*store)->PutNamedState({"t", "n"}, digest, "x");
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
    EXPECT_NE(status.message().find("digest"), std::string::npos) << status;
  }
  EXPECT_TRUE((*store)->ListNamedStates("t")->empty());
}

TEST_F(DiskStateStoreTest, ByteBudgetCountsNamedStatesAndSurvivesReopen) {
  const StoredSessionKey session{"t", "0123456789abcdef0123456789abcdef"};
  const NamedStateKey a{"t", "a"};
  const NamedStateKey b{"u", "b"};
  {
    auto store = DiskStateStore::Open(dir_.string(), 25);
    ASSERT_TRUE(store.ok());
    ASSERT_TRUE((*store)->Put(session, std::string(10, 's')).ok());
    ASSERT_TRUE((*store)->PutNamedState(a, Digest('a'), std::string(10, 'a')).ok());
    EXPECT_EQ((*store)->bytes(), 20);
    const absl::Status full = (*store)->PutNamedState(b, Digest('b'), std::string(6, 'b'));
    EXPECT_EQ(full.code(), absl::StatusCode::kResourceExhausted) << full;
    EXPECT_NE(full.message().find("max_store_bytes = 25"), std::string::npos) << full;
    EXPECT_EQ((*store)->FindNamedState(b).status().code(), absl::StatusCode::kNotFound);
    EXPECT_FALSE(fs::exists((*store)->NamedDirOf("u"))) << "a refused put writes nothing";
    EXPECT_EQ((*store)->bytes(), 20);
    // A session cannot take the bytes a named state holds either.
    EXPECT_EQ((*store)->CheckRoom(6).code(), absl::StatusCode::kResourceExhausted);
    ASSERT_TRUE((*store)->PutNamedState(b, Digest('b'), std::string(5, 'b')).ok());
    EXPECT_EQ((*store)->bytes(), 25);
  }
  // A crash's temporary beside the named states goes at Open, and the named
  // states already there count from the start.
  {
    auto probe = DiskStateStore::Open(dir_.string());
    ASSERT_TRUE(probe.ok());
    std::ofstream((*probe)->NamedPathOf(a, Digest('a')) + kTempSuffix + "1-0") << "torn";
  }
  auto reopened = DiskStateStore::Open(dir_.string(), 25);
  ASSERT_TRUE(reopened.ok()) << reopened.status();
  EXPECT_EQ((*reopened)->stale_temp_files_removed(), 1);
  EXPECT_EQ((*reopened)->bytes(), 25);
  EXPECT_FALSE((*reopened)->CheckRoom(1).ok());
  ASSERT_EQ((*reopened)->ListNamedStates("t")->size(), 1u) << "the temporary is gone";
  ASSERT_TRUE((*reopened)->DeleteNamedState(a).ok());
  EXPECT_EQ((*reopened)->bytes(), 15);
  EXPECT_FALSE(fs::exists((*reopened)->NamedDirOf("t"))) << "an emptied tenant directory goes";
  ASSERT_TRUE((*reopened)->PutNamedState(a, Digest('a'), std::string(10, 'a')).ok());
}

TEST_F(DiskStateStoreTest, OfTwoPutsOfOneNameAtOnceOneLands) {
  auto store = DiskStateStore::Open(dir_.string());
  ASSERT_TRUE(store.ok());
  for (int round = 0; round < 20; ++round) {
    const NamedStateKey key{"t", "race-" + std::to_string(round)};
    std::vector<absl::Status> results(4);
    std::vector<std::thread> writers;
    for (int i = 0; i < 4; ++i) {
      writers.emplace_back([&, i] {
        results[i] = (*store)->PutNamedState(key, Digest("abcd"[i]), std::string(1, "abcd"[i]));
      });
    }
    for (std::thread& writer : writers) writer.join();
    int landed = 0;
    for (const absl::Status& result : results) {
      if (result.ok()) {
        ++landed;
      } else {
        EXPECT_EQ(result.code(), absl::StatusCode::kAlreadyExists) << result;
      }
    }
    EXPECT_EQ(landed, 1);
  }
  EXPECT_EQ((*store)->ListNamedStates("t")->size(), 20u);
  EXPECT_EQ((*store)->bytes(), 20);
}

}  // namespace
}  // namespace linserve

namespace linserve {
namespace {

// A state file of `record` with a payload of `payload_bytes` bytes.
std::string StateFileOf(const SessionRecord& record, size_t payload_bytes, char fill) {
  SessionRecord with_payload = record;
  with_payload.payload = std::string(payload_bytes, fill);
  return EncodeStateFile(with_payload);
}

SessionRecord RecordFor(const StoredSessionKey& key, int64_t position) {
  SessionRecord record;
  record.model_fingerprint = std::string(64, 'f');
  record.tenant = key.tenant;
  record.session_id = key.session_id;
  record.position = position;
  record.pending_token = 7;
  record.rng_seed = 11;
  record.rng_draws = 3;
  record.created_unix_ms = 1000;
  record.last_used_unix_ms = 2000;
  for (int64_t i = 0; i < position; ++i) record.tokens.push_back(static_cast<int32_t>(i));
  record.chat = {"[\"context\"]", "reply"};
  return record;
}

class DiskStoreForkTest : public DiskStateStoreTest {};

// A fork stored by reference reads back as the whole file of the fork would
// (its own id, tenant and times; the source's state and fields), costs a
// link file of a few hundred bytes however large the state, and stays as it
// was when the source moves on, is deleted, or the store reopens.
TEST_F(DiskStoreForkTest, AForkByReferenceReadsAsItsWholeFileWhateverTheSourceDoesLater) {
  auto store = DiskStateStore::Open(dir_.string());
  ASSERT_TRUE(store.ok()) << store.status();
  ASSERT_TRUE((*store)->StoresForksByReference());
  const StoredSessionKey source{"tenant", "00000000000000000000000000000001"};
  const StoredSessionKey fork{"tenant", "00000000000000000000000000000002"};
  const SessionRecord source_record = RecordFor(source, 40);
  ASSERT_TRUE((*store)->Put(source, StateFileOf(source_record, 1 << 20, 's')).ok());

  SessionRecord fork_record = source_record;
  fork_record.session_id = fork.session_id;
  fork_record.created_unix_ms = 5000;
  fork_record.last_used_unix_ms = 6000;
  ASSERT_TRUE((*store)->PutFork(fork, source, fork_record).ok());
  const std::string expected = StateFileOf(fork_record, 1 << 20, 's');
  EXPECT_EQ(*(*store)->Get(fork), expected);
  EXPECT_LT(fs::file_size((*store)->PathOf(fork)), 512u) << "the fork wrote more than a link";
  EXPECT_EQ(fs::hard_link_count((*store)->PathOf(source)), 2u);
  EXPECT_EQ(fs::file_size((*store)->BasePathOf(fork)), fs::file_size((*store)->PathOf(source)));

  // A fork of the fork refers to the same file.
  const StoredSessionKey grandchild{"tenant", "00000000000000000000000000000003"};
  SessionRecord grandchild_record = fork_record;
  grandchild_record.session_id = grandchild.session_id;
  ASSERT_TRUE((*store)->PutFork(grandchild, fork, grandchild_record).ok());
  EXPECT_EQ(*(*store)->Get(grandchild), StateFileOf(grandchild_record, 1 << 20, 's'));
  EXPECT_EQ(fs::hard_link_count((*store)->PathOf(source)), 3u);

  // The source moves on, then goes: the forks keep what they were made from.
  ASSERT_TRUE((*store)->Put(source, StateFileOf(RecordFor(source, 90), 1 << 20, 'n')).ok());
  ASSERT_TRUE((*store)->Delete(source).ok());
  EXPECT_EQ(*(*store)->Get(fork), expected);
  auto reopened = DiskStateStore::Open(dir_.string());
  ASSERT_TRUE(reopened.ok()) << reopened.status();
  EXPECT_EQ(*(*reopened)->Get(fork), expected);
  auto all = (*reopened)->LoadAll();
  ASSERT_TRUE(all.ok()) << all.status();
  ASSERT_EQ(all->size(), 2u);
  EXPECT_TRUE((*all)[0] == expected || (*all)[1] == expected);
  // Counted as the whole files they stand for.
  EXPECT_EQ((*reopened)->bytes(), (*store)->bytes());
  EXPECT_GE((*reopened)->bytes(), 2 << 20);

  // The fork's own write replaces its link and its base.
  ASSERT_TRUE((*reopened)->Put(fork, "its own").ok());
  EXPECT_EQ(*(*reopened)->Get(fork), "its own");
  EXPECT_FALSE(fs::exists((*reopened)->BasePathOf(fork)));
  ASSERT_TRUE((*reopened)->Delete(grandchild).ok());
  EXPECT_FALSE(fs::exists((*reopened)->BasePathOf(grandchild)));
  EXPECT_FALSE(fs::exists((*reopened)->PathOf(grandchild)));
}

TEST_F(DiskStoreForkTest, ABrokenForkIsRefusedAndAnOrphanBaseIsRemoved) {
  auto store = DiskStateStore::Open(dir_.string());
  ASSERT_TRUE(store.ok());
  const StoredSessionKey source{"t", "00000000000000000000000000000001"};
  const StoredSessionKey fork{"t", "00000000000000000000000000000002"};
  EXPECT_EQ((*store)->PutFork(fork, source, RecordFor(fork, 1)).code(),
            absl::StatusCode::kNotFound)
      << "a fork of a session with no file";
  EXPECT_FALSE(fs::exists((*store)->PathOf(fork)));
  EXPECT_EQ((*store)->bytes(), 0);
  ASSERT_TRUE((*store)->Put(source, StateFileOf(RecordFor(source, 3), 100, 'x')).ok());
  ASSERT_TRUE((*store)->PutFork(fork, source, RecordFor(fork, 3)).ok());
  EXPECT_EQ((*store)->PutFork(fork, source, RecordFor(fork, 3)).code(),
            absl::StatusCode::kAlreadyExists);

  // A flipped byte of the link file, or its base gone: DATA_LOSS, not a
  // state of the wrong session.
  std::string link = *ReadFile((*store)->PathOf(fork));
  link[10] ^= 1;
  ASSERT_TRUE(WriteFileAtomically((*store)->PathOf(fork), link).ok());
  EXPECT_EQ((*store)->Get(fork).status().code(), absl::StatusCode::kDataLoss);
  link[10] ^= 1;
  ASSERT_TRUE(WriteFileAtomically((*store)->PathOf(fork), link).ok());
  ASSERT_TRUE((*store)->Get(fork).ok());
  fs::remove((*store)->BasePathOf(fork));
  EXPECT_EQ((*store)->Get(fork).status().code(), absl::StatusCode::kDataLoss);

  // A base whose link file never landed (a crash between the two) goes at
  // the next open.
  const StoredSessionKey orphan{"t", "00000000000000000000000000000003"};
  fs::create_hard_link((*store)->PathOf(source), (*store)->BasePathOf(orphan));
  auto reopened = DiskStateStore::Open(dir_.string());
  ASSERT_TRUE(reopened.ok());
  EXPECT_FALSE(fs::exists((*reopened)->BasePathOf(orphan)));
  EXPECT_EQ((*reopened)->stale_temp_files_removed(), 1);
}

}  // namespace
}  // namespace linserve
