#include "engine/qwen35/qwen35_checkpoint.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/base/status_macros.h"
#include "engine/text/hf_json.h"

namespace linserve {
namespace {

namespace fs = std::filesystem;

constexpr char kIndexFile[] = "model.safetensors.index.json";
constexpr char kSingleFile[] = "model.safetensors";
constexpr char kGenerationConfigFile[] = "generation_config.json";
constexpr size_t kMaxReported = 5;
constexpr int kMaxJsonDepth = 64;
constexpr int64_t kFiniteChunk = int64_t{1} << 24;  // elements checked at a time

std::string ShapeString(at::IntArrayRef shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

// A small JSON file of the directory (index, generation config); nullopt
// when absent.
absl::StatusOr<std::optional<nlohmann::json>> ReadJsonFile(const fs::path& path,
                                                           const std::string& name) {
  std::error_code ec;
  if (!fs::exists(path, ec)) return std::optional<nlohmann::json>();
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(name, ": cannot be read"));
  std::stringstream text;
  text << in.rdbuf();
  LINSERVE_ASSIGN_OR_RETURN(nlohmann::json json, ParseHfJson(text.str(), name, kMaxJsonDepth));
  return std::optional<nlohmann::json>(std::move(json));
}

// generation_config.json's eos_token_id, added to the config's.
absl::Status MergeGenerationConfig(const fs::path& dir, Qwen35Config* config) {
  LINSERVE_ASSIGN_OR_RETURN(std::optional<nlohmann::json> json,
                            ReadJsonFile(dir / kGenerationConfigFile, kGenerationConfigFile));
  if (!json.has_value()) return absl::OkStatus();
  if (!json->is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(kGenerationConfigFile, ": not a JSON object"));
  }
  auto it = json->find("eos_token_id");
  if (it == json->end() || it->is_null()) return absl::OkStatus();
  std::vector<nlohmann::json> items;
  if (it->is_array()) {
    items.assign(it->begin(), it->end());
  } else {
    items.push_back(*it);
  }
  for (const nlohmann::json& item : items) {
    if (!item.is_number_integer() || item.get<int64_t>() < 0 ||
        item.get<int64_t>() >= config->vocab_size) {
      return absl::InvalidArgumentError(absl::StrCat(
          kGenerationConfigFile, ": eos_token_id (", it->dump(),
          ") is not a token id or a list of token ids in [0, ", config->vocab_size, ")"));
    }
    const int64_t id = item.get<int64_t>();
    if (std::find(config->eos_token_ids.begin(), config->eos_token_ids.end(), id) ==
        config->eos_token_ids.end()) {
      config->eos_token_ids.push_back(id);
    }
  }
  return absl::OkStatus();
}

// Checks one tensor's values; the first non-finite element's flat index, or
// -1. Chunked, so that a large embedding needs no full-size mask.
int64_t FirstNonFinite(const at::Tensor& tensor) {
  const at::Tensor flat = tensor.reshape({-1});
  for (int64_t start = 0; start < flat.numel(); start += kFiniteChunk) {
    const at::Tensor chunk = flat.slice(0, start, std::min(flat.numel(), start + kFiniteChunk));
    const at::Tensor bad = at::logical_not(at::isfinite(chunk));
    if (bad.any().item<bool>()) return start + bad.nonzero()[0][0].item<int64_t>();
  }
  return -1;
}

// Whether `path` lies strictly inside `root` (both canonical).
bool IsInside(const fs::path& path, const fs::path& root) {
  const fs::path inside = path.lexically_relative(root);
  return !inside.empty() && inside != "." && *inside.begin() != "..";
}

// The Hugging Face hub cache's own layout: `root` is
// .../models--ORG--NAME/snapshots/REVISION and its files link to
// .../models--ORG--NAME/blobs/SHA. Only that blobs/ folder is admitted.
bool IsHubCacheBlob(const fs::path& path, const fs::path& root) {
  const fs::path snapshots = root.parent_path();
  const fs::path repo = snapshots.parent_path();
  if (snapshots.filename() != "snapshots" ||
      !absl::StartsWith(repo.filename().string(), "models--")) {
    return false;
  }
  std::error_code ec;
  const fs::path blobs = fs::canonical(repo / "blobs", ec);
  return !ec && IsInside(path, blobs);
}

}  // namespace

