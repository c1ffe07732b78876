// linserve-train: trains a byte-level model of any attention kind on a text
// corpus and writes a model directory the engine loads unchanged.
//
//   linserve-train --corpus=shakespeare.txt --out=models/x --kind=linear_elu --steps=2000
//
// Killed and started again with the same flags, it resumes from its last
// checkpoint and ends with the same weights.

#include <cstdio>
#include <iostream>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "engine/base/model_config.h"
#include "tools/train/trainer.h"

ABSL_FLAG(std::string, corpus, "", "text corpus; the first 90% of its bytes train, the rest validate");
ABSL_FLAG(std::string, out, "", "model directory to write (config.json, model.safetensors, checkpoint/)");
ABSL_FLAG(std::string, config, "",
          "config.json to start from; the flags below override its attention fields");
ABSL_FLAG(std::string, kind, "", "attention kind (softmax, linear_elu, linear_softmax, "
                                 "linear_cosine, vq, compressed); empty: the config's");
ABSL_FLAG(bool, rope, false, "rotary positions (linear kinds, softmax)");
ABSL_FLAG(bool, entropy_invariant, false, "entropy-invariant softmax scale (softmax, vq, compressed)");
ABSL_FLAG(bool, token_shift, false, "q, k, v from a learned mix with the previous position's input");
ABSL_FLAG(bool, bos, false,
          "the model takes a BOS: every window is trained (and scored) after one, as the "
          "server feeds it first in every conversation (config.json tokenizer.add_bos)");
ABSL_FLAG(int64_t, steps, 1000, "optimizer steps");
ABSL_FLAG(int64_t, batch_size, 16, "windows per micro-batch");
ABSL_FLAG(int64_t, accumulation, 1, "micro-batches per optimizer step");
ABSL_FLAG(int64_t, context, 256, "bytes per training window");
ABSL_FLAG(double, lr, 3e-3, "peak learning rate");
ABSL_FLAG(double, min_lr, 3e-4, "learning rate at the end of the cosine decay");
ABSL_FLAG(int64_t, warmup, 100, "linear warmup steps");
ABSL_FLAG(double, weight_decay, 0.1, "AdamW weight decay on matrices");
ABSL_FLAG(double, grad_clip, 1.0, "max global gradient norm (0: off)");
ABSL_FLAG(uint64_t, seed, 1, "seed of the initial weights and the data order");
ABSL_FLAG(int64_t, eval_every, 100, "steps between validations");
ABSL_FLAG(int64_t, eval_windows, 64, "validation windows of --context bytes");
ABSL_FLAG(int64_t, checkpoint_every, 100, "steps between checkpoints (0: none)");
ABSL_FLAG(double, vq_commitment, 0.01, "vq: weight of the commitment loss");
ABSL_FLAG(double, vq_ema_decay, 0.99, "vq: moving-average decay of the codebook");
ABSL_FLAG(std::string, device, "cpu", "cpu, cuda or cuda:N");
ABSL_FLAG(bool, progress, true, "live progress line on stderr");

namespace linserve {
namespace {

absl::StatusOr<TrainOptions> OptionsFromFlags() {
  TrainOptions o;
  if (absl::GetFlag(FLAGS_corpus).empty()) return absl::InvalidArgumentError("--corpus is required");
  if (absl::GetFlag(FLAGS_out).empty()) return absl::InvalidArgumentError("--out is required");
  if (!absl::GetFlag(FLAGS_config).empty()) {
    absl::StatusOr<ModelConfig> config = ReadModelConfig(absl::GetFlag(FLAGS_config));
    if (!config.ok()) return config.status();
    o.config = *config;
    o.config.training = nlohmann::json::object();
  }
  if (!absl::GetFlag(FLAGS_kind).empty()) {
    absl::StatusOr<AttentionKind> kind = ParseAttentionKind(absl::GetFlag(FLAGS_kind));
    if (!kind.ok()) return absl::InvalidArgumentError(absl::StrCat("--kind: ", kind.status().message()));
    o.config.attention.kind = *kind;
  }
  if (absl::GetFlag(FLAGS_rope)) o.config.attention.rope = true;
  if (absl::GetFlag(FLAGS_token_shift)) o.config.attention.token_shift = true;
  if (absl::GetFlag(FLAGS_bos)) o.config.add_bos = true;
  if (absl::GetFlag(FLAGS_entropy_invariant)) {
    o.config.attention.scale = AttentionScale::kEntropyInvariant;
  }
  o.corpus_path = absl::GetFlag(FLAGS_corpus);
  o.out_dir = absl::GetFlag(FLAGS_out);
  o.steps = absl::GetFlag(FLAGS_steps);
  o.batch_size = absl::GetFlag(FLAGS_batch_size);
  o.accumulation = absl::GetFlag(FLAGS_accumulation);
  o.context = absl::GetFlag(FLAGS_context);
  o.schedule.peak = absl::GetFlag(FLAGS_lr);
  o.schedule.floor = absl::GetFlag(FLAGS_min_lr);
  o.schedule.warmup = absl::GetFlag(FLAGS_warmup);
  o.weight_decay = absl::GetFlag(FLAGS_weight_decay);
  o.grad_clip = absl::GetFlag(FLAGS_grad_clip);
  o.seed = absl::GetFlag(FLAGS_seed);
  o.eval_every = absl::GetFlag(FLAGS_eval_every);
  o.eval_windows = absl::GetFlag(FLAGS_eval_windows);
  o.checkpoint_every = absl::GetFlag(FLAGS_checkpoint_every);
  o.vq_commitment = absl::GetFlag(FLAGS_vq_commitment);
  o.vq_ema_decay = absl::GetFlag(FLAGS_vq_ema_decay);
  o.device = absl::GetFlag(FLAGS_device);
  o.progress = absl::GetFlag(FLAGS_progress);
  return o;
}

}  // namespace
}  // namespace linserve

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage("trains a linserve model on a byte-level text corpus");
  absl::ParseCommandLine(argc, argv);
  absl::StatusOr<linserve::TrainOptions> options = linserve::OptionsFromFlags();
  if (!options.ok()) {
    std::cerr << "linserve-train: " << options.status().message() << std::endl;
    return 2;
  }
  absl::StatusOr<linserve::TrainResult> result = linserve::Train(*options);
  if (!result.ok()) {
    std::cerr << "linserve-train: " << result.status() << std::endl;
    return 1;
  }
  std::printf(
      "%s %lld steps: train %.4f nats/byte, validation %.4f nats/byte, %.0f tokens/s -> %s\n",
      result->resumed ? "resumed, finished" : "finished", static_cast<long long>(result->steps),
      result->train_loss, result->val_loss, result->tokens_per_s, options->out_dir.c_str());
  return 0;
}
