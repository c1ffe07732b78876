#include "engine/text/byte_trie.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace linserve {
namespace {

TEST(ByteTrieTest, FindsTheLongestPieceThatPrefixesTheText) {
  const std::vector<ByteTrie::Piece> pieces = {{"a", 1}, {"ab", 2}, {"abcd", 3}, {"b", 4}};
  const ByteTrie trie = ByteTrie::Build(pieces);
  struct Case {
    std::string text;
    int32_t id;
    size_t length;
  };
  const Case cases[] = {
      {"abc", 2, 2},  // "abc" is no piece: back to the last one passed
      {"abcd", 3, 4}, {"abcde", 3, 4}, {"ab", 2, 2}, {"a", 1, 1},
      {"ba", 4, 1},   {"x", -1, 0},    {"", -1, 0},  {"xa", -1, 0},
  };
  for (const Case& c : cases) {
    const ByteTrie::Match match = trie.LongestPrefix(c.text);
    EXPECT_EQ(match.id, c.id) << c.text;
    EXPECT_EQ(match.length, c.length) << c.text;
  }
  EXPECT_EQ(trie.num_nodes(), 6u);  // root, a, b, ab, abc, abcd
}

TEST(ByteTrieTest, NodesWithManyChildrenAndEveryByteValue) {
  // "a" followed by each of the 256 bytes: one node with more children than
  // a linear scan handles, and labels that are NUL or above 0x7F.
  std::vector<std::string> storage;
  for (int b = 0; b < 256; ++b) storage.push_back(std::string("a") + static_cast<char>(b));
  std::vector<ByteTrie::Piece> pieces = {{"a", 1000}};
  for (int b = 0; b < 256; ++b) pieces.push_back({storage[b], b});
  const ByteTrie trie = ByteTrie::Build(pieces);
  for (int b = 0; b < 256; ++b) {
    const ByteTrie::Match match = trie.LongestPrefix(storage[b] + "zz");
    EXPECT_EQ(match.id, b);
    EXPECT_EQ(match.length, 2u);
  }
  EXPECT_EQ(trie.LongestPrefix("a").id, 1000);
}

TEST(ByteTrieTest, AnEmptyTrieMatchesNothing) {
  const ByteTrie trie = ByteTrie::Build({});
  EXPECT_EQ(trie.LongestPrefix("abc").id, -1);
  EXPECT_EQ(trie.num_nodes(), 1u);
}

}  // namespace
}  // namespace linserve
