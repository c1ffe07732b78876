#ifndef LINSERVE_TOOLS_TRAIN_TRAINER_H_
#define LINSERVE_TOOLS_TRAIN_TRAINER_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "engine/base/model_config.h"
#include "tools/train/lr_schedule.h"

namespace linserve {

struct TrainOptions {
  ModelConfig config;            // architecture and attention kind
  std::string corpus_path;       // byte-level text; first 90% trains, last 10% validates
  std::string out_dir;           // model directory written at the end; checkpoint/ inside
  int64_t steps = 1000;          // optimizer steps
  int64_t batch_size = 16;       // windows per micro-batch
  int64_t accumulation = 1;      // micro-batches per optimizer step
  int64_t context = 256;         // bytes per window (the training context)
  LrSchedule schedule;           // its `total` is set to `steps`
  double weight_decay = 0.1;     // AdamW, on matrices only
  double grad_clip = 1.0;        // max global gradient norm; 0 = off
  uint64_t seed = 1;             // initial weights and the data order
  int64_t eval_every = 100;      // steps between validations (and at the end)
  int64_t eval_windows = 64;     // validation windows of `context` bytes
  int64_t checkpoint_every = 100;  // steps between checkpoints; 0 = only at the end
  double vq_commitment = 0.01;   // vq: weight of the commitment loss
  double vq_ema_decay = 0.99;    // vq: moving-average decay of the codebook
  std::string device = "cpu";
  bool progress = true;          // live progress line on stderr
};

struct TrainResult {
  int64_t steps = 0;
  double train_loss = 0;  // nats/byte, mean of the last step's micro-batches
  double val_loss = 0;    // nats/byte on the validation windows
  bool resumed = false;   // continued from a checkpoint
  double tokens_per_s = 0;  // training tokens per second of this invocation's steps
};

// Trains from scratch, or continues from out_dir/checkpoint/ when a run with
// the same options left one; the same options on the same machine give the
// same weights either way. Writes out_dir/config.json (with the training
// provenance under "training") and out_dir/model.safetensors.
absl::StatusOr<TrainResult> Train(const TrainOptions& options);

}  // namespace linserve

#endif  // LINSERVE_TOOLS_TRAIN_TRAINER_H_
