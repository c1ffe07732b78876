#include "tools/train/trainer.h"

#include <torch/nn/utils/clip_grad.h>
#include <torch/optim/adamw.h>
#include <torch/serialize.h>
#include <torch/types.h>
#include <torch/utils.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include <unistd.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "engine/transformer/transformer_model.h"
#include "engine/formats/safetensors.h"
#include "engine/base/status_macros.h"
#include "nlohmann/json.hpp"
#include "tools/train/corpus.h"
#include "tools/train/evaluation.h"

namespace linserve {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr char kCheckpoint[] = "checkpoint";
constexpr char kOptimizerFile[] = "optimizer.pt";
constexpr char kTrainerFile[] = "trainer.json";
constexpr char kBuffersFile[] = "buffers.safetensors";  // vq's codebook averages

// The chunked form keeps memory linear in the context for the constant-state
// kinds; vq trains through the reference form, the one with straight-through
// keys.
Form TrainingForm(const ModelConfig& config) {
  return config.attention.kind == AttentionKind::kVq ? Form::kReference : Form::kChunked;
}

// Everything that decides the weights; a checkpoint resumes only a run with
// the same, and the final config.json records it.
nlohmann::json RunJson(const TrainOptions& o, const Corpus& corpus) {
  return {{"corpus_sha256", corpus.sha256()},
          {"corpus_train_bytes", corpus.train_bytes()},
          {"corpus_validation_bytes", corpus.validation_bytes()},
          {"steps", o.steps},
          {"batch_size", o.batch_size},
          {"accumulation", o.accumulation},
          {"context", o.context},
          {"lr_peak", o.schedule.peak},
          {"lr_floor", o.schedule.floor},
          {"warmup", o.schedule.warmup},
          {"weight_decay", o.weight_decay},
          {"grad_clip", o.grad_clip},
          {"vq_commitment", o.vq_commitment},
          {"vq_ema_decay", o.vq_ema_decay},
          {"seed", o.seed}};
}

std::string Duration(double seconds) {
  const int64_t s = static_cast<int64_t>(seconds);
  return s >= 3600 ? absl::StrFormat("%dh%02dm", s / 3600, s / 60 % 60)
                   : absl::StrFormat("%dm%02ds", s / 60, s % 60);
}

// AdamW with weight decay on the weight matrices only (not norms, the vq
// codebook and window bias, or the token-shift mix).
std::unique_ptr<torch::optim::AdamW> MakeOptimizer(Transformer& net, const TrainOptions& o) {
  std::vector<torch::Tensor> decayed, plain;
  for (const auto& item : net->named_parameters()) {
    const bool matrix = item.value().dim() == 2 && absl::EndsWith(item.key(), ".weight");
    (matrix ? decayed : plain).push_back(item.value());
  }
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(decayed, std::make_unique<torch::optim::AdamWOptions>(
                                   torch::optim::AdamWOptions(o.schedule.peak)
                                       .betas({0.9, 0.95})
                                       .weight_decay(o.weight_decay)));
  groups.emplace_back(plain, std::make_unique<torch::optim::AdamWOptions>(
                                 torch::optim::AdamWOptions(o.schedule.peak)
                                     .betas({0.9, 0.95})
                                     .weight_decay(0.0)));
  return std::make_unique<torch::optim::AdamW>(std::move(groups));
}

absl::Status WriteJson(const nlohmann::json& json, const fs::path& path) {
  std::ofstream out(path, std::ios::trunc);
  out << json.dump(2) << "\n";
  out.close();
  if (!out) return absl::InternalError(absl::StrCat("cannot write ", path.string()));
  return absl::OkStatus();
}

// Writes the checkpoint beside the old one, then swaps directories, so a
// kill at any moment leaves a whole checkpoint (checkpoint/ or, between the
// two renames, checkpoint.old/).
absl::Status SaveCheckpoint(TransformerModel& model, torch::optim::AdamW& optimizer,
                            const nlohmann::json& trainer_state, const fs::path& out_dir) {
  const fs::path final_dir = out_dir / kCheckpoint;
  const fs::path temp_dir = out_dir / absl::StrCat(kCheckpoint, ".tmp");
  const fs::path old_dir = out_dir / absl::StrCat(kCheckpoint, ".old");
  fs::remove_all(temp_dir);
  LINSERVE_RETURN_IF_ERROR(model.Save(temp_dir.string()));
  try {
    torch::save(optimizer, (temp_dir / kOptimizerFile).string());
  } catch (const c10::Error& e) {
    return absl::InternalError(absl::StrCat("checkpoint: ", e.what_without_backtrace()));
  }
  TensorMap buffers;
  for (const auto& item : model.module()->named_buffers()) buffers[item.key()] = item.value().cpu();
  LINSERVE_RETURN_IF_ERROR(WriteSafetensorsFile((temp_dir / kBuffersFile).string(), buffers));
  LINSERVE_RETURN_IF_ERROR(WriteJson(trainer_state, temp_dir / kTrainerFile));
  fs::remove_all(old_dir);
  if (fs::exists(final_dir)) fs::rename(final_dir, old_dir);
  fs::rename(temp_dir, final_dir);
  fs::remove_all(old_dir);
  return absl::OkStatus();
}

// The checkpoint to resume from, if any: checkpoint/, or checkpoint.old/
// when a kill came between SaveCheckpoint's two renames.
fs::path FindCheckpoint(const fs::path& out_dir) {
  for (const char* suffix : {"", ".old"}) {
    const fs::path dir = out_dir / absl::StrCat(kCheckpoint, suffix);
    if (fs::exists(dir / kTrainerFile)) return dir;
  }
  return {};
}

}  // namespace

