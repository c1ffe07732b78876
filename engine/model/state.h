#ifndef LINSERVE_ENGINE_STATE_H_
#define LINSERVE_ENGINE_STATE_H_

#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

#include <torch/types.h>

#include "absl/status/statusor.h"

namespace linserve {

// The recurrent state of one layer for a batch of sessions: the
// architecture's fixed list of tensors, each with a leading batch dimension B.
using LayerState = std::vector<torch::Tensor>;

// Describes one state tensor, per session (no batch dimension).
struct StateTensorSpec {
  std::string name;
  std::vector<int64_t> shape;  // -1 marks the dimension that grows with the position
  torch::ScalarType dtype;

  bool grows() const { return std::find(shape.begin(), shape.end(), -1) != shape.end(); }
};

// What a model's state is made of, layer by layer: most architectures keep
// the same tensors in every layer; a hybrid (Qwen3.5) keeps one list per
// layer kind, so each layer has its own.
class StateLayout {
 public:
  StateLayout() = default;
  // The same tensors in each of `n_layers` layers.
  StateLayout(std::vector<StateTensorSpec> every_layer, int64_t n_layers)
      : layers_(n_layers, std::move(every_layer)) {}
  // Each layer's own tensors; with `block_tokens` > 0 the growing ones are
  // kept in blocks of that many positions (State::tables).
  explicit StateLayout(std::vector<std::vector<StateTensorSpec>> per_layer,
                       int64_t block_tokens = 0)
      : layers_(std::move(per_layer)), block_tokens_(block_tokens) {}

  int64_t n_layers() const { return static_cast<int64_t>(layers_.size()); }
  // Layer `i`'s tensors, per session.
  const std::vector<StateTensorSpec>& layer(int64_t i) const { return layers_[i]; }

  // True when a tensor grows with the position (a KV cache).
  bool Grows() const;
  // Positions per block of a growing tensor; 0 when growing tensors are
  // whole (contiguous) tensors.
  int64_t block_tokens() const { return block_tokens_; }
  bool Paged() const { return block_tokens_ > 0 && Grows(); }

 private:
  std::vector<std::vector<StateTensorSpec>> layers_;
  int64_t block_tokens_ = 0;
};

// One session's growing tensor in blocks, in position order: block k holds
// positions [k n, (k + 1) n) for n = StateLayout::block_tokens(), its shape
// the spec's with -1 replaced by n. A block is shared by every state made
// from another without copying (a fork, a prefix-cache snapshot, a kept
// state, a named state), and so never written while shared: a writer first
// replaces a shared block by its own copy (WritableBlocks).
using TensorBlocks = std::vector<torch::Tensor>;

// One session's growing tensors in blocks: per layer, per tensor of the
// layer (empty for a tensor that does not grow).
struct BlockTable {
  std::vector<std::vector<TensorBlocks>> layers;
};

// The recurrent state of a batch of sessions: per layer, the kind's fixed
// list of tensors with a leading batch dimension, plus each session's position
// (tokens consumed). A single session is a batch of one. In a paged layout
// the growing tensors are undefined in `layers` and held, per session, in
// `tables` (each session's blocks are its own list, so batching and
// splitting move no KV bytes).
struct State {
  std::vector<LayerState> layers;
  std::vector<int64_t> positions;
  std::vector<BlockTable> tables;  // paged layouts: one per session, else empty

  int64_t batch_size() const { return static_cast<int64_t>(positions.size()); }
};

// Bytes of one session's state at `position`: a function of the config only,
// except for KV caches (the softmax baseline's, Qwen3.5's attention layers'),
// which grow with the position.
int64_t StateBytes(const StateLayout& layout, int64_t position);

// An uninitialised tensor for a state: on the CPU in huge pages, shared
// among small tensors (engine/cpu/huge_page_blocks.h), since every decode
// step reads a session's KV blocks and recurrent state from memory.
torch::Tensor EmptyStateTensor(const std::vector<int64_t>& shape,
                               const torch::TensorOptions& options);

// Blocks covering positions [0, position).
int64_t BlocksFor(int64_t position, int64_t block_tokens);

// Makes `blocks` hold positions [0, end) and the blocks covering [begin, end)
// the caller's own, so that it may write those positions: a shared block
// there is replaced by a copy, missing ones are made (zeros, of shape
// `block_shape`). Blocks past `end` are dropped.
void WritableBlocks(TensorBlocks& blocks, int64_t begin, int64_t end, int64_t block_tokens,
                    const std::vector<int64_t>& block_shape, const torch::TensorOptions& options);

// What a set of states holds in memory, a tensor or block that several of
// them share (a fork shares its source's state until either moves on; forks,
// snapshots and kept states share KV blocks) counted once, a whole block
// however few of its positions are used.
struct ResidentStates {
  int64_t bytes = 0;        // every tensor and block once
  int64_t fixed_parts = 0;  // distinct sets of fixed tensors (states that share none)
  int64_t block_references = 0;  // KV blocks the states reference
  int64_t distinct_blocks = 0;   // and how many distinct ones among them
  int64_t block_bytes = 0;       // the distinct blocks' bytes
};
ResidentStates MeasureResidentStates(const std::vector<const State*>& states);

// Stacks states (of any batch sizes) into one batch, in order. Growing caches
// are zero-padded to the longest; paged ones keep their blocks. All states
// must share a kind and device.
State StackStates(const std::vector<const State*>& states);

// Splits a batch into single-session states. A growing cache (a dimension
// the layout marks -1) is trimmed to the session's position, so
// a piece holds no padding of the batch nor spare capacity of decode steps.
// The pieces own their memory: advancing one never touches another.
std::vector<State> SplitState(const State& batch, const StateLayout& layout);

// A copy that changes independently of `state` (what ForkSession needs):
// the tensors are copied, a paged layout's blocks shared (copy on write).
State CloneState(const State& state);

// What a session keeps of its state at a point of its conversation, to go
// back to it later (GenerateRequest.keep_state_at): a copy of one session's
// tensors that do not grow with the position (the whole of a constant state,
// a hybrid's recurrent part), the growing ones left undefined.
State KeepFixedPart(const State& one, const StateLayout& layout);
// The state at `kept`'s position: a copy of its fixed part, and `live`'s
// growing tensors cut to that position (a paged layout's blocks shared, not
// copied). `live` must be the same session
// later on, having consumed the same tokens up to there: a KV cache only
// appends, so its entries before that position are the kept state's own.
// The result owns its memory.
State ResumeFromKept(const State& kept, const State& live, const StateLayout& layout);

// The same state on `device` (CPU, or CUDA when LibTorch has it).
State MoveState(const State& state, const torch::Device& device);

// One session's state as bytes (safetensors layout: tensors
// "layers.<i>.<name>", metadata "position") and back, bit-exactly. Parsing
// checks every tensor's name, dtype and shape against the layout, and
// refuses NaN and Inf (DataLoss).
std::string SerializeState(const State& state, const StateLayout& layout);
absl::StatusOr<State> DeserializeState(std::string_view bytes, const StateLayout& layout,
                                       const torch::Device& device);
// Every check of DeserializeState, the tensors read where they lie in
// `bytes` (nothing is copied or built): OK with the state's position exactly
// when DeserializeState would succeed, memory allowing.
absl::StatusOr<int64_t> CheckSerializedState(std::string_view bytes, const StateLayout& layout);

}  // namespace linserve

#endif  // LINSERVE_ENGINE_STATE_H_
