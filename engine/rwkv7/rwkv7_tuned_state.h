#ifndef LINSERVE_ENGINE_RWKV7_TUNED_STATE_H_
#define LINSERVE_ENGINE_RWKV7_TUNED_STATE_H_

// State-tuning files: an initial state trained instead of the weights
// (RWKV-PEFT's "state tuning": a persona, a style or a task in a few MB, on
// one set of weights), read into this engine's RWKV-7 state.
//
// Two layouts, each holding one tensor per layer, `blocks.{i}.att.time_state`
// of shape (H, N, N):
//   - RWKV-PEFT's `.pth` (torch.save of the trained parameters,
//     nn.Parameter(torch.zeros(n_head, head_size, head_size)); float32,
//     bfloat16 or float16): row by value, column by key, as this engine's WKV
//     state and BlinkDL's rwkv_v7_demo_rnn.py (vk = v.view(H,N,1) @
//     k.view(H,1,N)), so it is taken as it is;
//   - ai00's safetensors `.state` (its converter swaps the last two axes and
//     writes float16): row by key, column by value, so it is transposed back.
// The container tells them apart: a zip (`.pth`) is RWKV-PEFT's, safetensors
// ai00's. The token-shift states start at zero, as every loader of these
// files does, and the position at 0.
//
// These files carry no fingerprint: a tuned state is checked against the
// model's shape only (layers, H, N), never against the weights it was
// trained with.

#include <string>
#include <string_view>
#include <vector>

#include <torch/types.h>

#include "absl/status/statusor.h"
#include "engine/model/language_model.h"
#include "engine/model/state.h"
#include "engine/rwkv7/rwkv7_config.h"

namespace linserve {

enum class TunedStateLayout {
  kValueByKey,  // RWKV-PEFT's .pth
  kKeyByValue,  // ai00's safetensors
};

struct TunedState {
  TunedStateLayout layout = TunedStateLayout::kValueByKey;
  // Per layer, (H, N, N) float32 on the CPU, row by value, column by key
  // (this engine's layout, whatever the file's).
  std::vector<torch::Tensor> wkv;
};

// Parses a state-tuning file for a model of `config`. InvalidArgument, naming
// the tensor, for: a container that is neither a zip nor safetensors, a
// tensor that is not a layer's time_state, a missing layer, a shape other
// than (H, N, N) of the model, a dtype other than float32, bfloat16 or
// float16, and a value that is NaN or infinite; DataLoss for a broken
// container. The .pth reader's bounds apply (engine/formats/pth_reader.h).
absl::StatusOr<TunedState> ParseRwkv7TunedState(std::string_view bytes,
                                                const Rwkv7Config& config);

// A fresh one-session state of `model`, an RWKV-7 of the config `tuned` was
// parsed for, with the tuned WKV matrices on the model's device. The
// token-shift vectors are zero and the position 0. InvalidArgument when the
// model's state is not RWKV-7's of that shape.
absl::StatusOr<State> TunedStateToState(const TunedState& tuned, const LanguageModel& model);

// "RWKV-PEFT .pth (value by key)" or "ai00 safetensors (key by value)".
std::string TunedStateLayoutName(TunedStateLayout layout);

}  // namespace linserve

#endif  // LINSERVE_ENGINE_RWKV7_TUNED_STATE_H_