absl::StatusOr<TrainResult> Train(const TrainOptions& options) {
  LINSERVE_RETURN_IF_ERROR(options.config.Validate());
  if (options.steps <= 0 || options.batch_size <= 0 || options.accumulation <= 0 ||
      options.context <= 0 || options.eval_every <= 0 || options.eval_windows <= 0 ||
      options.checkpoint_every < 0) {
    return absl::InvalidArgumentError(
        "steps, batch_size, accumulation, context, eval_every and eval_windows must be positive, "
        "checkpoint_every >= 0");
  }
  LINSERVE_ASSIGN_OR_RETURN(torch::Device device, ParseDevice(options.device));
  LINSERVE_ASSIGN_OR_RETURN(Corpus corpus, Corpus::Load(options.corpus_path));
  LrSchedule schedule = options.schedule;
  schedule.total = options.steps;
  const fs::path out_dir(options.out_dir);
  std::error_code error;
  fs::create_directories(out_dir, error);
  if (error) return absl::InternalError(absl::StrCat("cannot create ", options.out_dir));
  const nlohmann::json run = RunJson(options, corpus);

  TrainResult result;
  std::unique_ptr<TransformerModel> model;
  int64_t step = 0;
  const fs::path checkpoint = FindCheckpoint(out_dir);
  if (!checkpoint.empty()) {
    std::ifstream in(checkpoint / kTrainerFile);
    nlohmann::json state = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
    if (state.is_discarded() || state.value("run", nlohmann::json()) != run ||
        state.value("config", nlohmann::json()) != ModelConfigToJson(options.config)) {
      return absl::FailedPreconditionError(absl::StrCat(
          "checkpoint in ", checkpoint.string(),
          " belongs to a run with other options or corpus; remove it or choose another --out"));
    }
    LINSERVE_ASSIGN_OR_RETURN(model, TransformerModel::Load(checkpoint.string(), LoadOptions{device, std::nullopt}));
    step = state.value("step", int64_t{0});
    result.train_loss = state.value("train_loss", 0.0);
    result.resumed = true;
  } else {
    model = TransformerModel::Create(options.config, options.seed, device);
  }
  Transformer& net = model->module();
  net->train();
  std::unique_ptr<torch::optim::AdamW> optimizer = MakeOptimizer(net, options);
  if (!checkpoint.empty()) {
    try {
      torch::load(*optimizer, (checkpoint / kOptimizerFile).string());
    } catch (const c10::Error& e) {
      return absl::DataLossError(absl::StrCat("checkpoint optimizer: ", e.what_without_backtrace()));
    }
    LINSERVE_ASSIGN_OR_RETURN(SafetensorsContents buffers,
                              ReadSafetensorsFile((checkpoint / kBuffersFile).string()));
    torch::NoGradGuard no_grad;
    for (auto& item : net->named_buffers()) {
      auto saved = buffers.tensors.find(item.key());
      if (saved == buffers.tensors.end()) {
        return absl::DataLossError(absl::StrCat("checkpoint: buffer '", item.key(), "' missing"));
      }
      item.value().copy_(saved->second);
    }
  }
  std::vector<torch::Tensor> parameters = net->parameters();

  const int64_t tokens_per_step = options.batch_size * options.accumulation * options.context;
  const Clock::time_point started = Clock::now();
  const int64_t first_step = step;
  double val_loss = -1;
  const bool on_terminal = isatty(fileno(stderr)) != 0;
  try {
    for (; step < options.steps; ++step) {
      const double lr = schedule.At(step);
      for (auto& group : optimizer->param_groups()) {
        static_cast<torch::optim::AdamWOptions&>(group.options()).lr(lr);
      }
      optimizer->zero_grad();
      double loss_sum = 0;
      for (int64_t micro = 0; micro < options.accumulation; ++micro) {
        torch::Tensor windows = WindowTensor(
            corpus.TrainWindows(options.seed, step, micro, options.batch_size, options.context + 1),
            options.context + 1, device);
        torch::Tensor loss = WindowLoss(net, windows, TrainingForm(options.config));
        torch::Tensor objective = loss + options.vq_commitment * net->TakeCommitmentLoss();
        (objective / static_cast<double>(options.accumulation)).backward();
        loss_sum += loss.item<double>();
      }
      if (options.grad_clip > 0) torch::nn::utils::clip_grad_norm_(parameters, options.grad_clip);
      optimizer->step();
      net->UpdateCodebooks(options.vq_ema_decay);
      result.train_loss = loss_sum / static_cast<double>(options.accumulation);

      const int64_t done = step + 1;
      const bool validated = done % options.eval_every == 0 || done == options.steps;
      if (validated) {
        net->eval();
        LINSERVE_ASSIGN_OR_RETURN(val_loss, ValidationLoss(*model, corpus, options.context,
                                                          options.eval_windows));
        net->train();
      }
      // The last step checkpoints too, so that running a finished command
      // again only rewrites its outputs.
      if (options.checkpoint_every > 0 &&
          (done % options.checkpoint_every == 0 || done == options.steps)) {
        LINSERVE_RETURN_IF_ERROR(SaveCheckpoint(
            *model, *optimizer,
            {{"run", run},
             {"config", ModelConfigToJson(options.config)},
             {"step", done},
             {"train_loss", result.train_loss}},
            out_dir));
      }
      // On a terminal the line redraws every step; in a log, one line per
      // validation.
      if (options.progress && (on_terminal || validated)) {
        const double seconds = std::chrono::duration<double>(Clock::now() - started).count();
        const double rate = static_cast<double>((done - first_step) * tokens_per_step) / seconds;
        const double eta = seconds / static_cast<double>(done - first_step) *
                           static_cast<double>(options.steps - done);
        std::fprintf(stderr, "%sstep %lld/%lld  loss %.4f  val %s  %.0f tokens/s  ETA %s   %s",
                     on_terminal ? "\r" : "", static_cast<long long>(done), static_cast<long long>(options.steps),
                     result.train_loss,
                     val_loss < 0 ? "-" : absl::StrFormat("%.4f", val_loss).c_str(), rate,
                     Duration(eta).c_str(), on_terminal ? "" : "\n");
        std::fflush(stderr);
      }
    }
  } catch (const c10::Error& e) {
    return absl::InternalError(absl::StrCat("training step ", step, ": ",
                                            e.what_without_backtrace()));
  }
  if (options.progress && on_terminal) std::fprintf(stderr, "\n");
  net->eval();
  if (val_loss < 0) {  // resumed at the end: nothing ran
    LINSERVE_ASSIGN_OR_RETURN(val_loss, ValidationLoss(*model, corpus, options.context,
                                                      options.eval_windows));
  }
  result.steps = step;
  result.val_loss = val_loss;
  if (step > first_step) {
    result.tokens_per_s = static_cast<double>((step - first_step) * tokens_per_step) /
                          std::chrono::duration<double>(Clock::now() - started).count();
  }

  LINSERVE_RETURN_IF_ERROR(model->Save(out_dir.string()));
  ModelConfig final_config = model->config();
  final_config.training = run;
  final_config.training["final_train_loss"] = result.train_loss;
  final_config.training["final_val_loss"] = result.val_loss;
  final_config.training["tokens_seen"] = options.steps * tokens_per_step;
  LINSERVE_RETURN_IF_ERROR(WriteModelConfig(final_config, (out_dir / "config.json").string()));
  return result;
}

}  // namespace linserve
