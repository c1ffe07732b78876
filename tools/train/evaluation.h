#ifndef LINSERVE_TOOLS_TRAIN_EVALUATION_H_
#define LINSERVE_TOOLS_TRAIN_EVALUATION_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/transformer/transformer.h"

namespace linserve {

class Corpus;
class TransformerModel;

// Which of the engine's three forms computes the logits.
enum class Form { kChunked, kReference, kRecurrent };
const char* FormName(Form form);
absl::StatusOr<Form> ParseForm(const std::string& name);

// Byte ids (count * length, row-major) as a (count, length) tensor on `device`.
torch::Tensor WindowTensor(const std::vector<int64_t>& bytes, int64_t length,
                           const torch::Device& device);

// Mean next-byte cross-entropy (nats/byte) over windows (N, T + 1) of byte
// ids, each scored from a fresh state. A model that takes a BOS
// (ModelConfig::add_bos) sees it first, as the server feeds it first in every
// conversation, and is scored on every byte of the window. Differentiable
// when gradients are on.
torch::Tensor WindowLoss(Transformer& net, const torch::Tensor& windows, Form form);

// WindowLoss in `form` over up to `windows` validation windows of `context`
// bytes (the same windows every time), without gradients.
absl::StatusOr<double> ValidationLoss(TransformerModel& model, const Corpus& corpus, int64_t context,
                                      int64_t windows, Form form = Form::kChunked);

}  // namespace linserve

#endif  // LINSERVE_TOOLS_TRAIN_EVALUATION_H_