absl::StatusOr<std::string> Qwen35ShardPath(const std::string& dir, std::string_view shard) {
  const std::string quoted = absl::StrCat("shard '", std::string(shard), "'");
  if (shard.empty() || shard.find('\0') != std::string_view::npos) {
    return absl::InvalidArgumentError(absl::StrCat(quoted, " is not a file name"));
  }
  const fs::path relative{std::string(shard)};
  if (relative.is_absolute() || relative.has_root_path()) {
    return absl::InvalidArgumentError(
        absl::StrCat(quoted, " is an absolute path; shards must lie inside the model directory"));
  }
  for (const fs::path& part : relative) {
    if (part == "..") {
      return absl::InvalidArgumentError(
          absl::StrCat(quoted, " leaves the model directory (\"..\")"));
    }
  }
  std::error_code ec;
  const fs::path root = fs::canonical(dir, ec);
  if (ec) return absl::NotFoundError(absl::StrCat("model directory '", dir, "': ", ec.message()));
  const fs::path path = fs::path(dir) / relative;
  if (!fs::exists(path, ec)) {
    return absl::NotFoundError(absl::StrCat(quoted, " does not exist in '", dir, "'"));
  }
  const fs::path resolved = fs::canonical(path, ec);
  if (ec) return absl::NotFoundError(absl::StrCat(quoted, ": ", ec.message()));
  if (!IsInside(resolved, root) && !IsHubCacheBlob(resolved, root)) {
    return absl::InvalidArgumentError(absl::StrCat(quoted, " resolves to '", resolved.string(),
                                                   "', outside the model directory"));
  }
  if (!fs::is_regular_file(resolved, ec)) {
    return absl::InvalidArgumentError(absl::StrCat(quoted, " is not a regular file"));
  }
  return path.string();
}

absl::Status CheckQwen35Tensors(TensorMap tensors, const std::map<std::string, std::string>& files,
                                Qwen35Checkpoint* out) {
  const Qwen35Config& config = out->config;
  const std::map<std::string, std::vector<int64_t>> shapes = Qwen35TensorShapes(config);
  out->prefix = "model.";
  for (const auto& [name, tensor] : tensors) {
    if (absl::StartsWith(name, "model.language_model.")) {
      out->prefix = "model.language_model.";
      break;
    }
  }
  auto file_of = [&files](const std::string& name) {
    auto it = files.find(name);
    return it == files.end() ? std::string("the checkpoint") : it->second;
  };
  auto file_name = [&](const std::string& canonical) {
    return canonical == "lm_head.weight" ? canonical : out->prefix + canonical;
  };
  std::vector<std::string> errors;
  for (auto& [name, tensor] : tensors) {
    if (absl::StartsWith(name, "model.visual.")) {
      ++out->skipped_visual;
      continue;
    }
    if (absl::StartsWith(name, "mtp.")) {
      ++out->skipped_mtp;
      continue;
    }
    std::string canonical;
    if (name == "lm_head.weight") {
      if (config.tie_word_embeddings) {
        ++out->skipped_tied_head;
        continue;
      }
      canonical = name;
    } else if (absl::StartsWith(name, out->prefix)) {
      canonical = name.substr(out->prefix.size());
    }
    const std::string where = absl::StrCat(" in ", file_of(name));
    auto shape = shapes.find(canonical);
    if (canonical.empty() || (canonical == "lm_head.weight" && name != "lm_head.weight") ||
        shape == shapes.end()) {
      errors.push_back(
          absl::StrCat("unexpected tensor '", name, "' ", ShapeString(tensor.sizes()), where));
      continue;
    }
    const at::ScalarType dtype = tensor.scalar_type();
    if (dtype != at::kFloat && dtype != at::kBFloat16 && dtype != at::kHalf) {
      errors.push_back(absl::StrCat("tensor '", name, "'", where, " has dtype ",
                                    c10::toString(dtype), ", expected BF16, F16 or F32"));
      continue;
    }
    if (tensor.sizes() != at::IntArrayRef(shape->second)) {
      errors.push_back(absl::StrCat("tensor '", name, "'", where, " has shape ",
                                    ShapeString(tensor.sizes()), ", expected ",
                                    ShapeString(shape->second)));
      continue;
    }
    if (const int64_t bad = FirstNonFinite(tensor); bad >= 0) {
      errors.push_back(absl::StrCat("tensor '", name, "'", where,
                                    " holds a NaN or infinite value (element ", bad, ")"));
      continue;
    }
    out->weights.emplace(canonical, std::move(tensor));
  }
  std::vector<std::string> missing;
  for (const auto& [canonical, shape] : shapes) {
    if (out->weights.count(canonical)) continue;
    const std::string name = file_name(canonical);
    if (tensors.count(name)) continue;  // present, reported above
    missing.push_back(
        absl::StrCat("missing tensor '", name, "' (expected shape ", ShapeString(shape), ")"));
  }
  errors.insert(errors.begin(), missing.begin(), missing.end());
  if (errors.empty()) return absl::OkStatus();
  out->weights.clear();
  const size_t shown = std::min(errors.size(), kMaxReported);
  std::string message =
      absl::StrCat("qwen35: ", absl::StrJoin(errors.begin(), errors.begin() + shown, "; "));
  if (errors.size() > shown) absl::StrAppend(&message, "; and ", errors.size() - shown, " more");
  return absl::InvalidArgumentError(message);
}

