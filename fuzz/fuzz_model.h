#ifndef LINSERVE_FUZZ_FUZZ_MODEL_H_
#define LINSERVE_FUZZ_FUZZ_MODEL_H_

// The model the state-file fuzzer and the seed-corpus tool share: tiny (two
// layers, d_model 32), the default model's kind (linear_elu with token
// shift), random weights from a fixed seed, so that its fingerprint, and with
// it the committed seed corpus, is the same on every run.

#include <memory>

#include "engine/transformer/transformer_model.h"
#include "tests/tiny_model.h"

namespace linserve {

inline std::unique_ptr<TransformerModel> MakeFuzzModel() {
  const ModelConfig config = TinyModelConfig();
  return TransformerModel::Create(config, /*seed=*/7, torch::kCPU);
}

}  // namespace linserve

#endif  // LINSERVE_FUZZ_FUZZ_MODEL_H_
