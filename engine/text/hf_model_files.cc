#include "engine/text/hf_model_files.h"

#include <filesystem>
#include <fstream>
#include <sstream>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/base/status_macros.h"
#include "engine/text/hf_json.h"

namespace linserve {

namespace {

namespace fs = std::filesystem;

constexpr int kMaxConfigDepth = 64;

// The parsed file, or null JSON when it does not exist.
absl::StatusOr<nlohmann::json> ReadOptionalJson(const std::string& dir, const char* name) {
  const fs::path path = fs::path(dir) / name;
  std::ifstream in(path, std::ios::binary);
  if (!in) return nlohmann::json();
  std::ostringstream text;
  text << in.rdbuf();
  LINSERVE_ASSIGN_OR_RETURN(nlohmann::json json,
                            ParseHfJson(text.str(), path.string(), kMaxConfigDepth));
  if (!json.is_object()) return HfLoadError({path.string(), ""}, "not a JSON object");
  return json;
}

// Adds an "eos_token_id" value (a number, a list of numbers, or null).
absl::Status AddIds(const nlohmann::json& object, const char* key, const HfJsonPlace& place,
                    std::vector<int64_t>* ids) {
  if (!object.is_object()) return absl::OkStatus();
  const auto it = object.find(key);
  if (it == object.end() || it->is_null()) return absl::OkStatus();
  const auto add = [&](const nlohmann::json& value) -> absl::Status {
    if (!value.is_number_integer() || value.get<int64_t>() < 0) {
      return HfLoadError(place.Child(key), "not a non-negative integer or a list of them");
    }
    ids->push_back(value.get<int64_t>());
    return absl::OkStatus();
  };
  if (it->is_array()) {
    for (const nlohmann::json& value : *it) LINSERVE_RETURN_IF_ERROR(add(value));
    return absl::OkStatus();
  }
  return add(*it);
}

// The id of tokenizer_config.json's token `key` ("eos_token": "<|im_end|>"
// or {"content": "<|im_end|>", ...}); -1 when absent or null.
absl::StatusOr<int64_t> TokenId(const nlohmann::json& config, const char* key,
                                const HfJsonPlace& place, const HfTokenizer& hf) {
  if (!config.is_object()) return -1;
  const auto it = config.find(key);
  if (it == config.end() || it->is_null()) return -1;
  std::string content;
  if (it->is_string()) {
    content = it->get<std::string>();
  } else if (it->is_object() && it->contains("content") && (*it)["content"].is_string()) {
    content = (*it)["content"].get<std::string>();
  } else {
    return HfLoadError(place.Child(key), "not a string or {\"content\": ...}");
  }
  const int64_t id = hf.IdOf(content);
  if (id < 0) {
    return HfLoadError(place.Child(key),
                       absl::StrCat("\"", content, "\" is not a token of tokenizer.json"));
  }
  return id;
}

}  // namespace

bool HasHfTokenizer(const std::string& dir) {
  std::error_code error;
  return fs::is_regular_file(fs::path(dir) / "tokenizer.json", error);
}

absl::StatusOr<Tokenizer::HfSpecials> ReadHfSpecials(const std::string& dir,
                                                     const HfTokenizer& hf) {
  Tokenizer::HfSpecials specials;
  LINSERVE_ASSIGN_OR_RETURN(const nlohmann::json generation,
                            ReadOptionalJson(dir, "generation_config.json"));
  LINSERVE_ASSIGN_OR_RETURN(const nlohmann::json config, ReadOptionalJson(dir, "config.json"));
  LINSERVE_ASSIGN_OR_RETURN(const nlohmann::json tokenizer_config,
                            ReadOptionalJson(dir, "tokenizer_config.json"));
  const HfJsonPlace generation_place{(fs::path(dir) / "generation_config.json").string(), ""};
  const HfJsonPlace config_place{(fs::path(dir) / "config.json").string(), ""};
  const HfJsonPlace tokenizer_place{(fs::path(dir) / "tokenizer_config.json").string(), ""};

  LINSERVE_RETURN_IF_ERROR(AddIds(generation, "eos_token_id", generation_place,
                                  &specials.eos_ids));
  LINSERVE_RETURN_IF_ERROR(AddIds(config, "eos_token_id", config_place, &specials.eos_ids));
  if (config.is_object() && config.contains("text_config")) {
    LINSERVE_RETURN_IF_ERROR(AddIds(config["text_config"], "eos_token_id",
                                    config_place.Child("text_config"), &specials.eos_ids));
  }
  LINSERVE_ASSIGN_OR_RETURN(const int64_t eos, TokenId(tokenizer_config, "eos_token",
                                                       tokenizer_place, hf));
  if (eos >= 0) specials.eos_ids.push_back(eos);
  LINSERVE_ASSIGN_OR_RETURN(const int64_t bos, TokenId(tokenizer_config, "bos_token",
                                                       tokenizer_place, hf));

  specials.prefix_ids = hf.post_processor().prefix_ids;
  specials.suffix_ids = hf.post_processor().suffix_ids;
  LINSERVE_ASSIGN_OR_RETURN(const bool add_bos,
                            OptionalBool(tokenizer_config.is_object() ? tokenizer_config
                                                                      : nlohmann::json::object(),
                                         "add_bos_token", !specials.prefix_ids.empty(),
                                         tokenizer_place));
  LINSERVE_ASSIGN_OR_RETURN(const bool add_eos,
                            OptionalBool(tokenizer_config.is_object() ? tokenizer_config
                                                                      : nlohmann::json::object(),
                                         "add_eos_token", !specials.suffix_ids.empty(),
                                         tokenizer_place));
  if (!add_bos) specials.prefix_ids.clear();
  if (add_bos && specials.prefix_ids.empty()) {
    if (bos < 0) {
      return HfLoadError(tokenizer_place.Child("add_bos_token"),
                         "true, but no bos_token says which token");
    }
    specials.prefix_ids.push_back(bos);
  }
  if (!add_eos) specials.suffix_ids.clear();
  if (add_eos && specials.suffix_ids.empty()) {
    if (eos < 0) {
      return HfLoadError(tokenizer_place.Child("add_eos_token"),
                         "true, but no eos_token says which token");
    }
    specials.suffix_ids.push_back(eos);
  }
  return specials;
}

absl::StatusOr<Tokenizer> LoadHfTokenizerDirectory(const std::string& dir, int64_t vocab_size,
                                                   const HfTokenizerOptions& options) {
  LINSERVE_ASSIGN_OR_RETURN(
      std::shared_ptr<const HfTokenizer> hf,
      HfTokenizer::FromFile((fs::path(dir) / "tokenizer.json").string(), options));
  LINSERVE_ASSIGN_OR_RETURN(Tokenizer::HfSpecials specials, ReadHfSpecials(dir, *hf));
  absl::StatusOr<Tokenizer> tokenizer =
      Tokenizer::HuggingFace(std::move(hf), std::move(specials), vocab_size);
  if (!tokenizer.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat((fs::path(dir) / "tokenizer.json").string(), ": ",
                     tokenizer.status().message()));
  }
  return tokenizer;
}

}  // namespace linserve
