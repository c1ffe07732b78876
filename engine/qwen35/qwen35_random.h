#ifndef LINSERVE_ENGINE_QWEN35_RANDOM_H_
#define LINSERVE_ENGINE_QWEN35_RANDOM_H_

// Random Qwen3.5 models for tests and benchmarks: float32 weights in the
// canonical layout, and a Hugging Face model directory laid out as a real
// checkpoint is (what linserve-qwen35-random-model writes).

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "engine/formats/safetensors.h"
#include "engine/qwen35/qwen35_config.h"
#include "nlohmann/json.hpp"

namespace linserve {

// Random float32 weights in the canonical layout (Qwen35TensorShapes),
// deterministic in `seed` (drawn in the shapes' name order):
//  - projections reading a normalised input W x of order one (std 1/sqrt(in));
//    those writing into the residual stream (out_proj, o_proj, down_proj)
//    half that, so that activations stay of order one through any depth;
//  - the logits' standard deviation about 8 (the head, or the tied
//    embedding, of std 8/sqrt(H)), so that greedy margins stay clear of
//    bfloat16 rounding;
//  - the decays spread over their range: A = exp(A_log) in [0.1, 4],
//    dt_bias in [-4, 1], so that exp(g) covers about [0.005, 0.998];
//  - zero-centred norm weights (applied as 1 + w) in [-0.25, 0.25]: small,
//    but not zero, so that a norm applied as w instead of 1 + w shows;
//    the GDN output norm (applied as w) in [0.7, 1.3].
TensorMap RandomQwen35Weights(const Qwen35Config& config, uint64_t seed);

// The tokenizer's added tokens in Qwen3.5's order ("<|endoftext|>",
// "<|im_start|>", "<|im_end|>", ..., "<think>", "</think>"), 26 of them, and
// whether each is special.
struct Qwen35AddedToken {
  const char* content;
  bool special;
};
const std::vector<Qwen35AddedToken>& Qwen35AddedTokens();

// The id of the first added token ("<|endoftext|>") for a vocabulary:
// 248044 for the real 248,320 rows (276 padding rows after the 26 added
// tokens), vocab_size - 64 below that (448 for the tiny shape's 512).
// Requires vocab_size >= 320.
int64_t Qwen35FirstAddedTokenId(int64_t vocab_size);

// config.json as the real checkpoints write it: the multimodal wrapper
// (Qwen3_5ForConditionalGeneration, text_config, vision_config, the image
// token ids), or with `flat` a text-only qwen3_5_text config
// (Qwen3_5ForCausalLM).
nlohmann::json Qwen35HfConfigJson(const Qwen35Config& config, bool flat);

// tokenizer.json: byte-level BPE with Qwen3.5's pipeline (NFC, its Split
// regex, ByteLevel without regex), 256 byte tokens (ids 0-255 in byte
// order), merges learnt from a built-in English text, unreachable filler
// tokens up to Qwen35FirstAddedTokenId (so that the added tokens land on
// their real ids; the Hugging Face library, like engine/text, numbers added
// tokens after the vocabulary's entries whatever ids the file gives them),
// then the added tokens. tokenizer_config.json: eos "<|im_end|>", pad
// "<|endoftext|>", no BOS.
std::string Qwen35TokenizerJson(const Qwen35Config& config);
nlohmann::json Qwen35TokenizerConfigJson(const Qwen35Config& config);

struct Qwen35DirectoryOptions {
  uint64_t seed = 1;
  bool flat_config = false;      // config.json a flat qwen3_5_text config
  bool text_only_names = false;  // tensors under "model." and no model.visual.*
  bool tokenizer = true;         // tokenizer.json and tokenizer_config.json
};

// Writes a model directory of RandomQwen35Weights(config, seed) laid out as
// a real checkpoint: config.json, generation_config.json (eos_token_id
// [<|im_end|>, <|endoftext|>]), model-00001-of-00002.safetensors and
// model-00002-of-00002.safetensors with model.safetensors.index.json, the
// matrices and most vectors in BF16 but A_log and linear_attn.norm.weight
// in F32 as the real files store them, names under "model.language_model."
// and "lm_head.weight" when untied, plus 5 model.visual.* (none with
// text_only_names) and 6 mtp.* tensors a reader skips, and the tokenizer.
// Tensors are drawn and written one at a time: no float32 copy of the model
// is held. Creates `dir` if needed; overwrites its files.
absl::Status WriteRandomQwen35Directory(const Qwen35Config& config, const std::string& dir,
                                        const Qwen35DirectoryOptions& options);

// How many model.visual.* and mtp.* tensors WriteRandomQwen35Directory
// writes.
inline constexpr int64_t kQwen35RandomVisualTensors = 5;
inline constexpr int64_t kQwen35RandomMtpTensors = 6;

}  // namespace linserve

#endif  // LINSERVE_ENGINE_QWEN35_RANDOM_H_
