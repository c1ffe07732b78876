// The prefix-state cache's parts on their own: how a prefill is cut into
// pieces, the hash chain that names a prefix, and the cache's choice of
// snapshots, its byte bound and its metrics.

#include "server/scheduling/prefix_cache.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/random/random.h"
#include "server/common/metrics.h"
#include "server/scheduling/prefill_pieces.h"

namespace linserve {
namespace {

// Cuts a prompt as the scheduler does, with a budget per iteration that
// other turns have already eaten into by a random amount.
std::vector<int64_t> PieceEnds(int64_t total, int64_t chunk, int64_t full_budget, int64_t stop,
                               absl::BitGen& gen) {
  std::vector<int64_t> ends;
  int64_t done = 0;
  while (done < total) {
    const int64_t eaten = absl::Uniform<int64_t>(absl::IntervalClosed, gen, 0, full_budget);
    int64_t n = NextPieceLength(done, total, stop, full_budget - eaten, chunk, eaten == 0);
    if (n == 0) n = NextPieceLength(done, total, stop, full_budget, chunk, /*first=*/true);
    EXPECT_GT(n, 0);
    done += n;
    ends.push_back(done);
  }
  return ends;
}

TEST(PrefillPiecesTest, PiecesEndOnChunkBoundariesAndTheTailGoesAlone) {
  absl::BitGen gen;
  for (int trial = 0; trial < 2000; ++trial) {
    const int64_t chunk = absl::Uniform<int64_t>(absl::IntervalClosed, gen, 1, 64);
    const int64_t total = absl::Uniform<int64_t>(absl::IntervalClosed, gen, 1, 2000);
    const int64_t budget = absl::Uniform<int64_t>(absl::IntervalClosed, gen, 1, 600);
    const int64_t stop =
        absl::Uniform<int64_t>(absl::IntervalClosed, gen, 0, total / chunk) * chunk;
    const std::vector<int64_t> ends = PieceEnds(total, chunk, budget, stop, gen);
    ASSERT_EQ(ends.back(), total);
    const int64_t last_boundary = total / chunk * chunk;
    for (size_t i = 0; i + 1 < ends.size(); ++i) {
      EXPECT_EQ(ends[i] % chunk, 0) << "a piece before the last ends on a boundary";
    }
    // The partial chunk at the end is a piece of its own.
    if (last_boundary != total && last_boundary > 0) {
      ASSERT_GE(ends.size(), 2u);
      EXPECT_EQ(ends[ends.size() - 2], last_boundary);
    }
    if (stop > 0) {
      EXPECT_NE(std::find(ends.begin(), ends.end(), stop), ends.end()) << "a piece ends at stop";
    }
  }
}

TEST(PrefillPiecesTest, StaysWithinTheBudgetUnlessNothingElseRan) {
  // 100 tokens, chunk 16, budget 40: two chunks fit.
  EXPECT_EQ(NextPieceLength(0, 100, 0, 40, 16, true), 32);
  // 10 left of the budget cannot reach a boundary: wait, unless first.
  EXPECT_EQ(NextPieceLength(32, 100, 0, 10, 16, false), 0);
  EXPECT_EQ(NextPieceLength(32, 100, 0, 10, 16, true), 16);
  // The whole chunks, then the tail of 4.
  EXPECT_EQ(NextPieceLength(32, 100, 0, 512, 16, true), 64);
  EXPECT_EQ(NextPieceLength(96, 100, 0, 512, 16, true), 4);
  // A snapshot due at 48 cuts the piece there.
  EXPECT_EQ(NextPieceLength(0, 100, 48, 512, 16, true), 48);
  EXPECT_EQ(NextPieceLength(48, 100, 48, 512, 16, true), 48);
  // Done: nothing.
  EXPECT_EQ(NextPieceLength(100, 100, 0, 512, 16, true), 0);
}

std::vector<int64_t> Tokens(int64_t n, int64_t seed) {
  std::vector<int64_t> tokens(n);
  for (int64_t i = 0; i < n; ++i) tokens[i] = (i * 31 + seed * 7) % 256;
  return tokens;
}

TEST(PrefixKeysTest, AKeyNamesTheWholePrefixInItsScope) {
  const std::vector<int64_t> a = Tokens(40, 1);
  std::vector<int64_t> b = a;
  b[35] = 255 - b[35];  // same first two blocks of 16, a different third
  const auto ka = PrefixBlockKeys("t", "", "", a, 16);
  const auto kb = PrefixBlockKeys("t", "", "", b, 16);
  ASSERT_EQ(ka.size(), 2u);  // whole blocks only
  EXPECT_EQ(ka, kb) << "the partial third block is not keyed";
  std::vector<int64_t> c = a;
  c[3] = 255 - c[3];  // the first block differs
  const auto kc = PrefixBlockKeys("t", "", "", c, 16);
  EXPECT_NE(ka[0], kc[0]);
  EXPECT_NE(ka[1], kc[1]) << "block 2's key depends on block 1";
  EXPECT_NE(ka[0], PrefixBlockKeys("u", "", "", a, 16)[0]) << "another tenant";
  EXPECT_NE(ka[0], PrefixBlockKeys("t", "salt", "", a, 16)[0]) << "another salt";
  const std::string origin(64, 'a');
  EXPECT_NE(ka[0], PrefixBlockKeys("t", "", origin, a, 16)[0]) << "a named state's turns";
  EXPECT_NE(PrefixBlockKeys("t", "", origin, a, 16)[0],
            PrefixBlockKeys("t", "", std::string(64, 'b'), a, 16)[0])
      << "another named state";
  EXPECT_NE(PrefixBlockKeys("t", origin, "", a, 16)[0], PrefixBlockKeys("t", "", origin, a, 16)[0])
      << "a salt that spells a digest is not that state's scope";
  // Lengths are hashed, so the boundary between tenant and salt is not lost.
  EXPECT_NE(PrefixBlockKeys("ab", "c", "", a, 16)[0], PrefixBlockKeys("a", "bc", "", a, 16)[0]);
  EXPECT_EQ(ka[0].size(), 32u);
}

// A state of `floats` float32 values at position `position`.
State FakeState(int64_t floats, int64_t position) {
  State state;
  state.layers.push_back({torch::full({1, floats}, static_cast<float>(position))});
  state.positions = {position};
  return state;
}

TEST(PrefixCacheTest, KeepsAPrefixOnItsSecondSightingAndResumesFromTheLongest) {
  Metrics metrics;
  PrefixCache cache({/*max_bytes=*/1 << 20, /*max_sightings=*/100, /*chunk=*/16}, &metrics);
  const std::vector<int64_t> shared = Tokens(64, 3);
  std::vector<int64_t> first = shared, second = shared;
  for (int64_t t : Tokens(20, 4)) first.push_back(t);
  for (int64_t t : Tokens(20, 5)) second.push_back(t);
  const auto k1 = cache.Keys("", "", "", first);
  const auto k2 = cache.Keys("", "", "", second);

  EXPECT_EQ(cache.Lookup(k1, k1.size()).blocks, 0);
  EXPECT_EQ(cache.ChooseSnapshot(k1, 0), 0) << "first sighting: no snapshot";
  EXPECT_EQ(cache.Lookup(k2, k2.size()).blocks, 0);
  // The second prompt parts from the first after the shared 64 tokens.
  EXPECT_EQ(cache.ChooseSnapshot(k2, 0), 4);
  cache.Insert(k2[3], FakeState(8, 64), 32);

  const PrefixCache::Hit hit = cache.Lookup(k1, k1.size());
  EXPECT_EQ(hit.blocks, 4);
  ASSERT_NE(hit.state, nullptr);
  EXPECT_EQ(hit.state->positions[0], 64);
  EXPECT_EQ(cache.Lookup(k1, 3).blocks, 0) << "max_blocks bounds the hit";
  EXPECT_EQ(metrics.prefix_cache_lookups_total().Value(), 4);
  EXPECT_EQ(metrics.prefix_cache_hits_total().Value(), 1);
  EXPECT_EQ(metrics.prefix_cache_hit_tokens_total().Value(), 64);
  EXPECT_EQ(metrics.prefix_cache_bytes().Value(), 32);
}

TEST(PrefixCacheTest, EvictsTheLeastRecentlyUsedToStayWithinItsBytes) {
  Metrics metrics;
  PrefixCache cache({/*max_bytes=*/100, /*max_sightings=*/100, /*chunk=*/4}, &metrics);
  std::vector<std::vector<std::string>> keys;
  for (int i = 0; i < 5; ++i) keys.push_back(cache.Keys("", "", "", Tokens(4, 10 + i)));
  for (int i = 0; i < 3; ++i) cache.Insert(keys[i][0], FakeState(4, i), 30);
  EXPECT_EQ(cache.bytes(), 90);
  EXPECT_EQ(cache.Lookup(keys[0], 1).blocks, 1);  // 0 becomes the most recent
  cache.Insert(keys[3][0], FakeState(4, 3), 30);  // evicts 1, the least recent
  EXPECT_EQ(cache.bytes(), 90);
  EXPECT_EQ(cache.Lookup(keys[1], 1).blocks, 0);
  EXPECT_EQ(cache.Lookup(keys[0], 1).blocks, 1);
  EXPECT_EQ(cache.Lookup(keys[2], 1).blocks, 1);
  cache.Insert(keys[4][0], FakeState(4, 4), 101);  // larger than the bound: not kept
  EXPECT_EQ(cache.Lookup(keys[4], 1).blocks, 0);
  EXPECT_EQ(cache.entries(), 3);
  EXPECT_EQ(metrics.prefix_cache_evictions_total().Value(), 1);
  EXPECT_EQ(metrics.prefix_cache_bytes().Value(), 90);
}

TEST(PrefixCacheTest, ASnapshotIsACopy) {
  Metrics metrics;
  PrefixCache cache({1 << 20, 100, 4}, &metrics);
  const auto keys = cache.Keys("", "", "", Tokens(4, 1));
  State state = FakeState(4, 4);
  cache.Insert(keys[0], CloneState(state), 16);
  state.layers[0][0].add_(1);  // a decode step advances states in place
  EXPECT_EQ(cache.Lookup(keys, 1).state->layers[0][0][0][0].item<float>(), 4.0f);
}

TEST(PrefixCacheTest, SightingsAreBounded) {
  Metrics metrics;
  PrefixCache cache({1 << 20, /*max_sightings=*/2, 4}, &metrics);
  const auto old_keys = cache.Keys("", "", "", Tokens(4, 1));
  cache.ChooseSnapshot(old_keys, 0);
  cache.ChooseSnapshot(cache.Keys("", "", "", Tokens(8, 2)), 0);  // two more push it out
  EXPECT_EQ(cache.ChooseSnapshot(old_keys, 0), 0) << "forgotten: a first sighting again";
  EXPECT_EQ(cache.ChooseSnapshot(old_keys, 0), 1);
}

}  // namespace
}  // namespace linserve
