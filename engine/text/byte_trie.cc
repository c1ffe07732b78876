#include "engine/text/byte_trie.h"

#include <algorithm>
#include <cstring>

namespace linserve {
namespace {

// Below this many children a plain loop beats memchr's call and setup.
constexpr uint32_t kLinearScanLimit = 16;

}  // namespace

ByteTrie ByteTrie::Build(absl::Span<const Piece> pieces) {
  // Sorted, the pieces under any node form one contiguous run, and the runs
  // of its children follow each other in byte order: each node is built from
  // its run alone, without a pointer-based trie in between.
  std::vector<Piece> sorted(pieces.begin(), pieces.end());
  std::sort(sorted.begin(), sorted.end(),
            [](const Piece& a, const Piece& b) { return a.bytes < b.bytes; });

  // The run of pieces [begin, end) under each node, all sharing its depth
  // bytes of prefix. Nodes are appended in breadth-first order and built in
  // index order, so the array itself is the queue.
  struct Run {
    size_t begin, end, depth;
  };
  ByteTrie trie;
  trie.nodes_.push_back({-1, 0, 0});
  trie.labels_.push_back(0);
  std::vector<Run> runs = {{0, sorted.size(), 0}};
  for (size_t n = 0; n < trie.nodes_.size(); ++n) {
    auto [begin, end, depth] = runs[n];
    // The shortest piece of the run sorts first; if it has exactly `depth`
    // bytes it ends at this node.
    if (begin < end && sorted[begin].bytes.size() == depth) {
      trie.nodes_[n].id = sorted[begin].id;
      ++begin;
    }
    trie.nodes_[n].first_child = static_cast<uint32_t>(trie.nodes_.size());
    while (begin < end) {
      const uint8_t byte = static_cast<uint8_t>(sorted[begin].bytes[depth]);
      size_t child_end = begin + 1;
      while (child_end < end && static_cast<uint8_t>(sorted[child_end].bytes[depth]) == byte) {
        ++child_end;
      }
      trie.nodes_.push_back({-1, 0, 0});
      trie.labels_.push_back(byte);
      runs.push_back({begin, child_end, depth + 1});
      ++trie.nodes_[n].num_children;
      begin = child_end;
    }
  }
  const Node& root = trie.nodes_[0];
  for (uint32_t c = root.first_child; c < root.first_child + root.num_children; ++c) {
    trie.root_children_[trie.labels_[c]] = c;
  }
  trie.grandchildren_.assign(256 * 256, 0);
  for (uint32_t c = root.first_child; c < root.first_child + root.num_children; ++c) {
    const Node& child = trie.nodes_[c];
    for (uint32_t g = child.first_child; g < child.first_child + child.num_children; ++g) {
      trie.grandchildren_[trie.labels_[c] << 8 | trie.labels_[g]] = g;
    }
  }
  return trie;
}

uint32_t ByteTrie::Child(const Node& node, uint8_t byte) const {
  const uint8_t* labels = labels_.data() + node.first_child;
  if (node.num_children <= kLinearScanLimit) {
    for (uint32_t i = 0; i < node.num_children; ++i) {
      if (labels[i] == byte) return node.first_child + i;
    }
    return 0;
  }
  const void* found = std::memchr(labels, byte, node.num_children);
  if (found == nullptr) return 0;
  return node.first_child + static_cast<uint32_t>(static_cast<const uint8_t*>(found) - labels);
}

ByteTrie::Match ByteTrie::LongestPrefix(std::string_view text) const {
  Match best{-1, 0};
  if (text.empty()) return best;
  const uint8_t first = static_cast<uint8_t>(text[0]);
  uint32_t n = root_children_[first];
  if (n == 0) return best;
  if (nodes_[n].id >= 0) best = {nodes_[n].id, 1};
  if (text.size() == 1) return best;
  n = grandchildren_[first << 8 | static_cast<uint8_t>(text[1])];
  size_t length = 2;
  while (n != 0) {
    const Node& node = nodes_[n];
    if (node.id >= 0) best = {node.id, length};
    if (length == text.size() || node.num_children == 0) break;
    n = Child(node, static_cast<uint8_t>(text[length]));
    ++length;
  }
  return best;
}

}  // namespace linserve
