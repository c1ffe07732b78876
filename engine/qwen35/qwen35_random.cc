#include "engine/qwen35/qwen35_random.h"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/types.h>
#include <torch/utils.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"

namespace linserve {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kRealVocab = 248320;

bool IsZeroCentredNorm(const std::string& name) {
  return absl::EndsWith(name, "layernorm.weight") || name == "norm.weight" ||
         absl::EndsWith(name, "q_norm.weight") || absl::EndsWith(name, "k_norm.weight");
}

// Calls visit(name, tensor) for every canonical tensor of `c` in
// Qwen35TensorShapes' order, each drawn as RandomQwen35Weights describes
// (float32), so that only one tensor is alive at a time.
template <typename Visit>
void ForEachRandomQwen35Tensor(const Qwen35Config& c, uint64_t seed, Visit&& visit) {
  at::Generator gen = at::detail::createCPUGenerator(seed);
  // In place: the embedding of the real shapes is a gigabyte in float32.
  auto normal = [&](const std::vector<int64_t>& shape, double std) {
    return torch::randn(shape, gen, torch::kFloat32).mul_(std);
  };
  auto uniform = [&](const std::vector<int64_t>& shape, double lo, double hi) {
    return torch::rand(shape, gen, torch::kFloat32).mul_(hi - lo).add_(lo);
  };
  const double logit_std = 8.0 / std::sqrt(static_cast<double>(c.hidden_size));
  for (const auto& [name, shape] : Qwen35TensorShapes(c)) {
    const double inv_in = 1.0 / std::sqrt(static_cast<double>(shape.back()));
    torch::Tensor t;
    if (name == "embed_tokens.weight") {
      t = normal(shape, c.tie_word_embeddings ? logit_std : 1.0);
    } else if (name == "lm_head.weight") {
      t = normal(shape, logit_std);
    } else if (IsZeroCentredNorm(name)) {
      t = uniform(shape, -0.25, 0.25);
    } else if (absl::EndsWith(name, "linear_attn.norm.weight")) {
      t = uniform(shape, 0.7, 1.3);
    } else if (absl::EndsWith(name, "linear_attn.A_log")) {
      t = uniform(shape, std::log(0.1), std::log(4.0));
    } else if (absl::EndsWith(name, "linear_attn.dt_bias")) {
      t = uniform(shape, -4.0, 1.0);
    } else if (absl::EndsWith(name, "linear_attn.in_proj_a.weight")) {
      t = normal(shape, 0.5 * inv_in);
    } else if (absl::EndsWith(name, "linear_attn.conv1d.weight")) {  // (C, 1, K): sum of K taps
      t = normal(shape, 1.0 / std::sqrt(static_cast<double>(shape.back())));
    } else if (absl::EndsWith(name, "out_proj.weight") || absl::EndsWith(name, "o_proj.weight") ||
               absl::EndsWith(name, "down_proj.weight")) {
      t = normal(shape, 0.5 * inv_in);
    } else {  // in_proj_qkv, in_proj_z, in_proj_b, q/k/v_proj, gate/up_proj
      t = normal(shape, inv_in);
    }
    visit(name, std::move(t));
  }
}

// ---------------------------------------------------------------------------
// The tokenizer.

// GPT-2's byte-to-character table (ByteLevel): printable bytes stand for
// themselves, the others for U+0100 upwards.
std::string ByteLevelChar(uint8_t byte) {
  int code = byte;
  if (!((byte >= 0x21 && byte <= 0x7E) || (byte >= 0xA1 && byte <= 0xAC) || byte >= 0xAE)) {
    int n = 0;
    for (int b = 0; b < byte; ++b) {
      if (!((b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE)) ++n;
    }
    code = 256 + n;
  }
  std::string out;
  if (code < 0x80) {
    out.push_back(static_cast<char>(code));
  } else {
    out.push_back(static_cast<char>(0xC0 | (code >> 6)));
    out.push_back(static_cast<char>(0x80 | (code & 0x3F)));
  }
  return out;
}

// The text the merges are learnt from (written for this purpose).
constexpr char kMergeText[] =
    "The model reads the text one token at a time and keeps what it has seen in a state of "
    "fixed size. Three of every four layers are linear attention layers: each one holds a "
    "matrix per head, which decays a little at every step and then learns the new key and "
    "value by the delta rule. The fourth layer is full attention over a cache of keys and "
    "values, which grows with the length of the conversation. A server that keeps these "
    "states can answer the next turn without reading the whole conversation again. "
    "The user asks a question, the assistant thinks about it, and then writes the answer. "
    "When the answer is long, the server sends it in pieces as they are made. "
    "Here is a list of things to check before the release: the tests pass, the numbers in "
    "the results table were measured on this machine, and the documentation says what the "
    "options do. There are some hard questions in this work, and the best answer is often "
    "the simple one. This is the end of the text.\n"
    "def main():\n    print(\"hello, world\")\n    return 0\n";

struct Vocabulary {
  std::vector<std::string> tokens;  // by id
  std::vector<std::pair<std::string, std::string>> merges;
};

// Byte tokens, then up to `merges` merges learnt from kMergeText (the most
// frequent pair first, ties to the smallest pair), then filler tokens that
// no merge makes up to `entries` entries.
Vocabulary BuildVocabulary(int64_t entries, int64_t max_merges) {
  Vocabulary v;
  std::set<std::string> known;
  for (int b = 0; b < 256; ++b) {
    v.tokens.push_back(ByteLevelChar(static_cast<uint8_t>(b)));
    known.insert(v.tokens.back());
  }
  // Words as the pre-tokenizer roughly makes them: a space joins the next word.
  std::map<std::vector<std::string>, int64_t> words;
  for (absl::string_view word : absl::StrSplit(kMergeText, ' ', absl::SkipEmpty())) {
    std::vector<std::string> symbols = {ByteLevelChar(' ')};
    for (char ch : word) symbols.push_back(ByteLevelChar(static_cast<uint8_t>(ch)));
    ++words[symbols];
  }
  std::set<std::pair<std::string, std::string>> refused;
  while (static_cast<int64_t>(v.merges.size()) < max_merges &&
         static_cast<int64_t>(v.tokens.size()) < entries) {
    std::map<std::pair<std::string, std::string>, int64_t> counts;
    for (const auto& [symbols, count] : words) {
      for (size_t i = 0; i + 1 < symbols.size(); ++i) counts[{symbols[i], symbols[i + 1]}] += count;
    }
    const std::pair<std::string, std::string>* best = nullptr;
    int64_t best_count = 1;  // a pair seen once is not worth a merge
    for (const auto& [pair, count] : counts) {
      if (count > best_count && !refused.count(pair)) {
        best = &pair;
        best_count = count;
      }
    }
    if (best == nullptr) break;
    const std::pair<std::string, std::string> pair = *best;
    const std::string merged = pair.first + pair.second;
    if (known.count(merged)) {  // made by an earlier merge already
      refused.insert(pair);
      continue;
    }
    v.merges.push_back(pair);
    v.tokens.push_back(merged);
    known.insert(merged);
    std::map<std::vector<std::string>, int64_t> next;
    for (const auto& [symbols, count] : words) {
      std::vector<std::string> out;
      for (size_t i = 0; i < symbols.size(); ++i) {
        if (i + 1 < symbols.size() && symbols[i] == pair.first && symbols[i + 1] == pair.second) {
          out.push_back(merged);
          ++i;
        } else {
          out.push_back(symbols[i]);
        }
      }
      next[out] += count;
    }
    words = std::move(next);
  }
  // Fillers: a space and letters spelling their number, unreachable by merges.
  for (int64_t n = 0; static_cast<int64_t>(v.tokens.size()) < entries; ++n) {
    std::string word = ByteLevelChar(' ');
    int64_t k = n;
    do {
      word.push_back(static_cast<char>('a' + k % 26));
      k /= 26;
    } while (k > 0);
    word += "qx";
    if (known.insert(word).second) v.tokens.push_back(word);
  }
  return v;
}

// ---------------------------------------------------------------------------
// The safetensors shards, written tensor by tensor.

struct Entry {
  std::string name;       // as the file names it
  std::string canonical;  // empty for tensors a reader skips
  std::vector<int64_t> shape;
  at::ScalarType dtype;
  int64_t bytes() const {
    int64_t n = c10::elementSize(dtype);
    for (int64_t d : shape) n *= d;
    return n;
  }
};

const char* DtypeName(at::ScalarType dtype) { return dtype == at::kFloat ? "F32" : "BF16"; }

class ShardWriter {
 public:
  absl::Status Open(const fs::path& path, const std::vector<Entry>& entries) {
    nlohmann::json header = {{"__metadata__", {{"format", "pt"}}}};
    int64_t offset = 0;
    for (const Entry& e : entries) {
      header[e.name] = {{"dtype", DtypeName(e.dtype)},
                        {"shape", e.shape},
                        {"data_offsets", {offset, offset + e.bytes()}}};
      offset += e.bytes();
    }
    std::string text = header.dump();
    text.append((8 - text.size() % 8) % 8, ' ');
    out_.open(path, std::ios::binary | std::ios::trunc);
    uint8_t length[8];
    for (int i = 0; i < 8; ++i) length[i] = static_cast<uint8_t>(uint64_t{text.size()} >> (8 * i));
    out_.write(reinterpret_cast<const char*>(length), 8);
    out_ << text;
    path_ = path;
    return out_ ? absl::OkStatus()
                : absl::InternalError(absl::StrCat("cannot write ", path.string()));
  }
  void Write(const torch::Tensor& t) {
    out_.write(static_cast<const char*>(t.data_ptr()), static_cast<std::streamsize>(t.nbytes()));
  }
  absl::Status Close() {
    out_.close();
    return out_ ? absl::OkStatus()
                : absl::InternalError(absl::StrCat("cannot write ", path_.string()));
  }

 private:
  std::ofstream out_;
  fs::path path_;
};

absl::Status WriteText(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  return out ? absl::OkStatus() : absl::InternalError(absl::StrCat("cannot write ", path.string()));
}

}  // namespace

TensorMap RandomQwen35Weights(const Qwen35Config& c, uint64_t seed) {
  TensorMap weights;
  ForEachRandomQwen35Tensor(c, seed, [&](const std::string& name, torch::Tensor t) {
    weights.emplace(name, std::move(t));
  });
  return weights;
}

const std::vector<Qwen35AddedToken>& Qwen35AddedTokens() {
  static const std::vector<Qwen35AddedToken> kTokens = {
      {"<|endoftext|>", true},      {"<|im_start|>", true},
      {"<|im_end|>", true},         {"<|object_ref_start|>", true},
      {"<|object_ref_end|>", true}, {"<|box_start|>", true},
      {"<|box_end|>", true},        {"<|quad_start|>", true},
      {"<|quad_end|>", true},       {"<|vision_start|>", true},
      {"<|vision_end|>", true},     {"<|vision_pad|>", true},
      {"<|image_pad|>", true},      {"<|video_pad|>", true},
      {"<tool_call>", false},       {"</tool_call>", false},
      {"<|fim_prefix|>", false},    {"<|fim_middle|>", false},
      {"<|fim_suffix|>", false},    {"<|fim_pad|>", false},
      {"<|repo_name|>", false},     {"<|file_sep|>", false},
      {"<tool_response>", false},   {"</tool_response>", false},
      {"<think>", false},           {"</think>", false}};
  return kTokens;
}

int64_t Qwen35FirstAddedTokenId(int64_t vocab_size) {
  return vocab_size >= kRealVocab ? vocab_size - (kRealVocab - kQwen35EndOfTextId)
                                  : vocab_size - 64;
}

nlohmann::json Qwen35HfConfigJson(const Qwen35Config& c, bool flat) {
  nlohmann::json types = nlohmann::json::array();
  for (Qwen35LayerKind kind : c.layer_types) types.push_back(Qwen35LayerKindName(kind));
  const int64_t half = c.rotary_dim() / 2;
  const int64_t first = Qwen35FirstAddedTokenId(c.vocab_size);
  int64_t interval = 0;  // full_attention_interval when the layers follow one
  for (int64_t i = 1; i <= c.num_hidden_layers && interval == 0; ++i) {
    bool fits = true;
    for (int64_t j = 0; j < c.num_hidden_layers; ++j) {
      fits &= (c.layer_types[j] == Qwen35LayerKind::kFullAttention) == ((j + 1) % i == 0);
    }
    if (fits) interval = i;
  }
  nlohmann::json text = {
      {"model_type", "qwen3_5_text"},
      {"attention_bias", false},
      {"attention_dropout", 0.0},
      {"attn_output_gate", true},
      {"dtype", "bfloat16"},
      {"eos_token_id", c.eos_token_ids.size() == 1 ? nlohmann::json(c.eos_token_ids[0])
                                                   : nlohmann::json(c.eos_token_ids)},
      {"full_attention_interval", interval == 0 ? 4 : interval},
      {"head_dim", c.head_dim},
      {"hidden_act", "silu"},
      {"hidden_size", c.hidden_size},
      {"initializer_range", 0.02},
      {"intermediate_size", c.intermediate_size},
      {"layer_types", types},
      {"linear_conv_kernel_dim", c.linear_conv_kernel_dim},
      {"linear_key_head_dim", c.linear_key_head_dim},
      {"linear_num_key_heads", c.linear_num_key_heads},
      {"linear_num_value_heads", c.linear_num_value_heads},
      {"linear_value_head_dim", c.linear_value_head_dim},
      {"mamba_ssm_dtype", "float32"},
      {"max_position_embeddings", c.max_position_embeddings},
      {"mlp_only_layers", nlohmann::json::array()},
      {"mtp_num_hidden_layers", 1},
      {"mtp_use_dedicated_embeddings", false},
      {"num_attention_heads", c.num_attention_heads},
      {"num_hidden_layers", c.num_hidden_layers},
      {"num_key_value_heads", c.num_key_value_heads},
      {"rms_norm_eps", c.rms_norm_eps},
      {"rope_parameters",
       {{"mrope_interleaved", true},
        {"mrope_section", {half * 11 / 32, half * 11 / 32, half - 2 * (half * 11 / 32)}},
        {"rope_type", "default"},
        {"rope_theta", c.rope_theta},
        {"partial_rotary_factor", c.partial_rotary_factor}}},
      {"tie_word_embeddings", c.tie_word_embeddings},
      {"use_cache", true},
      {"vocab_size", c.vocab_size}};
  if (flat) {
    text["architectures"] = {"Qwen3_5ForCausalLM"};
    return text;
  }
  return {{"architectures", {"Qwen3_5ForConditionalGeneration"}},
          {"model_type", "qwen3_5"},
          {"image_token_id", first + 12},
          {"video_token_id", first + 13},
          {"vision_start_token_id", first + 9},
          {"vision_end_token_id", first + 10},
          {"tie_word_embeddings", c.tie_word_embeddings},
          {"text_config", text},
          {"vision_config",
           {{"model_type", "qwen3_5"},
            {"depth", 1},
            {"hidden_size", 32},
            {"intermediate_size", 64},
            {"num_heads", 2},
            {"out_hidden_size", c.hidden_size},
            {"patch_size", 4},
            {"temporal_patch_size", 2},
            {"in_channels", 3}}}};
}

std::string Qwen35TokenizerJson(const Qwen35Config& c) {
  const int64_t first = Qwen35FirstAddedTokenId(c.vocab_size);
  const Vocabulary v = BuildVocabulary(first, /*max_merges=*/192);
  // The vocabulary in id order, as real files list it, written by hand:
  // ordered_json finds each key by a linear search.
  std::string vocab = "{";
  for (size_t id = 0; id < v.tokens.size(); ++id) {
    absl::StrAppend(&vocab, id == 0 ? "" : ",", nlohmann::json(v.tokens[id]).dump(), ":", id);
  }
  vocab += "}";
  constexpr char kVocabPlaceholder[] = "@vocab@";
  nlohmann::ordered_json merges = nlohmann::ordered_json::array();
  for (const auto& [a, b] : v.merges) merges.push_back({a, b});
  nlohmann::ordered_json added = nlohmann::ordered_json::array();
  const std::vector<Qwen35AddedToken>& tokens = Qwen35AddedTokens();
  for (size_t i = 0; i < tokens.size(); ++i) {
    added.push_back({{"id", first + static_cast<int64_t>(i)},
                     {"content", tokens[i].content},
                     {"single_word", false},
                     {"lstrip", false},
                     {"rstrip", false},
                     {"normalized", false},
                     {"special", tokens[i].special}});
  }
  const nlohmann::ordered_json byte_level = {{"type", "ByteLevel"},
                                             {"add_prefix_space", false},
                                             {"trim_offsets", false},
                                             {"use_regex", false}};
  nlohmann::ordered_json json = {
      {"version", "1.0"},
      {"truncation", nullptr},
      {"padding", nullptr},
      {"added_tokens", added},
      {"normalizer", {{"type", "NFC"}}},
      {"pre_tokenizer",
       {{"type", "Sequence"},
        {"pretokenizers",
         {{{"type", "Split"},
           {"pattern",
            {{"Regex",
              "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| "
              "?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}}},
           {"behavior", "Isolated"},
           {"invert", false}},
          byte_level}}}},
      {"post_processor", byte_level},
      {"decoder", byte_level},
      {"model",
       {{"type", "BPE"},
        {"dropout", nullptr},
        {"unk_token", nullptr},
        {"continuing_subword_prefix", ""},
        {"end_of_word_suffix", ""},
        {"fuse_unk", false},
        {"byte_fallback", false},
        {"ignore_merges", false},
        {"vocab", kVocabPlaceholder},
        {"merges", merges}}}};
  std::string text = json.dump();
  const size_t at = text.find(absl::StrCat("\"", kVocabPlaceholder, "\""));
  text.replace(at, std::strlen(kVocabPlaceholder) + 2, vocab);
  return text;
}

nlohmann::json Qwen35TokenizerConfigJson(const Qwen35Config& c) {
  const int64_t first = Qwen35FirstAddedTokenId(c.vocab_size);
  nlohmann::json decoder = nlohmann::json::object();
  const std::vector<Qwen35AddedToken>& tokens = Qwen35AddedTokens();
  for (size_t i = 0; i < tokens.size(); ++i) {
    decoder[std::to_string(first + static_cast<int64_t>(i))] = {
        {"content", tokens[i].content}, {"lstrip", false},
        {"normalized", false},          {"rstrip", false},
        {"single_word", false},         {"special", tokens[i].special}};
  }
  return {{"add_bos_token", false},
          {"add_prefix_space", false},
          {"added_tokens_decoder", decoder},
          {"bos_token", nullptr},
          {"clean_up_tokenization_spaces", false},
          {"eos_token", "<|im_end|>"},
          {"errors", "replace"},
          {"model_max_length", c.max_position_embeddings},
          {"pad_token", "<|endoftext|>"},
          {"split_special_tokens", false},
          {"tokenizer_class", "Qwen2Tokenizer"},
          {"unk_token", nullptr}};
}

absl::Status WriteRandomQwen35Directory(const Qwen35Config& c, const std::string& dir,
                                        const Qwen35DirectoryOptions& options) {
  torch::NoGradGuard no_grad;
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return absl::InternalError(absl::StrCat("cannot create ", dir, ": ", ec.message()));
  const fs::path root(dir);
  const std::string prefix = options.text_only_names ? "model." : "model.language_model.";
  const int64_t first = Qwen35FirstAddedTokenId(c.vocab_size);

  // What each shard holds: the canonical tensors in draw order, split where
  // half the bytes are written, then the tensors a reader skips.
  std::vector<Entry> entries;
  int64_t total = 0;
  for (const auto& [canonical, shape] : Qwen35TensorShapes(c)) {
    const bool f32 = absl::EndsWith(canonical, "linear_attn.A_log") ||
                     absl::EndsWith(canonical, "linear_attn.norm.weight");
    const std::string name = canonical == "lm_head.weight" ? canonical : prefix + canonical;
    entries.push_back({name, canonical, shape, f32 ? at::kFloat : at::kBFloat16});
    total += entries.back().bytes();
  }
  const int64_t H = c.hidden_size;
  std::vector<Entry> extras;
  if (!options.text_only_names) {
    for (auto [name, shape] : std::vector<std::pair<std::string, std::vector<int64_t>>>{
             {"model.visual.patch_embed.proj.weight", {32, 3, 2, 4, 4}},
             {"model.visual.patch_embed.proj.bias", {32}},
             {"model.visual.blocks.0.attn.qkv.weight", {96, 32}},
             {"model.visual.blocks.0.attn.qkv.bias", {96}},
             {"model.visual.merger.linear_fc2.weight", {H, 32}}}) {
      extras.push_back({name, "", shape, at::kBFloat16});
    }
  }
  for (auto [name, shape] : std::vector<std::pair<std::string, std::vector<int64_t>>>{
           {"mtp.fc.weight", {H, 2 * H}},
           {"mtp.norm.weight", {H}},
           {"mtp.pre_fc_norm_embedding.weight", {H}},
           {"mtp.pre_fc_norm_hidden.weight", {H}},
           {"mtp.layers.0.input_layernorm.weight", {H}},
           {"mtp.layers.0.self_attn.q_norm.weight", {c.head_dim}}}) {
    extras.push_back({name, "", shape, at::kBFloat16});
  }
  std::vector<Entry> shard[2];
  int64_t written = 0;
  for (const Entry& e : entries) {
    shard[written * 2 < total && shard[1].empty() ? 0 : 1].push_back(e);
    written += e.bytes();
  }
  for (const Entry& e : extras) shard[1].push_back(e);
  const std::string names[2] = {"model-00001-of-00002.safetensors",
                                "model-00002-of-00002.safetensors"};

  nlohmann::json weight_map = nlohmann::json::object();
  int64_t total_size = 0;
  for (int s = 0; s < 2; ++s) {
    for (const Entry& e : shard[s]) {
      weight_map[e.name] = names[s];
      total_size += e.bytes();
    }
  }

  // Draw and write, one tensor at a time.
  ShardWriter writer;
  int current = 0;
  size_t next = 0;
  absl::Status status = writer.Open(root / names[0], shard[0]);
  if (!status.ok()) return status;
  ForEachRandomQwen35Tensor(c, options.seed, [&](const std::string& canonical, torch::Tensor t) {
    if (!status.ok()) return;
    if (current == 0 && next == shard[0].size()) {
      status = writer.Close();
      if (status.ok()) status = writer.Open(root / names[1], shard[1]);
      current = 1;
      next = 0;
      if (!status.ok()) return;
    }
    const Entry& e = shard[current][next++];
    TORCH_CHECK(e.canonical == canonical, "shard order: ", e.canonical, " against ", canonical);
    writer.Write(t.to(e.dtype).contiguous());
  });
  if (!status.ok()) return status;
  if (current == 0) {
    if (!(status = writer.Close()).ok()) return status;
    if (!(status = writer.Open(root / names[1], shard[1])).ok()) return status;
  }
  // The skipped tensors, from their own generator so the model's draws are
  // the same with or without them.
  at::Generator gen = at::detail::createCPUGenerator(options.seed ^ 0x5eed5eed5eedULL);
  for (; next < shard[1].size(); ++next) {
    const Entry& e = shard[1][next];
    writer.Write((torch::randn(e.shape, gen, torch::kFloat32) * 0.02).to(e.dtype).contiguous());
  }
  if (!(status = writer.Close()).ok()) return status;

  const nlohmann::json index = {{"metadata", {{"total_size", total_size}}},
                                {"weight_map", weight_map}};
  const nlohmann::json generation = {
      {"bos_token_id", first}, {"do_sample", true},  {"eos_token_id", {first + 2, first}},
      {"pad_token_id", first}, {"temperature", 0.7}, {"top_k", 20},
      {"top_p", 0.8}};
  std::vector<std::pair<std::string, std::string>> files = {
      {"config.json", Qwen35HfConfigJson(c, options.flat_config).dump(2)},
      {"generation_config.json", generation.dump(2)},
      {"model.safetensors.index.json", index.dump(2)}};
  if (options.tokenizer) {
    files.emplace_back("tokenizer.json", Qwen35TokenizerJson(c));
    files.emplace_back("tokenizer_config.json", Qwen35TokenizerConfigJson(c).dump(2));
  }
  for (const auto& [name, text] : files) {
    if (absl::Status s = WriteText(root / name, text + "\n"); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace linserve
