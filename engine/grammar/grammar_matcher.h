#ifndef LINSERVE_ENGINE_GRAMMAR_GRAMMAR_MATCHER_H_
#define LINSERVE_ENGINE_GRAMMAR_GRAMMAR_MATCHER_H_

#include <cstdint>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "engine/grammar/grammar.h"

namespace linserve {

// Where a match stands: the parses still alive, as sorted ids of interned
// stacks of the matcher that made it (kAcceptId: one parse has matched the
// whole grammar). Equal positions have equal ids, so a state is also a key
// for caching what depends on it (the token mask). Empty: the bytes so far
// match no sentence of the grammar.
using GrammarState = std::vector<int32_t>;

// Walks a byte grammar as a pushdown automaton with every parse at once, the
// way llama.cpp's grammar does, but over bytes and with its stacks interned:
// a stack is a node (position in a rule, the stack below), and equal stacks
// are one node, so states compare, hash and copy as a few integers, and what
// follows a node when it consumes a byte is computed once per node.
//
// One matcher serves every session constrained by the same grammar; each
// holds its own GrammarState. Not thread-safe: the engine thread owns it.
class GrammarMatcher {
 public:
  static constexpr int32_t kAcceptId = 0;

  // `grammar` must have passed CheckGrammar. `max_parses` bounds the
  // parses alive in one state: an ambiguous grammar can double them with
  // every byte.
  explicit GrammarMatcher(const Grammar& grammar, int max_parses = 4096);

  GrammarState Start() const { return start_; }

  // The state after `byte`; false (and `to` empty) when the grammar does not
  // allow it there. `from` and `to` must differ.
  bool Advance(const GrammarState& from, uint8_t byte, GrammarState& to);
  // Consumes `bytes` in order; false if one of them is not allowed.
  bool AdvanceAll(GrammarState& state, std::string_view bytes);

  // Whether the bytes so far form a whole sentence (an end of text may follow).
  static bool CanEnd(const GrammarState& state) {
    return !state.empty() && state.front() == kAcceptId;
  }
  // Whether a state allows anything more than ending.
  static bool CanContinue(const GrammarState& state) {
    return state.size() > (CanEnd(state) ? 1u : 0u);
  }

  // A state with more parses than max_parses was refused as if its byte were
  // not allowed; this says that happened, so the caller can report it.
  bool overflowed() const { return overflows_ > 0; }
  // How many times that happened so far (a walk compares it before and after).
  int64_t overflows() const { return overflows_; }
  // Interned stacks so far: the matcher's memory grows with this.
  size_t num_nodes() const { return nodes_.size(); }

 private:
  enum class Kind : uint8_t { kBytes, kRule, kEnd };
  struct Symbol {
    Kind kind;
    uint8_t lo, hi;  // kBytes
    int32_t rule;    // kRule
  };
  struct Node {
    int32_t position;  // into symbols_: the byte symbol on top, or where the frame resumes
    int32_t below;     // the node under it; kAcceptId for the bottom
  };

  int32_t Intern(int32_t position, int32_t below);
  // Every stack reached from (position, below) without consuming a byte:
  // rules opened, finished alternatives popped; adds tops to `out`.
  void Expand(int32_t position, int32_t below, std::vector<int32_t>& out);
  // What consuming the top byte of `node` leads to (cached per node).
  const std::vector<int32_t>& Successors(int32_t node);

  std::vector<Symbol> symbols_;                     // every alternative, each ended by kEnd
  std::vector<std::vector<int32_t>> rule_starts_;   // rule -> its alternatives' first positions
  std::vector<Node> nodes_;                         // nodes_[0]: the empty stack
  absl::flat_hash_map<uint64_t, int32_t> node_ids_;
  std::vector<std::vector<int32_t>> successors_;    // per node, once computed
  std::vector<bool> successors_known_;
  GrammarState start_;
  int max_parses_;
  int64_t overflows_ = 0;
  // Scratch of Expand.
  std::vector<std::pair<int32_t, int32_t>> work_;
  absl::flat_hash_map<uint64_t, bool> seen_;
};

}  // namespace linserve

#endif  // LINSERVE_ENGINE_GRAMMAR_GRAMMAR_MATCHER_H_
