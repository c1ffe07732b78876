#include "engine/model/state.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <unordered_set>

#include <torch/types.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "engine/cpu/huge_page_blocks.h"
#include "engine/formats/safetensors.h"
#include "engine/base/status_macros.h"

namespace linserve {
namespace {

constexpr char kPositionKey[] = "position";
constexpr char kFormatKey[] = "format";
constexpr char kFormatValue[] = "linserve-state-v1";

// The grown dimension of (B, H, T, d) caches.
constexpr int64_t kGrowDim = 2;

std::string TensorName(size_t layer, const std::string& name) {
  return absl::StrCat("layers.", layer, ".", name);
}

// True when no value of `values` has every exponent bit set (NaN or Inf).
// Read in place as integers, a loop the compiler vectorizes: torch::isfinite
// made a bool tensor and a reduction per state tensor, about a millisecond
// of a 520 KiB import here, most of it faulting in those fresh tensors.
template <typename Bits>
bool NoNanOrInf(const void* values, int64_t n, Bits exponent) {
  const auto* bytes = static_cast<const unsigned char*>(values);
  bool finite = true;
  for (int64_t i = 0; i < n; ++i) {
    Bits v;
    std::memcpy(&v, bytes + i * sizeof(Bits), sizeof(Bits));
    finite &= (v & exponent) != exponent;
  }
  return finite;
}

bool AllFinite(const torch::Tensor& t) {
  if (t.is_cpu() && t.is_contiguous()) {
    if (t.scalar_type() == torch::kFloat32) {
      return NoNanOrInf<uint32_t>(t.data_ptr(), t.numel(), 0x7f800000u);
    }
    if (t.scalar_type() == torch::kFloat64) {
      return NoNanOrInf<uint64_t>(t.data_ptr(), t.numel(), 0x7ff0000000000000ull);
    }
  }
  return torch::isfinite(t).all().item<bool>();
}

std::vector<int64_t> ShapeAt(const StateTensorSpec& spec, int64_t position) {
  std::vector<int64_t> shape = spec.shape;
  for (int64_t& dim : shape) {
    if (dim < 0) dim = position;
  }
  return shape;
}

// The growing dimension of a per-session tensor (no batch dimension).
int64_t GrowingDim(const StateTensorSpec& spec) {
  return std::find(spec.shape.begin(), spec.shape.end(), -1) - spec.shape.begin();
}

// A session's blocks as one tensor (the spec's shape at every block's
// positions; the caller narrows it to the session's).
torch::Tensor Contiguous(const TensorBlocks& blocks, const StateTensorSpec& spec) {
  if (blocks.empty()) {
    std::vector<int64_t> shape = ShapeAt(spec, 0);
    return torch::empty(shape, torch::TensorOptions(spec.dtype));
  }
  return torch::cat(blocks, GrowingDim(spec));
}

// `whole` (the spec's shape at some position) cut into blocks, the last one
// padded with zeros.
TensorBlocks InBlocks(const torch::Tensor& whole, const StateTensorSpec& spec,
                      int64_t block_tokens) {
  const int64_t dim = GrowingDim(spec), length = whole.size(dim);
  TensorBlocks blocks;
  for (int64_t start = 0; start < length; start += block_tokens) {
    std::vector<int64_t> shape = whole.sizes().vec();
    shape[dim] = block_tokens;
    torch::Tensor block = EmptyStateTensor(shape, whole.options()).zero_();
    const int64_t n = std::min(block_tokens, length - start);
    block.narrow(dim, 0, n).copy_(whole.narrow(dim, start, n));
    blocks.push_back(std::move(block));
  }
  return blocks;
}

}  // namespace

bool StateLayout::Grows() const {
  for (const std::vector<StateTensorSpec>& specs : layers_) {
    for (const StateTensorSpec& spec : specs) {
      if (spec.grows()) return true;
    }
  }
  return false;
}

int64_t StateBytes(const StateLayout& layout, int64_t position) {
  int64_t bytes = 0;
  for (int64_t layer = 0; layer < layout.n_layers(); ++layer) {
    for (const StateTensorSpec& spec : layout.layer(layer)) {
      int64_t numel = 1;
      for (int64_t dim : ShapeAt(spec, position)) numel *= dim;
      bytes += numel * static_cast<int64_t>(c10::elementSize(spec.dtype));
    }
  }
  return bytes;
}

State StackStates(const std::vector<const State*>& states) {
  TORCH_CHECK(!states.empty(), "StackStates: no states");
  State out;
  for (const State* s : states) {
    out.positions.insert(out.positions.end(), s->positions.begin(), s->positions.end());
  }
  for (const State* s : states) {
    out.tables.insert(out.tables.end(), s->tables.begin(), s->tables.end());
  }
  const size_t n_layers = states[0]->layers.size();
  out.layers.resize(n_layers);
  for (size_t layer = 0; layer < n_layers; ++layer) {
    const size_t n_tensors = states[0]->layers[layer].size();
    for (size_t i = 0; i < n_tensors; ++i) {
      if (!states[0]->layers[layer][i].defined()) {  // paged: in the tables
        out.layers[layer].emplace_back();
        continue;
      }
      std::vector<torch::Tensor> parts;
      int64_t longest = 0;
      for (const State* s : states) {
        const torch::Tensor& t = s->layers[layer][i];
        if (t.dim() > kGrowDim) longest = std::max(longest, t.size(kGrowDim));
        parts.push_back(t);
      }
      const bool ragged = std::any_of(parts.begin(), parts.end(), [&](const torch::Tensor& t) {
        return t.dim() > kGrowDim && t.size(kGrowDim) != longest;
      });
      if (ragged) {  // only growing caches differ in length
        for (torch::Tensor& t : parts) {
          t = torch::constant_pad_nd(t, {0, 0, 0, longest - t.size(kGrowDim)});
        }
      }
      out.layers[layer].push_back(torch::cat(parts, 0));
    }
  }
  return out;
}

namespace {

// Per layer, per tensor: whether it grows with the position.
std::vector<std::vector<bool>> GrowingTensors(const StateLayout& layout) {
  std::vector<std::vector<bool>> grows(layout.n_layers());
  for (int64_t l = 0; l < layout.n_layers(); ++l) {
    for (const StateTensorSpec& spec : layout.layer(l)) grows[l].push_back(spec.grows());
  }
  return grows;
}

// `table` cut to the blocks that hold positions [0, position).
BlockTable Truncated(const BlockTable& table, int64_t position, int64_t block_tokens) {
  BlockTable out = table;
  const size_t blocks = static_cast<size_t>(BlocksFor(position, block_tokens));
  for (std::vector<TensorBlocks>& layer : out.layers) {
    for (TensorBlocks& tensor : layer) {
      if (tensor.size() > blocks) tensor.resize(blocks);
    }
  }
  return out;
}

}  // namespace

torch::Tensor EmptyStateTensor(const std::vector<int64_t>& shape,
                               const torch::TensorOptions& options) {
  if (!options.device().is_cpu()) return torch::empty(shape, options);
  return EmptyInSharedHugePages(shape, options.dtype().toScalarType());
}

int64_t BlocksFor(int64_t position, int64_t block_tokens) {
  return (position + block_tokens - 1) / block_tokens;
}

void WritableBlocks(TensorBlocks& blocks, int64_t begin, int64_t end, int64_t block_tokens,
                    const std::vector<int64_t>& block_shape, const torch::TensorOptions& options) {
  const int64_t needed = BlocksFor(end, block_tokens);
  if (static_cast<int64_t>(blocks.size()) > needed) blocks.resize(needed);
  for (int64_t k = begin / block_tokens; k < needed; ++k) {
    if (k >= static_cast<int64_t>(blocks.size())) {
      blocks.push_back(EmptyStateTensor(block_shape, options).zero_());
    } else if (blocks[k].use_count() > 1 || blocks[k].storage().use_count() > 1) {
      // Shared with another state (a fork, a snapshot): never written.
      blocks[k] = EmptyStateTensor(blocks[k].sizes().vec(), blocks[k].options()).copy_(blocks[k]);
    }
  }
}

namespace {

// Calls `visit` on every defined tensor of `state`: its fixed tensors, then
// its blocks.
template <typename Visit>
void ForEachTensor(const State& state, Visit&& visit) {
  for (const LayerState& layer : state.layers) {
    for (const torch::Tensor& t : layer) {
      if (t.defined()) visit(t, /*block=*/false);
    }
  }
  for (const BlockTable& table : state.tables) {
    for (const std::vector<TensorBlocks>& layer : table.layers) {
      for (const TensorBlocks& tensor : layer) {
        for (const torch::Tensor& block : tensor) visit(block, /*block=*/true);
      }
    }
  }
}

}  // namespace

ResidentStates MeasureResidentStates(const std::vector<const State*>& states) {
  ResidentStates out;
  std::unordered_set<const void*> seen;
  for (const State* state : states) {
    bool first_fixed = true;
    ForEachTensor(*state, [&](const torch::Tensor& t, bool block) {
      const bool fresh = seen.insert(t.storage().unsafeGetStorageImpl()).second;
      if (fresh) out.bytes += static_cast<int64_t>(t.nbytes());
      if (block) {
        ++out.block_references;
        if (fresh) {
          ++out.distinct_blocks;
          out.block_bytes += static_cast<int64_t>(t.nbytes());
        }
      } else if (first_fixed) {
        first_fixed = false;
        out.fixed_parts += fresh;
      }
    });
  }
  return out;
}

std::vector<State> SplitState(const State& batch, const StateLayout& layout) {
  const std::vector<std::vector<bool>> grows = GrowingTensors(layout);
  std::vector<State> out(batch.positions.size());
  for (size_t b = 0; b < out.size(); ++b) {
    const int64_t position = batch.positions[b];
    out[b].positions = {position};
    if (!batch.tables.empty()) {
      out[b].tables = {Truncated(batch.tables[b], position, layout.block_tokens())};
    }
    for (size_t l = 0; l < batch.layers.size(); ++l) {
      const LayerState& layer = batch.layers[l];
      LayerState piece;
      for (size_t i = 0; i < layer.size(); ++i) {
        if (!layer[i].defined()) {  // paged: in the tables
          piece.emplace_back();
          continue;
        }
        torch::Tensor row = layer[i].narrow(0, b, 1);
        if (grows[l][i]) row = row.narrow(kGrowDim, 0, position);
        piece.push_back(row.clone());
      }
      out[b].layers.push_back(std::move(piece));
    }
  }
  return out;
}

State KeepFixedPart(const State& one, const StateLayout& layout) {
  const std::vector<std::vector<bool>> grows = GrowingTensors(layout);
  State kept;
  kept.positions = one.positions;
  for (size_t l = 0; l < one.layers.size(); ++l) {
    LayerState part;
    // (A paged layout's blocks stay with `one`: `kept.tables` is empty.)
    for (size_t i = 0; i < one.layers[l].size(); ++i) {
      part.push_back(grows[l][i] ? torch::Tensor() : one.layers[l][i].clone());
    }
    kept.layers.push_back(std::move(part));
  }
  return kept;
}

State ResumeFromKept(const State& kept, const State& live, const StateLayout& layout) {
  const std::vector<std::vector<bool>> grows = GrowingTensors(layout);
  const int64_t position = kept.positions[0];
  State out;
  out.positions = {position};
  if (!live.tables.empty()) {
    out.tables = {Truncated(live.tables[0], position, layout.block_tokens())};
  }
  for (size_t l = 0; l < kept.layers.size(); ++l) {
    LayerState layer;
    for (size_t i = 0; i < kept.layers[l].size(); ++i) {
      if (grows[l][i] && !live.tables.empty()) {
        layer.emplace_back();
      } else {
        layer.push_back(grows[l][i] ? live.layers[l][i].narrow(kGrowDim, 0, position).clone()
                                    : kept.layers[l][i].clone());
      }
    }
    out.layers.push_back(std::move(layer));
  }
  return out;
}

State CloneState(const State& state) {
  State out;
  out.positions = state.positions;
  out.tables = state.tables;  // shared blocks: copied when written
  for (const LayerState& layer : state.layers) {
    LayerState copy;
    for (const torch::Tensor& t : layer) copy.push_back(t.defined() ? t.clone() : t);
    out.layers.push_back(std::move(copy));
  }
  return out;
}

State MoveState(const State& state, const torch::Device& device) {
  State out;
  out.positions = state.positions;
  out.tables = state.tables;
  for (BlockTable& table : out.tables) {
    for (std::vector<TensorBlocks>& layer : table.layers) {
      for (TensorBlocks& tensor : layer) {
        for (torch::Tensor& block : tensor) block = block.to(device);
      }
    }
  }
  for (const LayerState& layer : state.layers) {
    LayerState moved;
    for (const torch::Tensor& t : layer) moved.push_back(t.defined() ? t.to(device) : t);
    out.layers.push_back(std::move(moved));
  }
  return out;
}

std::string SerializeState(const State& state, const StateLayout& layout) {
  TORCH_CHECK(state.batch_size() == 1, "SerializeState: one session at a time");
  const int64_t position = state.positions[0];
  TensorMap tensors;
  for (size_t layer = 0; layer < state.layers.size(); ++layer) {
    const std::vector<StateTensorSpec>& specs = layout.layer(layer);
    for (size_t i = 0; i < specs.size(); ++i) {
      torch::Tensor t = state.layers[layer][i].defined()
                            ? state.layers[layer][i].squeeze(0)
                            : Contiguous(state.tables[0].layers[layer][i], specs[i]);
      // A growing cache may hold spare capacity beyond the position.
      if (specs[i].grows()) {
        t = t.narrow(kGrowDim - 1, 0, position);
      }
      tensors[TensorName(layer, specs[i].name)] = t;
    }
  }
  return SerializeSafetensors(
      tensors, {{kFormatKey, kFormatValue}, {kPositionKey, absl::StrCat(position)}});
}

namespace {

// A serialized state parsed and checked against the layout: its position
// and its tensors (views of the bytes when read in place).
struct CheckedState {
  int64_t position = 0;
  TensorMap tensors;
};

absl::StatusOr<CheckedState> ParseAndCheckState(std::string_view bytes, const StateLayout& layout,
                                                bool in_place) {
  const int64_t n_layers = layout.n_layers();
  LINSERVE_ASSIGN_OR_RETURN(SafetensorsContents contents,
                            in_place ? ParseSafetensorsInPlace(bytes) : ParseSafetensors(bytes));
  auto format = contents.metadata.find(kFormatKey);
  if (format == contents.metadata.end() || format->second != kFormatValue) {
    return absl::DataLossError(absl::StrCat("state: metadata '", kFormatKey, "' is not '",
                                            kFormatValue, "'"));
  }
  int64_t position = -1;
  auto pos = contents.metadata.find(kPositionKey);
  if (pos == contents.metadata.end() || !absl::SimpleAtoi(pos->second, &position) ||
      position < 0) {
    return absl::DataLossError("state: metadata 'position' is missing or not a count");
  }
  std::map<std::string, TensorSpec> expected;
  for (int64_t layer = 0; layer < n_layers; ++layer) {
    for (const StateTensorSpec& spec : layout.layer(layer)) {
      expected[TensorName(layer, spec.name)] = {ShapeAt(spec, position), spec.dtype};
    }
  }
  // States written while the sums over positions were float32 hold the same
  // sums, so they load widened (exactly) to the kernel's float64.
  for (auto& [name, tensor] : contents.tensors) {
    auto spec = expected.find(name);
    if (spec != expected.end() && spec->second.dtype == torch::kFloat64 &&
        tensor.scalar_type() == torch::kFloat32) {
      tensor = tensor.to(torch::kFloat64);
    }
  }
  LINSERVE_RETURN_IF_ERROR(CheckTensors(contents.tensors, expected));
  // Every state a model produces is finite (the kernels take every exponent
  // against a running maximum and add epsilon to every denominator); a NaN or an
  // Inf would poison every later token of the session, so it is refused here.
  for (const auto& [name, tensor] : contents.tensors) {
    if (tensor.is_floating_point() && !AllFinite(tensor)) {
      return absl::DataLossError(absl::StrCat("state: tensor '", name, "' holds NaN or Inf"));
    }
  }
  return CheckedState{position, std::move(contents.tensors)};
}

}  // namespace

absl::StatusOr<int64_t> CheckSerializedState(std::string_view bytes, const StateLayout& layout) {
  LINSERVE_ASSIGN_OR_RETURN(CheckedState checked,
                            ParseAndCheckState(bytes, layout, /*in_place=*/true));
  return checked.position;
}

absl::StatusOr<State> DeserializeState(std::string_view bytes, const StateLayout& layout,
                                       const torch::Device& device) {
  LINSERVE_ASSIGN_OR_RETURN(CheckedState checked,
                            ParseAndCheckState(bytes, layout, /*in_place=*/false));
  State state;
  state.positions = {checked.position};
  if (layout.Paged()) state.tables.resize(1);
  for (int64_t layer = 0; layer < layout.n_layers(); ++layer) {
    LayerState tensors;
    std::vector<TensorBlocks> blocks;
    for (const StateTensorSpec& spec : layout.layer(layer)) {
      const torch::Tensor& whole = checked.tensors.at(TensorName(layer, spec.name));
      if (layout.Paged() && spec.grows()) {
        tensors.emplace_back();
        blocks.push_back(InBlocks(whole.to(device), spec, layout.block_tokens()));
      } else {
        tensors.push_back(whole.unsqueeze(0).to(device));
        blocks.emplace_back();
      }
    }
    state.layers.push_back(std::move(tensors));
    if (layout.Paged()) state.tables[0].layers.push_back(std::move(blocks));
  }
  return state;
}

}  // namespace linserve
