#include "engine/grammar/grammar_matcher.h"

#include <algorithm>

namespace linserve {
namespace {

uint64_t Key(int32_t position, int32_t below) {
  return static_cast<uint64_t>(static_cast<uint32_t>(position)) << 32 |
         static_cast<uint32_t>(below);
}

void SortUnique(std::vector<int32_t>& ids) {
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
}

}  // namespace

GrammarMatcher::GrammarMatcher(const Grammar& grammar, int max_parses)
    : max_parses_(max_parses) {
  rule_starts_.resize(grammar.rules.size());
  for (size_t r = 0; r < grammar.rules.size(); ++r) {
    for (const GrammarSequence& alternative : grammar.rules[r].alternatives) {
      rule_starts_[r].push_back(static_cast<int32_t>(symbols_.size()));
      for (const GrammarSymbol& s : alternative) {
        symbols_.push_back(s.is_rule() ? Symbol{Kind::kRule, 0, 0, s.rule}
                                       : Symbol{Kind::kBytes, s.lo, s.hi, -1});
      }
      symbols_.push_back({Kind::kEnd, 0, 0, -1});
    }
  }
  nodes_.push_back({-1, -1});  // kAcceptId
  successors_.emplace_back();
  successors_known_.push_back(true);
  for (int32_t start : rule_starts_[grammar.root]) Expand(start, kAcceptId, start_);
  SortUnique(start_);
}

int32_t GrammarMatcher::Intern(int32_t position, int32_t below) {
  auto [it, inserted] = node_ids_.try_emplace(Key(position, below), 0);
  if (inserted) {
    it->second = static_cast<int32_t>(nodes_.size());
    nodes_.push_back({position, below});
    successors_.emplace_back();
    successors_known_.push_back(false);
  }
  return it->second;
}

void GrammarMatcher::Expand(int32_t position, int32_t below, std::vector<int32_t>& out) {
  work_.assign(1, {position, below});
  seen_.clear();
  while (!work_.empty()) {
    auto [p, under] = work_.back();
    work_.pop_back();
    if (!seen_.try_emplace(Key(p, under), true).second) continue;
    const Symbol& symbol = symbols_[p];
    switch (symbol.kind) {
      case Kind::kEnd:
        // This alternative is done: resume the frame below, or accept.
        if (under == kAcceptId) {
          out.push_back(kAcceptId);
        } else {
          work_.push_back({nodes_[under].position, nodes_[under].below});
        }
        break;
      case Kind::kBytes:
        out.push_back(Intern(p, under));
        break;
      case Kind::kRule: {
        // A rule called last in its alternative needs no frame to come back
        // to, so right recursion (x*) does not deepen the stack.
        const int32_t resume =
            symbols_[p + 1].kind == Kind::kEnd ? under : Intern(p + 1, under);
        for (int32_t start : rule_starts_[symbol.rule]) work_.push_back({start, resume});
        break;
      }
    }
  }
}

const std::vector<int32_t>& GrammarMatcher::Successors(int32_t node) {
  if (!successors_known_[node]) {
    std::vector<int32_t> next;
    Expand(nodes_[node].position + 1, nodes_[node].below, next);
    SortUnique(next);
    successors_[node] = std::move(next);  // Expand may have grown nodes_: index again
    successors_known_[node] = true;
  }
  return successors_[node];
}

bool GrammarMatcher::Advance(const GrammarState& from, uint8_t byte, GrammarState& to) {
  to.clear();
  for (int32_t node : from) {
    if (node == kAcceptId) continue;
    const Symbol& top = symbols_[nodes_[node].position];
    if (byte < top.lo || byte > top.hi) continue;
    const std::vector<int32_t>& next = Successors(node);
    to.insert(to.end(), next.begin(), next.end());
  }
  if (to.empty()) return false;
  SortUnique(to);
  if (static_cast<int>(to.size()) > max_parses_) {
    ++overflows_;
    to.clear();
    return false;
  }
  return true;
}

bool GrammarMatcher::AdvanceAll(GrammarState& state, std::string_view bytes) {
  GrammarState next;
  for (char c : bytes) {
    if (!Advance(state, static_cast<uint8_t>(c), next)) {
      state.clear();
      return false;
    }
    state.swap(next);
  }
  return true;
}

}  // namespace linserve
