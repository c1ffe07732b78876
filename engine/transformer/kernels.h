#ifndef LINSERVE_ENGINE_KERNELS_H_
#define LINSERVE_ENGINE_KERNELS_H_

// Factories of the per-kind kernels; MakeAttentionKernel picks among them.

#include <memory>

#include "engine/transformer/attention_kernel.h"

namespace linserve {

std::unique_ptr<AttentionKernel> MakeLinearKernel(const ModelConfig& config);
std::unique_ptr<AttentionKernel> MakeSoftmaxKernel(const ModelConfig& config);
std::unique_ptr<AttentionKernel> MakeVqKernel(const ModelConfig& config,
                                              const AttentionParams& params);
std::unique_ptr<AttentionKernel> MakeCompressedKernel(const ModelConfig& config);

}  // namespace linserve

#endif  // LINSERVE_ENGINE_KERNELS_H_