absl::StatusOr<Qwen35Config> ReadQwen35DirectoryConfig(const std::string& dir,
                                                       const nlohmann::json& config_json) {
  LINSERVE_ASSIGN_OR_RETURN(Qwen35Config config, Qwen35ConfigFromJson(config_json));
  LINSERVE_RETURN_IF_ERROR(MergeGenerationConfig(dir, &config));
  return config;
}

absl::StatusOr<Qwen35Checkpoint> ReadQwen35Checkpoint(const std::string& dir,
                                                      const nlohmann::json& config_json) {
  Qwen35Checkpoint out;
  LINSERVE_ASSIGN_OR_RETURN(out.config, ReadQwen35DirectoryConfig(dir, config_json));

  // Which files hold which tensors (transformers' order: a single
  // model.safetensors first, then the index).
  std::map<std::string, std::set<std::string>>
      by_shard;  // shard -> names; empty: whatever it holds
  std::error_code ec;
  if (fs::exists(fs::path(dir) / kSingleFile, ec) ||
      fs::is_symlink(fs::path(dir) / kSingleFile, ec)) {
    by_shard[kSingleFile];
  } else {
    LINSERVE_ASSIGN_OR_RETURN(std::optional<nlohmann::json> index,
                              ReadJsonFile(fs::path(dir) / kIndexFile, kIndexFile));
    if (!index.has_value()) {
      return absl::NotFoundError(
          absl::StrCat("'", dir, "' holds neither ", kSingleFile, " nor ", kIndexFile));
    }
    auto map = index->is_object() ? index->find("weight_map") : index->end();
    if (!index->is_object() || map == index->end() || !map->is_object() || map->empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(kIndexFile, ": weight_map is missing, empty or not a JSON object"));
    }
    for (const auto& [name, shard] : map->items()) {
      if (!shard.is_string()) {
        return absl::InvalidArgumentError(
            absl::StrCat(kIndexFile, ": weight_map['", name, "'] is not a file name"));
      }
      by_shard[shard.get<std::string>()].insert(name);
    }
  }

  TensorMap tensors;
  std::map<std::string, std::string> files;
  for (const auto& [shard, names] : by_shard) {
    absl::StatusOr<std::string> path = Qwen35ShardPath(dir, shard);
    if (!path.ok()) {
      return absl::Status(path.status().code(),
                          absl::StrCat(names.empty() ? dir : std::string(kIndexFile), ": ",
                                       path.status().message()));
    }
    absl::StatusOr<SafetensorsContents> contents = ReadSafetensorsFile(*path);
    if (!contents.ok()) {
      return absl::Status(contents.status().code(),
                          absl::StrCat(shard, ": ", contents.status().message()));
    }
    ++out.shards;
    const bool indexed = !names.empty();
    for (auto& [name, tensor] : contents->tensors) {
      if (indexed && !names.count(name)) {
        return absl::InvalidArgumentError(absl::StrCat(
            shard, ": tensor '", name, "' is not assigned to this file by ", kIndexFile));
      }
      files.emplace(name, shard);
      tensors.emplace(name, std::move(tensor));
    }
    for (const std::string& name : names) {
      if (!files.count(name)) {
        return absl::InvalidArgumentError(absl::StrCat(
            kIndexFile, ": tensor '", name, "' is assigned to '", shard, "', which lacks it"));
      }
    }
  }
  LINSERVE_RETURN_IF_ERROR(CheckQwen35Tensors(std::move(tensors), files, &out));
  return out;
}

}  // namespace linserve
