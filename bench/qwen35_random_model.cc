// linserve-qwen35-random-model: writes a Qwen3.5 model directory with random
// weights at a shape (tiny, 0.8b, 2b or 4b), laid out as a real Hugging Face
// checkpoint is: the multimodal config.json, two safetensors shards with
// their index (BF16 matrices, F32 A_log and GDN output norms), vision and
// multi-token-prediction tensors a reader skips, generation_config.json and
// a byte-level BPE tokenizer with Qwen3.5's pipeline and added-token ids.
// Tensors are drawn and written one at a time (the 4B shape needs about the
// memory of its largest tensor, not of the model).
//
//   linserve-qwen35-random-model --shape=tiny --out=DIR [--seed=N] [--flat_config]
//       [--text_only_names] [--untied] [--verify]

#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "engine/qwen35/qwen35_checkpoint.h"
#include "engine/qwen35/qwen35_config.h"
#include "engine/qwen35/qwen35_random.h"
#include "engine/text/hf_model_files.h"
#include "engine/text/tokenizer.h"

namespace {

// Reads `dir` back as the server would and prints a summary; false on a refusal.
bool Verify(const std::string& dir) {
  const auto start = std::chrono::steady_clock::now();
  std::ifstream in(dir + "/config.json");
  const nlohmann::json config = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  absl::StatusOr<linserve::Qwen35Checkpoint> checkpoint =
      linserve::ReadQwen35Checkpoint(dir, config);
  if (!checkpoint.ok()) {
    std::fprintf(stderr, "verify: %s\n", checkpoint.status().ToString().c_str());
    return false;
  }
  int64_t parameters = 0;
  for (const auto& [name, tensor] : checkpoint->weights) parameters += tensor.numel();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf(
      "verify: %zu tensors, %lld parameters in %lld shards (%.1f s); skipped %lld "
      "model.visual.*, %lld mtp.*; eos ids",
      checkpoint->weights.size(), static_cast<long long>(parameters),
      static_cast<long long>(checkpoint->shards), seconds,
      static_cast<long long>(checkpoint->skipped_visual),
      static_cast<long long>(checkpoint->skipped_mtp));
  for (int64_t id : checkpoint->config.eos_token_ids)
    std::printf(" %lld", static_cast<long long>(id));
  std::printf("\n");
  absl::StatusOr<linserve::Tokenizer> tokenizer = linserve::LoadHfTokenizerDirectory(
      dir, checkpoint->config.vocab_size, linserve::HfTokenizerOptions());
  if (!tokenizer.ok()) {
    std::fprintf(stderr, "verify: %s\n", tokenizer.status().ToString().c_str());
    return false;
  }
  absl::StatusOr<std::vector<int64_t>> ids =
      tokenizer->TryEncode("<|im_start|>user\nHello<|im_end|>", true);
  if (!ids.ok()) {
    std::fprintf(stderr, "verify: %s\n", ids.status().ToString().c_str());
    return false;
  }
  std::printf("verify: tokenizer: \"<|im_start|>user\\nHello<|im_end|>\" ->");
  for (int64_t id : *ids) std::printf(" %lld", static_cast<long long>(id));
  std::printf("; %zu ids never sampled\n", tokenizer->never_sampled().size());
  return true;
}

}  // namespace

ABSL_FLAG(std::string, shape, "tiny", "tiny, 0.8b, 2b or 4b");
ABSL_FLAG(std::string, out, "", "the model directory to write (created if needed)");
ABSL_FLAG(uint64_t, seed, 1, "seed of the random weights");
ABSL_FLAG(bool, flat_config, false,
          "config.json a flat qwen3_5_text config instead of the multimodal wrapper");
ABSL_FLAG(bool, text_only_names, false,
          "tensors under model. (a text-only export) instead of model.language_model., and no "
          "vision tensors");
ABSL_FLAG(bool, untied, false, "a separate lm_head.weight (the real 0.8b-4b tie it)");
ABSL_FLAG(bool, verify, false,
          "read the directory back as a server would (the checkpoint reader and the tokenizer) "
          "and print what it holds");

int main(int argc, char** argv) {
  const std::vector<char*> args = absl::ParseCommandLine(argc, argv);
  if (args.size() != 1 || absl::GetFlag(FLAGS_out).empty()) {
    std::fprintf(stderr,
                 "usage: linserve-qwen35-random-model --shape=tiny|0.8b|2b|4b --out=DIR "
                 "[--seed=N] [--flat_config] [--text_only_names] [--untied] [--verify]\n");
    return 2;
  }
  absl::StatusOr<linserve::Qwen35Config> config =
      linserve::Qwen35ShapeByName(absl::GetFlag(FLAGS_shape));
  if (!config.ok()) {
    std::fprintf(stderr, "--shape: %s\n", std::string(config.status().message()).c_str());
    return 2;
  }
  if (absl::GetFlag(FLAGS_untied)) config->tie_word_embeddings = false;
  linserve::Qwen35DirectoryOptions options;
  options.seed = absl::GetFlag(FLAGS_seed);
  options.flat_config = absl::GetFlag(FLAGS_flat_config);
  options.text_only_names = absl::GetFlag(FLAGS_text_only_names);
  const absl::Status written =
      linserve::WriteRandomQwen35Directory(*config, absl::GetFlag(FLAGS_out), options);
  if (!written.ok()) {
    std::fprintf(stderr, "%s\n", written.ToString().c_str());
    return 1;
  }
  if (absl::GetFlag(FLAGS_verify) && !Verify(absl::GetFlag(FLAGS_out))) return 1;
  return 0;
}
