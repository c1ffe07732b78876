#ifndef LINSERVE_ENGINE_QWEN35_CHECKPOINT_H_
#define LINSERVE_ENGINE_QWEN35_CHECKPOINT_H_

// A Qwen3.5 Hugging Face model directory read into the canonical layout
// (qwen35_config.h): config.json, generation_config.json, and the weights in
// one model.safetensors or in shards listed by model.safetensors.index.json.

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/formats/safetensors.h"
#include "engine/qwen35/qwen35_config.h"
#include "nlohmann/json.hpp"

namespace linserve {

struct Qwen35Checkpoint {
  Qwen35Config config;
  TensorMap weights;              // canonical names (qwen35_config.h), BF16/F16/F32 as stored
  int64_t skipped_visual = 0;     // model.visual.* tensors skipped
  int64_t skipped_mtp = 0;        // mtp.* tensors skipped
  int64_t skipped_tied_head = 0;  // lm_head.weight of a tied model, ignored (0 or 1)
  std::string prefix;             // "model.language_model." or "model." (text-only exports)
  int64_t shards = 0;             // safetensors files read
};

// The shape and token ids of the model directory `dir`, whose parsed
// config.json is `config_json`: Qwen35ConfigFromJson, with
// generation_config.json's eos_token_id (a number or a list), when the file
// exists, added to config.eos_token_ids.
absl::StatusOr<Qwen35Config> ReadQwen35DirectoryConfig(const std::string& dir,
                                                       const nlohmann::json& config_json);

// Reads the model directory `dir`, whose parsed config.json is `config_json`.
//  - The config: Qwen35ConfigFromJson; generation_config.json's eos_token_id
//    (a number or a list), when the file exists, is added to
//    config.eos_token_ids (the real models end on both 248046 and 248044).
//  - The files: model.safetensors.index.json's weight_map when the index
//    exists, else model.safetensors. A shard name must stay inside `dir`: no
//    "..", no absolute path, no symlink resolving outside; refused by name.
//    The one exception is the Hugging Face hub cache's layout, where `dir`
//    is .../models--ORG--NAME/snapshots/REV and its files are links into
//    .../models--ORG--NAME/blobs/: a link into that blobs/ is accepted.
//    A shard the index names must exist, and hold exactly the tensors the
//    index assigns to it.
//  - The names: under "model.language_model." (or "model." when no name has
//    the longer prefix); "model.visual.*" and "mtp.*" are skipped and
//    counted; "lm_head.weight" is required when the embeddings are untied,
//    ignored (counted) when tied.
//  - The tensors: exactly Qwen35TensorShapes(config), each of dtype BF16,
//    F16 or F32 (mixed as the file mixes them), finite.
// Errors are InvalidArgument (a file's contents), NotFound (a file missing),
// or the safetensors reader's (DataLoss for a corrupt file), each naming the
// file and, for a tensor, the tensor as the file names it; a few tensor
// errors at most are listed in one message.
absl::StatusOr<Qwen35Checkpoint> ReadQwen35Checkpoint(const std::string& dir,
                                                      const nlohmann::json& config_json);

// The checks of ReadQwen35Checkpoint on tensors already read: `files` maps
// each tensor's name in the checkpoint to the file it came from (named in
// errors). Fills `out->weights` and the skipped counts from `tensors`
// (moved from). Exposed for the fuzz target.
absl::Status CheckQwen35Tensors(TensorMap tensors, const std::map<std::string, std::string>& files,
                                Qwen35Checkpoint* out);

// A shard name from model.safetensors.index.json, checked to stay inside
// `dir` (lexically and through symlinks); the path to open.
absl::StatusOr<std::string> Qwen35ShardPath(const std::string& dir, std::string_view shard);

}  // namespace linserve

#endif  // LINSERVE_ENGINE_QWEN35_CHECKPOINT_H_
