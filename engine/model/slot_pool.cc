#include "engine/model/slot_pool.h"

#include <torch/torch.h>

#include <utility>

namespace linserve {
namespace {

constexpr int64_t kFirstCapacity = 8;

}  // namespace

SlotPool::SlotPool(StateLayout layout)
    : layout_(std::move(layout)), grows_(layout_.Grows() && !layout_.Paged()) {}

int64_t SlotPool::Join(const State& state) {
  const int64_t slot = size();
  if (grows_) {
    Split();
    members_.push_back(CloneState(state));
    batch_.positions.push_back(state.positions[0]);
    return slot;
  }
  if (pool_.empty()) {
    // The pool takes the shapes, dtypes and device of the first state.
    for (const LayerState& layer : state.layers) {
      LayerState rows;
      for (const torch::Tensor& t : layer) {
        if (!t.defined()) {  // paged: in the tables
          rows.emplace_back();
          continue;
        }
        std::vector<int64_t> shape = t.sizes().vec();
        shape[0] = kFirstCapacity;
        rows.push_back(EmptyStateTensor(shape, t.options()));
      }
      pool_.push_back(std::move(rows));
    }
    capacity_ = kFirstCapacity;
  }
  if (slot == capacity_) Reserve(2 * capacity_);
  torch::NoGradGuard no_grad;
  for (size_t l = 0; l < pool_.size(); ++l) {
    for (size_t t = 0; t < pool_[l].size(); ++t) {
      if (pool_[l][t].defined()) pool_[l][t][slot].copy_(state.layers[l][t][0]);
    }
  }
  batch_.positions.push_back(state.positions[0]);
  if (!state.tables.empty()) batch_.tables.push_back(state.tables[0]);  // shared, not copied
  views_.clear();
  return slot;
}

State SlotPool::Leave(int64_t slot) {
  const int64_t last = size() - 1;
  if (grows_) Split();
  State out;
  out.positions = {batch_.positions[slot]};
  batch_.positions[slot] = batch_.positions[last];
  batch_.positions.pop_back();
  if (grows_) {
    out = std::move(members_[slot]);
    members_[slot] = std::move(members_[last]);
    members_.pop_back();
    return out;
  }
  if (!batch_.tables.empty()) {
    out.tables = {std::move(batch_.tables[slot])};
    if (slot != last) batch_.tables[slot] = std::move(batch_.tables[last]);
    batch_.tables.pop_back();
  }
  torch::NoGradGuard no_grad;
  for (size_t l = 0; l < pool_.size(); ++l) {
    LayerState layer;
    for (torch::Tensor& rows : pool_[l]) {
      if (!rows.defined()) {
        layer.emplace_back();
        continue;
      }
      layer.push_back(rows.narrow(0, slot, 1).clone());
      if (slot != last) rows[slot].copy_(rows[last]);
    }
    out.layers.push_back(std::move(layer));
  }
  views_.clear();
  return out;
}

State& SlotPool::Batch() {
  if (grows_) {
    if (!stacked_ && !members_.empty()) {
      std::vector<const State*> states;
      for (const State& member : members_) states.push_back(&member);
      batch_ = StackStates(states);
      members_.clear();
      stacked_ = true;
    }
    return batch_;
  }
  if (views_.empty()) MakeViews();
  return batch_;
}

void SlotPool::Absorb() {
  if (grows_) return;
  torch::NoGradGuard no_grad;
  for (size_t l = 0; l < views_.size(); ++l) {
    for (size_t t = 0; t < views_[l].size(); ++t) {
      torch::Tensor& stepped = batch_.layers[l][t];
      if (!views_[l][t].defined() || stepped.is_same(views_[l][t])) continue;
      // The model replaced this tensor (RWKV-7's token shifts): keep it.
      views_[l][t].copy_(stepped);
      stepped = views_[l][t];
    }
  }
}

void SlotPool::Reserve(int64_t slots) {
  torch::NoGradGuard no_grad;
  for (LayerState& layer : pool_) {
    for (torch::Tensor& rows : layer) {
      if (!rows.defined()) continue;
      std::vector<int64_t> shape = rows.sizes().vec();
      shape[0] = slots;
      torch::Tensor bigger = EmptyStateTensor(shape, rows.options());
      bigger.narrow(0, 0, size()).copy_(rows.narrow(0, 0, size()));
      rows = std::move(bigger);
    }
  }
  capacity_ = slots;
  views_.clear();
}

void SlotPool::MakeViews() {
  views_.clear();
  batch_.layers.clear();
  for (const LayerState& layer : pool_) {
    LayerState views;
    for (const torch::Tensor& rows : layer) {
      views.push_back(rows.defined() ? rows.narrow(0, 0, size()) : rows);
    }
    views_.push_back(views);
    batch_.layers.push_back(std::move(views));
  }
}

void SlotPool::Split() {
  if (!stacked_) return;
  members_ = SplitState(batch_, layout_);
  batch_.layers.clear();
  stacked_ = false;
}

}  // namespace linserve
