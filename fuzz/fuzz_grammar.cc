// libFuzzer target: constraints from clients, compiled and walked. The input
// picks GBNF, a JSON schema or a schema's pattern, then its text, then bytes
// to feed the matcher. Every text must compile to a grammar or be refused
// with INVALID_ARGUMENT, within the limits (no crash, no unbounded
// expansion: the deep nesting, left recursion, {m,n} bombs and $ref cycles
// the fuzzer finds); and a compiled grammar's token mask must agree with
// the matcher byte by byte. Any broken promise aborts.

#include <fuzzer/FuzzedDataProvider.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "engine/grammar/gbnf_parser.h"
#include "engine/grammar/grammar_matcher.h"
#include "engine/grammar/json_schema.h"
#include "engine/grammar/token_masks.h"

namespace {

void Require(bool condition, const char* what) {
  if (condition) return;
  std::fprintf(stderr, "fuzz_grammar: broken promise: %s\n", what);
  std::abort();
}

// One token per byte, as the byte tokenizer has, and an end token.
std::shared_ptr<const linserve::TokenTrie> ByteTrie() {
  static const auto* trie = [] {
    std::vector<std::string> pieces;
    for (int b = 0; b < 256; ++b) pieces.push_back(std::string(1, static_cast<char>(b)));
    pieces.push_back("");
    return new std::shared_ptr<const linserve::TokenTrie>(
        std::make_shared<const linserve::TokenTrie>(pieces, std::vector<int32_t>{256}));
  }();
  return *trie;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider input(data, size);
  const int mode = input.ConsumeIntegralInRange(0, 2);
  const std::string text = input.ConsumeRandomLengthString(8192);
  const std::string walk = input.ConsumeRemainingBytesAsString();

  linserve::GbnfLimits limits;
  limits.max_symbols = 20000;
  absl::StatusOr<std::string> gbnf = text;
  if (mode == 1) gbnf = linserve::JsonSchemaTextToGbnf(text);
  if (mode == 2) {
    gbnf = linserve::JsonSchemaToGbnf(
        nlohmann::ordered_json{{"type", "string"}, {"pattern", text}});
  }
  if (!gbnf.ok()) {
    Require(gbnf.status().code() == absl::StatusCode::kInvalidArgument, "a refusal is not INVALID_ARGUMENT");
    return 0;
  }
  absl::StatusOr<linserve::Grammar> grammar = linserve::ParseGbnf(*gbnf, limits);
  if (!grammar.ok()) {
    Require(grammar.status().code() == absl::StatusCode::kInvalidArgument, "a refusal is not INVALID_ARGUMENT");
    if (mode != 0) {
      std::fprintf(stderr, "%s\n%s\n", std::string(grammar.status().message()).c_str(),
                   gbnf->c_str());
    }
    Require(mode == 0, "a compiled schema is not valid GBNF");
    return 0;
  }
  Require(grammar->NumSymbols() <= limits.max_symbols, "a grammar past its symbol limit");

  linserve::GrammarTokenMasks masks(ByteTrie(), *grammar);
  linserve::GrammarMatcher& matcher = masks.matcher();
  linserve::GrammarState state = matcher.Start();
  linserve::GrammarState next;
  for (size_t i = 0; i <= walk.size() && i < 64; ++i) {
    // The mask is the matcher's answer for every byte, and the end where it may end.
    const linserve::TokenMask& mask = masks.Allowed(state);
    for (int b = 0; b < 256; ++b) {
      const bool allowed = matcher.Advance(state, static_cast<uint8_t>(b), next);
      Require(linserve::MaskAllows(mask, b) == allowed || matcher.overflowed(),
              "the mask and the matcher disagree");
    }
    Require(linserve::MaskAllows(mask, 256) == linserve::GrammarMatcher::CanEnd(state),
            "the end token and CanEnd disagree");
    if (i == walk.size()) break;
    if (!matcher.Advance(state, static_cast<uint8_t>(walk[i]), next)) break;
    state.swap(next);
  }
  return 0;
}
