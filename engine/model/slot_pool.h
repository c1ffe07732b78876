#ifndef LINSERVE_ENGINE_SLOT_POOL_H_
#define LINSERVE_ENGINE_SLOT_POOL_H_

#include <cstdint>
#include <vector>

#include "engine/model/state.h"

namespace linserve {

// The decode batch's states, kept in one preallocated batch-major pool: row r
// of every state tensor is slot r, and the batch is always the first size()
// slots, so the model steps a view of the pool and nothing is copied.
// Joining the batch copies one session's state into the next slot; leaving
// copies the slot out and the last slot into its place. So a change of
// membership costs one or two sessions' states, never the whole batch, and a
// snapshot or checkpoint reads one slot.
//
// A paged layout's growing tensors (Qwen3.5's KV cache) are each session's
// block table, which joins and leaves the batch without a copy. A layout
// whose state grows with the position in whole tensors (the softmax
// baseline) has rows of different lengths: for it the pool falls back to
// stacking its members into a batch when it steps and splitting them when
// one leaves.
// Not thread-safe: the engine thread's.
class SlotPool {
 public:
  explicit SlotPool(StateLayout layout);

  int64_t size() const { return static_cast<int64_t>(batch_.positions.size()); }

  // Adds a single-session state as the last slot and returns that slot.
  int64_t Join(const State& state);

  // Removes `slot` and returns its state, which owns its memory. The last
  // slot, if it was another, now lives at `slot`.
  State Leave(int64_t slot);

  // The batch to step: views of the pool's first size() slots, with their
  // positions. The model may update its tensors in place or replace them;
  // Absorb() afterwards keeps what it replaced.
  State& Batch();
  void Absorb();

 private:
  // Room for `slots` sessions, keeping the rows in use.
  void Reserve(int64_t slots);
  // The views of the first size() slots.
  void MakeViews();
  // Growing layouts: the stacked batch back into members_.
  void Split();

  const StateLayout layout_;
  const bool grows_;
  int64_t capacity_ = 0;
  std::vector<LayerState> pool_;   // per layer, per tensor: (capacity_, ...)
  std::vector<LayerState> views_;  // pool_ narrowed to the first size() rows
  State batch_;                    // what Batch() hands out; positions of every slot
  // Growing layouts only: each member's own state, while not stacked.
  std::vector<State> members_;
  bool stacked_ = false;
};

}  // namespace linserve

#endif  // LINSERVE_ENGINE_SLOT_POOL_H_
