// The RWKV World tokenizer against numbers nobody on this project computed:
// the check string of ../shared/data/rwkv7/README.md, the vocabulary as
// Python itself reads it, and the greedy rule checked by brute force.

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <unordered_set>
#include <vector>

#include "engine/base/sha256.h"
#include "engine/text/tokenizer.h"
#include "gtest/gtest.h"

namespace linserve {
namespace {

constexpr int64_t kVocabSize = 65536;  // the logits rows of every published model
constexpr int64_t kLastId = 65529;

class WorldTokenizerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    absl::StatusOr<Tokenizer> world =
        Tokenizer::World(Tokenizer::BuiltInWorldVocabulary(), kVocabSize);
    ASSERT_TRUE(world.ok()) << world.status();
    tokenizer_ = new Tokenizer(*std::move(world));
  }
  static void TearDownTestSuite() {
    delete tokenizer_;
    tokenizer_ = nullptr;
  }
  static const Tokenizer& tokenizer() { return *tokenizer_; }

 private:
  static Tokenizer* tokenizer_;
};

Tokenizer* WorldTokenizerTest::tokenizer_ = nullptr;

TEST_F(WorldTokenizerTest, EncodesTheReadmesCheckString) {
  const std::string text = "I'll 'd test блабла 以下は、]) -> <|endoftext|><|padding|> int";
  const std::vector<int64_t> expected = {
      74,   5229, 274, 101, 32223, 5092, 27980, 2795, 27980, 33,  10399, 10258, 10139, 10079,
      1682, 3463, 295, 125, 25258, 7588, 2318,  125,  790,   125, 49520, 125,   63,    21888};
  EXPECT_EQ(tokenizer().Encode(text, /*starts_text=*/true), expected);
  EXPECT_EQ(tokenizer().Decode(expected), text);
}

TEST_F(WorldTokenizerTest, DescribesItself) {
  EXPECT_EQ(tokenizer().name(), "rwkv_world");
  EXPECT_EQ(tokenizer().eos_id(), 0);
  EXPECT_EQ(tokenizer().bos_id(), -1);
  EXPECT_FALSE(tokenizer().add_bos());
  EXPECT_EQ(tokenizer().vocab_size(), kVocabSize);
  EXPECT_EQ(tokenizer().never_sampled(),
            (std::vector<int64_t>{65530, 65531, 65532, 65533, 65534, 65535}));
  // EOS, then the rows past the vocabulary's last id.
  EXPECT_EQ(tokenizer().SpecialIdRanges(),
            (std::vector<std::pair<int64_t, int64_t>>{{0, 1}, {kLastId + 1, kVocabSize}}));
}

TEST_F(WorldTokenizerTest, EveryLineDecodesToItsLength) {
  // Independently of the literal parser: the id and LEN fields only.
  std::istringstream lines{std::string(Tokenizer::BuiltInWorldVocabulary())};
  std::string line;
  int64_t count = 0;
  while (std::getline(lines, line)) {
    const int64_t id = std::stoll(line.substr(0, line.find(' ')));
    const size_t length = std::stoul(line.substr(line.rfind(' ') + 1));
    ASSERT_EQ(tokenizer().TokenBytes(id).size(), length) << line;
    ASSERT_FALSE(tokenizer().IsSpecial(id)) << id;
    ++count;
  }
  EXPECT_EQ(count, kLastId);
}

TEST_F(WorldTokenizerTest, PiecesAreWhatPythonReadsInTheLiterals) {
  // SHA-256 over ids 0..65535 of (piece length as 4 little-endian bytes,
  // piece), with each piece from Python 3.11's own eval() of its REPR
  // (encoded as UTF-8 for str literals).
  std::string all;
  for (int64_t id = 0; id < kVocabSize; ++id) {
    const std::string piece = tokenizer().TokenBytes(id);
    const uint32_t length = static_cast<uint32_t>(piece.size());
    for (int shift = 0; shift < 32; shift += 8) all.push_back(static_cast<char>(length >> shift));
    all += piece;
  }
  EXPECT_EQ(Sha256Hex({all}), "17e491d58167678883803e4f596edc3faa86a1125dd91d93ea8272772f10e273");
}

