// The schema compiler against the JSON Schema Test Suite (Debian's
// json-schema-test-suite, draft 7, the required files; not optional/): for
// every schema it compiles, each valid instance must be a sentence of its
// grammar and each invalid one must not. Skips where the package is not
// installed (scripts/setup installs it).
//
// An instance is written as generation writes JSON (the grammar's one way):
// its objects' keys in the order the schema lists them, numbers without a
// fraction as integers (1.0 as 1), no whitespace. The compiler runs with
// JSON Schema's meaning of an absent additionalProperties (strict = false).

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "engine/grammar/gbnf_parser.h"
#include "engine/grammar/grammar_matcher.h"
#include "engine/grammar/json_schema.h"
#include "gtest/gtest.h"

namespace linserve {
namespace {

using json = nlohmann::ordered_json;
namespace fs = std::filesystem;

constexpr char kSuite[] = "/usr/share/json-schema-test-suite/tests/draft7";

// The order property names first appear in the schema (properties, and the
// objects of const and enum), anywhere in it.
void Ranks(const json& schema, std::map<std::string, int>& rank) {
  if (schema.is_object()) {
    for (const auto& [key, value] : schema.items()) {
      if (key == "properties" && value.is_object()) {
        for (const auto& [name, sub] : value.items()) rank.emplace(name, static_cast<int>(rank.size()));
      }
      if ((key == "const" || key == "enum") && value.is_structured()) {
        for (const json& v : key == "enum" ? value : json::array({value})) {
          if (!v.is_object()) continue;
          for (const auto& [name, sub] : v.items()) rank.emplace(name, static_cast<int>(rank.size()));
        }
      }
      Ranks(value, rank);
    }
  } else if (schema.is_array()) {
    for (const json& item : schema) Ranks(item, rank);
  }
}

json InSchemaOrder(const json& value, const std::map<std::string, int>& rank) {
  if (value.is_array()) {
    json out = json::array();
    for (const json& item : value) out.push_back(InSchemaOrder(item, rank));
    return out;
  }
  if (!value.is_object()) return CanonicalJson(value);
  std::vector<std::string> keys;
  for (const auto& [key, item] : value.items()) keys.push_back(key);
  auto rank_of = [&](const std::string& key) {
    const auto it = rank.find(key);
    return it == rank.end() ? static_cast<int>(rank.size()) : it->second;
  };
  std::stable_sort(keys.begin(), keys.end(),
                   [&](const std::string& a, const std::string& b) { return rank_of(a) < rank_of(b); });
  json out = json::object();
  for (const std::string& key : keys) out[key] = InSchemaOrder(value[key], rank);
  return out;
}

TEST(JsonSchemaSuiteTest, EveryCompiledDraft7SchemaAcceptsExactlyItsValidInstances) {
  if (!fs::is_directory(kSuite)) GTEST_SKIP() << kSuite << " is missing (json-schema-test-suite)";
  int accepted = 0, refused = 0, wrong_schemas = 0, instances = 0;
  std::map<std::string, int> refusals;  // the first words of each refusal, counted
  std::vector<std::string> wrong;
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(kSuite)) {
    if (entry.path().extension() == ".json") files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  for (const fs::path& file : files) {
    std::ifstream in(file);
    std::stringstream text;
    text << in.rdbuf();
    const json groups = json::parse(text.str());
    for (const json& group : groups) {
      const json& schema = group["schema"];
      JsonSchemaOptions options;
      options.strict = false;
      absl::StatusOr<std::string> gbnf = JsonSchemaToGbnf(schema, options);
      absl::StatusOr<Grammar> grammar = gbnf.ok() ? ParseGbnf(*gbnf) : gbnf.status();
      if (!grammar.ok()) {
        ++refused;
        const std::string message(grammar.status().message());
        ++refusals[message.substr(message.find(": ") + 2, 40)];
        continue;
      }
      ++accepted;
      GrammarMatcher matcher(*grammar);
      std::map<std::string, int> rank;
      Ranks(schema, rank);
      bool right = true;
      for (const json& test : group["tests"]) {
        ++instances;
        const std::string instance = InSchemaOrder(test["data"], rank).dump();
        GrammarState state = matcher.Start();
        const bool matches = matcher.AdvanceAll(state, instance) && GrammarMatcher::CanEnd(state);
        if (matches != test["valid"].get<bool>()) {
          right = false;
          wrong.push_back(file.filename().string() + ": " + group["description"].get<std::string>() +
                          ": " + test["description"].get<std::string>() + ": " + instance);
        }
      }
      wrong_schemas += right ? 0 : 1;
    }
  }
  std::printf("draft 7: %d schemas accepted (%d instances checked), %d refused, %d wrong\n",
              accepted, instances, refused, wrong_schemas);
  for (const auto& [reason, count] : refusals) std::printf("  refused %3d: %s\n", count, reason.c_str());
  for (const std::string& w : wrong) std::printf("  WRONG %s\n", w.c_str());
  EXPECT_EQ(wrong_schemas, 0);
  EXPECT_GT(accepted, 0);
}

}  // namespace
}  // namespace linserve
