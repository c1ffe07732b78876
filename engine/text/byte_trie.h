#ifndef LINSERVE_ENGINE_BYTE_TRIE_H_
#define LINSERVE_ENGINE_BYTE_TRIE_H_

#include <array>
#include <cstdint>
#include <string_view>
#include <vector>

#include "absl/types/span.h"

namespace linserve {

// A trie over byte strings that answers "which of the pieces is the longest
// prefix of this text?", the one question greedy tokenization asks at every
// position.
//
// Layout, chosen for that question (and measured: bench/tokenizer_bench.cc):
// the nodes sit in one flat array in breadth-first order, and the children of
// a node are consecutive, so a node stores only where its children start and
// how many there are; their edge bytes sit in a parallel byte array that a
// lookup scans. The first two levels, which every lookup passes and whose
// nodes have the most children, come from dense tables instead: 256 entries
// for the root's children, 65,536 for their children.
// Immutable after Build, so every method is thread-safe.
class ByteTrie {
 public:
  struct Piece {
    std::string_view bytes;  // non-empty
    int32_t id;              // >= 0
  };

  // The pieces must be distinct and non-empty (the caller checks; the
  // vocabulary parser reports which line breaks that).
  static ByteTrie Build(absl::Span<const Piece> pieces);

  struct Match {
    int32_t id;     // the longest piece that prefixes the text; -1 if none
    size_t length;  // its length in bytes; 0 if none
  };

  // The longest piece that `text` starts with.
  Match LongestPrefix(std::string_view text) const;

  // Number of nodes, the root included (a measure of the trie's size).
  size_t num_nodes() const { return nodes_.size(); }

 private:
  struct Node {
    int32_t id;            // the piece ending here; -1 if none
    uint32_t first_child;  // index in nodes_ of the first child
    uint32_t num_children;
  };

  // The child of `node` reached by `byte`; 0 (the root, never a child) if none.
  uint32_t Child(const Node& node, uint8_t byte) const;

  std::vector<Node> nodes_;                    // nodes_[0] is the root
  std::vector<uint8_t> labels_;                // labels_[i]: the byte on the edge into node i
  std::array<uint32_t, 256> root_children_{};  // 0 where the root has no child
  // The node two bytes down, indexed by (first byte << 8 | second byte); 0
  // where there is none. 256 KB that skip the widest child searches (the
  // children of " ", "e", "t"... number in the hundreds).
  std::vector<uint32_t> grandchildren_;
};

}  // namespace linserve

#endif  // LINSERVE_ENGINE_BYTE_TRIE_H_