TEST_F(WorldTokenizerTest, SpotValues) {
  struct Case {
    int64_t id;
    std::string bytes;
  };
  const Case cases[] = {
      {1, std::string(1, '\0')},      // '\x00'
      {74, "I"},                      // 'I'
      {5229, "'ll"},                  // "'ll"
      {93, "\\"},                     // '\\'
      {2423, "\xC2\x80"},             // '\x80', a str: U+0080
      {3025, "\xE4\xB8"},             // b'\xe4\xb8', half a character
      {9804, "\xE2\x80\x82"},         // '\u2002'
      {10399, "\xE4\xBB\xA5"},        // 以
      {65527, std::string(80, '#')},  // the last lines: long runs
      {kLastId, std::string(128, ' ')},
  };
  for (const Case& c : cases) EXPECT_EQ(tokenizer().TokenBytes(c.id), c.bytes) << c.id;
}

TEST_F(WorldTokenizerTest, EndOfTextAndUnusedIdsCarryNoBytes) {
  for (int64_t id : {int64_t{0}, int64_t{65530}, int64_t{65535}}) {
    EXPECT_EQ(tokenizer().TokenBytes(id), "") << id;
    EXPECT_TRUE(tokenizer().IsSpecial(id)) << id;
  }
  for (int64_t id : {int64_t{-1}, kVocabSize, int64_t{1} << 40}) {
    EXPECT_EQ(tokenizer().TokenBytes(id), "") << id;
    EXPECT_FALSE(tokenizer().IsSpecial(id)) << id;
  }
  EXPECT_EQ(tokenizer().Decode({0, 74, 65535, 5229, -7, kVocabSize}), "I'll");
  // Special-looking text is ordinary text.
  for (int64_t id : tokenizer().Encode("<|endoftext|>", false)) EXPECT_NE(id, 0);
}

// Random bytes (mostly invalid UTF-8), random UTF-8 from several scripts,
// and runs of whole pieces, so that long matches and fallbacks both occur.
std::vector<std::string> RandomTexts(int count) {
  std::mt19937 rng(20230424);
  std::vector<std::string> alphabet = {"a", "e", "t", " ", "th", "ing", "\n", "\t", "'"};
  const char* const other_scripts[] = {"é",  "ß",  "я", "ж", "以", "下", "は",
                                       "、", "의", "ا", "ع", "😀",  "—"};
  const char* const parts_of_long_pieces[] = {"    ", "--", "##", "<|", "|>"};
  const char* const broken_utf8[] = {"\xFF", "\x80", "\xC3", "\xE4\xB8"};
  alphabet.insert(alphabet.end(), std::begin(other_scripts), std::end(other_scripts));
  alphabet.insert(alphabet.end(), std::begin(parts_of_long_pieces), std::end(parts_of_long_pieces));
  alphabet.insert(alphabet.end(), std::begin(broken_utf8), std::end(broken_utf8));
  alphabet.push_back(std::string(1, '\0'));
  std::vector<std::string> texts = {""};
  for (int i = 0; i < count; ++i) {
    std::string text;
    const int length = static_cast<int>(rng() % 300);
    const bool raw = i % 3 == 0;
    for (int k = 0; k < length; ++k) {
      if (raw) {
        text.push_back(static_cast<char>(rng() % 256));
      } else {
        text += alphabet[rng() % alphabet.size()];
      }
    }
    texts.push_back(text);
  }
  return texts;
}

TEST_F(WorldTokenizerTest, RandomTextRoundTrips) {
  for (const std::string& text : RandomTexts(600)) {
    const std::vector<int64_t> ids = tokenizer().Encode(text, /*starts_text=*/true);
    for (int64_t id : ids) ASSERT_TRUE(id >= 1 && id <= kLastId) << id;
    ASSERT_EQ(tokenizer().Decode(ids), text);
  }
}

TEST_F(WorldTokenizerTest, EachTokenIsTheLongestPieceThatFits) {
  // Brute force over every piece length, independent of the trie.
  std::unordered_set<std::string> pieces;
  size_t longest = 0;
  for (int64_t id = 1; id <= kLastId; ++id) {
    pieces.insert(tokenizer().TokenBytes(id));
    longest = std::max(longest, tokenizer().TokenBytes(id).size());
  }
  for (const std::string& text : RandomTexts(200)) {
    size_t position = 0;
    for (int64_t id : tokenizer().Encode(text, false)) {
      const size_t length = tokenizer().TokenBytes(id).size();
      for (size_t longer = length + 1; longer <= longest && position + longer <= text.size();
           ++longer) {
        ASSERT_EQ(pieces.count(text.substr(position, longer)), 0u)
            << "at " << position << " a piece of " << longer << " bytes fits, not " << length;
      }
      position += length;
    }
  }
}

TEST_F(WorldTokenizerTest, CopiesShareTheTablesAndEncodeFromManyThreads) {
  const Tokenizer copy = tokenizer();
  EXPECT_EQ(&copy.name(), &tokenizer().name());
  EXPECT_EQ(&copy.never_sampled(), &tokenizer().never_sampled());
  const std::vector<std::string> texts = RandomTexts(50);
  std::vector<std::vector<int64_t>> expected;
  for (const std::string& text : texts) expected.push_back(tokenizer().Encode(text, false));
  std::vector<std::thread> threads;
  std::vector<bool> same(4, false);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      const Tokenizer mine = copy;
      bool all = true;
      for (size_t i = 0; i < texts.size(); ++i) all &= mine.Encode(texts[i], false) == expected[i];
      same[t] = all;
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (int t = 0; t < 4; ++t) EXPECT_TRUE(same[t]) << t;
}

TEST(WorldTokenizerBuildTest, TheBuiltInVocabularyIsTheSharedFile) {
  const std::string path =
      std::string(LINSERVE_SHARED_DATA_DIR) + "/rwkv7/rwkv_vocab_v20230424.txt";
  std::ifstream file(path, std::ios::binary);
  if (!file) GTEST_SKIP() << "no " << path;
  std::ostringstream contents;
  contents << file.rdbuf();
  EXPECT_TRUE(contents.str() == Tokenizer::BuiltInWorldVocabulary())
      << "built in: " << Tokenizer::BuiltInWorldVocabulary().size() << " bytes, " << path << ": "
      << contents.str().size();
}

TEST(WorldTokenizerBuildTest, TheLogitsMayNotBeFewerThanTheIds) {
  absl::StatusOr<Tokenizer> world =
      Tokenizer::World(Tokenizer::BuiltInWorldVocabulary(), /*vocab_size=*/kLastId);
  ASSERT_FALSE(world.ok());
  EXPECT_EQ(world.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(world.status().message(),
            "vocabulary line 65529: id 65529 is not below the vocabulary size 65529");

  absl::StatusOr<Tokenizer> exact =
      Tokenizer::World(Tokenizer::BuiltInWorldVocabulary(), kLastId + 1);
  ASSERT_TRUE(exact.ok()) << exact.status();
  EXPECT_TRUE(exact->never_sampled().empty());
}

TEST(WorldTokenizerBuildTest, ErrorsNameTheLineOrTheMissingByte) {
  absl::StatusOr<Tokenizer> bad = Tokenizer::World("1 'a' 1\n2 '\\q' 1\n", 300);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "vocabulary line 2: REPR `'\\q'`: unknown escape \\q");

  absl::StatusOr<Tokenizer> few = Tokenizer::World("1 'a' 1\n", 300);
  ASSERT_FALSE(few.ok());
  EXPECT_EQ(few.status().message(),
            "the vocabulary has no piece for the byte 0x00, so some text could not be encoded");

  EXPECT_FALSE(Tokenizer::World("", 0).ok());
}

TEST(WorldTokenizerBuildTest, GapsInTheIdsAreNeverSampled) {
  // Every byte as ids 1..256, then a gap, then one more piece.
  std::string vocabulary;
  for (int b = 0; b < 256; ++b) {
    char line[32];
    snprintf(line, sizeof(line), "%d b'\\x%02x' 1\n", b + 1, b);
    vocabulary += line;
  }
  vocabulary += "260 'ab' 2\n";
  absl::StatusOr<Tokenizer> world = Tokenizer::World(vocabulary, 262);
  ASSERT_TRUE(world.ok()) << world.status();
  EXPECT_EQ(world->never_sampled(), (std::vector<int64_t>{257, 258, 259, 261}));
  EXPECT_EQ(world->Encode("abc", false), (std::vector<int64_t>{260, 'c' + 1}));
  EXPECT_TRUE(world->IsSpecial(258));
  EXPECT_FALSE(world->IsSpecial(260));
}

}  // namespace
}  // namespace linserve
