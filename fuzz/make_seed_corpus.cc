// Writes the seed corpora committed in fuzz/corpus/<target>/: valid inputs of
// every shape the targets read, plus edge cases (empty, truncated, invalid
// bytes, values at and past their limits), so that each fuzzing run starts
// from the formats rather than from noise. Run by hand after a format
// changes: fuzz_make_seed_corpus fuzz/corpus

#include <torch/types.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "engine/formats/pth_writer.h"
#include "engine/formats/safetensors.h"
#include "engine/formats/zip_writer.h"
#include "engine/model/language_model.h"
#include "engine/model/quantized_file.h"
#include "engine/qwen35/qwen35_config.h"
#include "engine/qwen35/qwen35_model.h"
#include "engine/qwen35/qwen35_quantized_file.h"
#include "engine/qwen35/qwen35_random.h"
#include "engine/rwkv7/rwkv7_model.h"
#include "engine/rwkv7/rwkv7_quantized_file.h"
#include "fuzz/fuzz_model.h"
#include "fuzz/fuzz_qwen35_shape.h"
#include "linserve/v1/linserve.pb.h"
#include "server/store/state_file.h"

namespace linserve {
namespace {

namespace fs = std::filesystem;

void Write(const fs::path& dir, const std::string& name, const std::string& bytes) {
  fs::create_directories(dir);
  std::ofstream(dir / name, std::ios::binary) << bytes;
}

void RequestSeeds(const fs::path& dir) {
  auto write = [&](const std::string& name, const v1::GenerateRequest& request) {
    Write(dir, name, request.SerializeAsString());
  };
  v1::GenerateRequest minimal;
  minimal.set_prompt("ROMEO:");
  write("minimal", minimal);

  v1::GenerateRequest full = minimal;
  full.set_max_new_tokens(64);
  full.add_stop("\n\n");
  full.add_stop("\xE2\x80\x94");
  full.set_ignore_eos(true);
  full.set_logprobs(true);
  full.set_top_logprobs(5);
  v1::SamplingParams* s = full.mutable_sampling();
  s->set_temperature(0.8f);
  s->set_top_k(40);
  s->set_top_p(0.95f);
  s->set_min_p(0.05f);
  s->set_repetition_penalty(1.1f);
  s->set_presence_penalty(0.5f);
  s->set_frequency_penalty(0.25f);
  s->set_seed(42);
  write("every_field", full);

  v1::GenerateRequest greedy = minimal;
  greedy.mutable_sampling()->set_temperature(0);
  write("greedy", greedy);

  v1::GenerateRequest turn;
  turn.set_session_id("0123456789abcdef0123456789abcdef");
  write("session_turn_empty_prompt", turn);

  v1::GenerateRequest multibyte = minimal;
  multibyte.set_prompt("caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80");
  write("multibyte_prompt", multibyte);

  v1::GenerateRequest bad_utf8 = minimal;
  bad_utf8.set_prompt("ab\xC3(\xED\xA0\x80");
  write("invalid_utf8_prompt", bad_utf8);

  v1::GenerateRequest at_limits = minimal;
  at_limits.set_max_new_tokens(4096);
  at_limits.mutable_sampling()->set_top_k(258);
  at_limits.mutable_sampling()->set_top_p(1.0f);
  at_limits.set_logprobs(true);
  at_limits.set_top_logprobs(20);
  for (int i = 0; i < 8; ++i) at_limits.add_stop(std::string(256, 'a' + i));
  write("every_limit", at_limits);

  v1::GenerateRequest past_limits = at_limits;
  past_limits.set_max_new_tokens(4097);
  past_limits.mutable_sampling()->set_top_p(1.5f);
  past_limits.mutable_sampling()->set_temperature(-1);
  write("past_limits", past_limits);

  v1::GenerateRequest nan = minimal;
  nan.mutable_sampling()->set_temperature(std::nanf(""));
  write("nan_temperature", nan);

  Write(dir, "empty", "");
}

// fuzz_utf8 reads its stop sequences and piece lengths from the input's end
// (FuzzedDataProvider), the text from its start: seeds are text in every
// shape the assembler handles.
void Utf8Seeds(const fs::path& dir) {
  Write(dir, "ascii", "ROMEO:\nBut soft, what light through yonder window breaks?\n\n");
  Write(dir, "two_three_four_bytes", "caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80 \xE4\xB8\xAD\xE6\x96\x87");
  Write(dir, "stray_continuations", "a\x80\xBF b\xC3");
  Write(dir, "overlong_and_surrogate", "\xC0\xAF \xE0\x80\xAF \xED\xA0\x80 \xF4\x90\x80\x80");
  Write(dir, "truncated_sequences", "\xE2\x82 \xF0\x9F\x98 \xF0");
  static constexpr char kStopBytes[] = "x\xE2\x80\x94y\n\nz\x02\x03\x01";
  Write(dir, "stop_inside_character", std::string(kStopBytes, sizeof(kStopBytes) - 1));
  Write(dir, "empty", "");
}

void SafetensorsSeeds(const fs::path& dir, const std::string& state_payload) {
  TensorMap every_dtype;
  every_dtype["f64"] = torch::arange(3, torch::kFloat64);
  every_dtype["f32"] = torch::tensor({{1.5f, -2.0f}, {0.0f, 1e-30f}});
  every_dtype["f16"] = torch::ones({2}, torch::kFloat16);
  every_dtype["bf16"] = torch::ones({2}, torch::kBFloat16);
  every_dtype["i64"] = torch::tensor({int64_t{-1}, int64_t{1} << 40});
  every_dtype["i32"] = torch::arange(4, torch::kInt32).reshape({2, 2});
  every_dtype["i16"] = torch::arange(2, torch::kInt16);
  every_dtype["i8"] = torch::tensor({int8_t{-128}}, torch::kInt8);
  every_dtype["u8"] = torch::arange(5, torch::kUInt8);
  every_dtype["bool"] = torch::tensor({true, false});
  every_dtype["empty"] = torch::zeros({0, 3});
  every_dtype["scalar"] = torch::tensor(3.0f);
  const std::string file = SerializeSafetensors(every_dtype, {{"format", "pt"}, {"note", "seed"}});
  Write(dir, "every_dtype", file);
  Write(dir, "truncated", file.substr(0, file.size() - 3));
  Write(dir, "no_tensors", SerializeSafetensors({}));
  Write(dir, "state_payload", state_payload);
  Write(dir, "header_only_length", std::string("\x10\0\0\0\0\0\0\0", 8));
  const std::string overlap_header =
      R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
      R"("b":{"dtype":"F32","shape":[1],"data_offsets":[2,6]}})";
  std::string overlap(8, '\0');
  overlap[0] = static_cast<char>(overlap_header.size());
  Write(dir, "overlapping", overlap + overlap_header + std::string(8, '\0'));
}

// Files of a tiny RWKV-7 quantized beforehand, in each format, and the ways
// such a file goes wrong, each sealed with its own data_sha256 (but the one
// testing the hash) so that the reader's checks behind the hash see them.
void QuantizedModelSeeds(const fs::path& dir) {
  // As small as a model gets: one panel of outputs, one group of inputs.
  Rwkv7Config shape;
  shape.n_layers = 1;
  shape.d_model = 8;
  shape.n_heads = 1;
  shape.head_size = 8;
  shape.w_lora = shape.a_lora = shape.g_lora = 2;
  shape.ffn_size = 8;
  shape.vocab_size = 8;
  auto quantized = [](const Rwkv7Config& shape, WeightQuantization kind, int64_t group,
                      torch::ScalarType dtype) {
    LoadOptions options;
    options.dtype = dtype;
    options.quantization = kind;
    options.quantization_group = group;
    return SerializeQuantizedRwkv7(*Rwkv7Model::Create(shape, /*seed=*/1, options).value()).value();
  };
  const std::string int4 = quantized(shape, WeightQuantization::kInt4, 32, torch::kFloat32);
  Write(dir, "int4_g32", int4);
  Write(dir, "int8_g32", quantized(shape, WeightQuantization::kInt8, 32, torch::kFloat32));
  Rwkv7Config two = shape;
  two.n_layers = 2;
  two.v_lora = 2;
  Write(dir, "int4_g64_bf16_two_layers",
        quantized(two, WeightQuantization::kInt4, 64, torch::kBFloat16));

  auto edited = [&](const std::string& name, const std::function<void(SafetensorsContents&)>& edit,
                    bool reseal = true) {
    SafetensorsContents c = ParseSafetensors(int4).value();
    edit(c);
    if (reseal) c.metadata["data_sha256"] = QuantizedRwkv7DataSha256(c.tensors);
    Write(dir, name, SerializeSafetensors(c.tensors, c.metadata));
  };
  const std::string key = "blocks.0.att.key.weight";
  edited("bad_sha256", [&](SafetensorsContents& c) { c.tensors[key + ".codes"][0] += 1; }, false);
  edited("group_64_of_32", [](SafetensorsContents& c) { c.metadata["group_size"] = "64"; });
  edited("nan_scale", [&](SafetensorsContents& c) {
    c.tensors[key + ".scales"].view(-1)[0] = std::numeric_limits<float>::quiet_NaN();
  });
  edited("short_codes", [&](SafetensorsContents& c) {
    c.tensors[key + ".codes"] = c.tensors[key + ".codes"].slice(0, 0, 128).clone();
  });
  edited("missing_tensor", [](SafetensorsContents& c) { c.tensors.erase("blocks.0.att.w1"); });
  edited("config_mismatch", [](SafetensorsContents& c) {
    nlohmann::json config = nlohmann::json::parse(c.metadata["config"]);
    config["ffn_size"] = 24;
    c.metadata["config"] = config.dump();
  });
  edited("version_2", [](SafetensorsContents& c) { c.metadata["format_version"] = "2"; });
  Write(dir, "truncated", int4.substr(0, int4.size() - 40));
}

// Files of a two-layer Qwen3.5 quantized beforehand (fuzz_qwen35_shape.h),
// tied and untied, and the ways such a file goes wrong, sealed again as
// above.
void QuantizedQwen35Seeds(const fs::path& dir) {
  auto quantized = [](bool tied, WeightQuantization kind, int64_t group) {
    Qwen35Config shape = FuzzQwen35Shape();
    shape.tie_word_embeddings = tied;
    LoadOptions options;
    options.quantization = kind;
    options.quantization_group = group;
    std::unique_ptr<Qwen35Model> model =
        Qwen35Model::FromTensors(shape, RandomQwen35Weights(shape, 1),
                                 Tokenizer::Bytes(shape.vocab_size), options)
            .value();
    return SerializeQuantizedQwen35(*model).value();
  };
  const std::string int8 = quantized(true, WeightQuantization::kInt8, 32);
  Write(dir, "qwen35_int8_g32", int8);
  Write(dir, "qwen35_int4_g32_untied", quantized(false, WeightQuantization::kInt4, 32));
  auto edited = [&](const std::string& name, const std::function<void(SafetensorsContents&)>& edit) {
    SafetensorsContents c = ParseSafetensors(int8).value();
    edit(c);
    c.metadata["data_sha256"] = QuantizedFileDataSha256(c.tensors);
    Write(dir, name, SerializeSafetensors(c.tensors, c.metadata));
  };
  const std::string key = "layers.1.self_attn.q_proj.weight";
  edited("qwen35_short_codes", [&](SafetensorsContents& c) {
    c.tensors[key + ".codes"] = c.tensors[key + ".codes"].slice(0, 0, 64).clone();
  });
  edited("qwen35_config_mismatch", [](SafetensorsContents& c) {
    nlohmann::json config = nlohmann::json::parse(c.metadata["config"]);
    config["head_dim"] = 16;
    c.metadata["config"] = config.dump();
  });
  edited("qwen35_head_kept_in_float", [](SafetensorsContents& c) {
    c.tensors["lm_head.weight.codes"] = c.tensors["embed_tokens.weight.codes"];
    c.tensors["lm_head.weight.scales"] = c.tensors["embed_tokens.weight.scales"];
  });
}

// Pickle opcodes for seeds torch.save would not write (views, memo, other
// values), in the form engine/formats/torch_unpickler.h reads.
std::string PickleInt(int32_t n) {
  std::string out = "J";
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>(n >> (8 * i)));
  return out;
}
std::string PickleString(const std::string& s) {
  std::string out = "X";
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>(s.size() >> (8 * i)));
  return out + s;
}
std::string PickleTensor(const std::string& key, const std::string& type, int numel, int offset,
                         std::vector<int> sizes, std::vector<int> strides) {
  std::string out = "ctorch._utils\n_rebuild_tensor_v2\n((" + PickleString("storage") + "ctorch\n" +
                    type + "\n" + PickleString(key) + PickleString("cpu") + PickleInt(numel) +
                    "tQ" + PickleInt(offset) + "(";
  for (int n : sizes) out += PickleInt(n);
  out += "t(";
  for (int n : strides) out += PickleInt(n);
  return out + "t\x89" "ccollections\nOrderedDict\n)RtR";
}
std::string OneStoragePth(const std::string& pickle, const std::string& data) {
  return WriteStoredZip({{"archive/data.pkl", pickle}, {"archive/data/0", data}});
}

// Small checkpoints in every shape the reader takes: what torch.save writes
// (three dtypes, a scalar, an empty tensor; zip64 records), views and memo
// references into one storage, an OrderedDict state dict with _metadata,
// and files it refuses (truncated, not a dict, another dtype, values used
// over and over).
void PthSeeds(const fs::path& dir) {
  TensorMap tensors;
  tensors["emb.weight"] = torch::arange(8, torch::kFloat32).reshape({2, 4});
  tensors["blocks.0.att.r_k"] = torch::linspace(-1, 1, 4).reshape({1, 4}).to(torch::kBFloat16);
  tensors["ln_out.bias"] = torch::ones({4}, torch::kFloat16);
  tensors["scalar"] = torch::tensor(2.5f);
  tensors["empty"] = torch::zeros({0, 2});
  const std::string file = SerializePth(tensors);
  Write(dir, "torch_save_layout", file);
  PthWriteOptions zip64;
  zip64.force_zip64 = true;
  Write(dir, "zip64_entries", SerializePth(tensors, zip64));
  Write(dir, "truncated", file.substr(0, file.size() / 2));

  const std::string floats(24, '\x01');  // Six float32 values.
  const std::string views = std::string("\x80\x02}q\x00(", 6) + PickleString("t") +
                            PickleTensor("0", "FloatStorage", 6, 0, {3, 2}, {1, 3}) + "q\x01" +
                            PickleString("tail") + PickleTensor("0", "FloatStorage", 6, 4, {2}, {1}) +
                            PickleString("again") + "h\x01" + PickleString("wide") +
                            PickleTensor("0", "FloatStorage", 6, 5, {2, 2}, {0, 0}) + "u.";
  Write(dir, "views_and_memo", OneStoragePth(views, floats));
  const std::string ordered = "\x80\x02" "ccollections\nOrderedDict\n)R(" + PickleString("w") +
                              "ctorch._utils\n_rebuild_parameter\n(" +
                              PickleTensor("0", "FloatStorage", 6, 0, {6}, {1}) +
                              "\x88" "ccollections\nOrderedDict\n)RtRu}" + PickleString("_metadata") +
                              "}" + PickleString("version") + PickleInt(1) + "ssb.";
  Write(dir, "ordered_dict_metadata", OneStoragePth(ordered, floats));
  Write(dir, "not_a_dict", OneStoragePth("\x80\x02](" + PickleInt(1) + "e.", floats));
  Write(dir, "long_storage",
        OneStoragePth("\x80\x02}" + PickleString("ids") +
                          PickleTensor("0", "LongStorage", 3, 0, {3}, {1}) + "s.",
                      floats));

  // A 4 KiB class name memoized once and called 2048 times, 5 bytes a call,
  // a storage with a 4 KiB key rebuilt 2048 times, and its persistent id
  // loaded 2048 times, 3 bytes a load: 8 MiB of copies from 10 to 14 KB,
  // refused by the unpickler's copy budget before they are made.
  using namespace std::string_literals;  // Opcodes with index 0 hold NULs.
  const std::string long_name(4096, 'x');
  std::string reduced = "\x80\x02"s + "cbuiltins\n" + long_name + "\nq\x00)q\x01"s;
  for (int i = 0; i < 2048; ++i) reduced += "h\x00h\x01R"s;
  Write(dir, "memoized_name_reduced", OneStoragePth(reduced + ".", floats));
  std::string rebuilt = "\x80\x02(" + PickleString("storage") + "ctorch\nFloatStorage\n" +
                        PickleString(long_name) + PickleString("cpu") + PickleInt(0) + "tQq\x00"s +
                        "0ctorch._utils\n_rebuild_tensor_v2\nq\x01"s + "0(h\x00"s + PickleInt(0) +
                        "))\x89}tq\x02"s + "0";
  for (int i = 0; i < 2048; ++i) rebuilt += "h\x01h\x02R"s;
  Write(dir, "memoized_storage_rebuilt", OneStoragePth(rebuilt + ".", floats));
  std::string loaded = "\x80\x02(" + PickleString("storage") + "ctorch\nFloatStorage\n" +
                       PickleString(long_name) + PickleString("cpu") + PickleInt(0) + "tq\x00"s;
  for (int i = 0; i < 2048; ++i) loaded += "h\x00Q"s;
  Write(dir, "memoized_storage_loaded", OneStoragePth(loaded + ".", floats));
}

void StateFileSeeds(const fs::path& dir, LanguageModel& model, std::string* payload) {
  const std::string fingerprint = model.Fingerprint();
  auto record_of = [&](const State& state, int64_t pending) {
    SessionRecord r;
    r.model_fingerprint = fingerprint;
    r.tenant = "tenant-a";
    r.session_id = "0123456789abcdef0123456789abcdef";
    r.position = state.positions[0];
    r.pending_token = pending;
    r.rng_seed = 42;
    r.rng_draws = 3;
    r.created_unix_ms = 1700000000000;
    r.last_used_unix_ms = 1700000001000;
    r.payload = model.SerializeState(state);
    return r;
  };
  // The target appends the checksum itself: seeds are files without it.
  auto without_checksum = [](const SessionRecord& r) {
    std::string file = EncodeStateFile(r);
    return file.substr(0, file.size() - 32);
  };
  State fresh = model.NewState();
  Write(dir, "fresh", without_checksum(record_of(fresh, -1)));

  State used = model.NewState();
  const std::vector<int64_t> prompt = {82, 79, 77, 69, 79, 58};  // "ROMEO:"
  if (!model.Prefill(used, prompt).ok()) std::abort();
  const SessionRecord after_prompt = record_of(used, 10);
  *payload = after_prompt.payload;
  Write(dir, "after_prompt", without_checksum(after_prompt));
  Write(dir, "whole_file_as_is", "!" + EncodeStateFile(after_prompt));

  SessionRecord wrong_position = after_prompt;
  wrong_position.position = 5;
  Write(dir, "header_position_disagrees", without_checksum(wrong_position));
  SessionRecord other_model = after_prompt;
  other_model.model_fingerprint = std::string(64, '0');
  Write(dir, "other_model", without_checksum(other_model));
  // A number JSON allows where the file means an integer.
  std::string float_position = without_checksum(wrong_position);
  const size_t at = float_position.find("\"position\":5");
  if (at == std::string::npos) std::abort();
  float_position.replace(at, 12, "\"position\":5e300");
  const uint32_t header_bytes = static_cast<uint32_t>(
      float_position.find("}", 16) + 1 - 16);
  for (int i = 0; i < 4; ++i) float_position[12 + i] = static_cast<char>(header_bytes >> (8 * i));
  Write(dir, "header_float_position", float_position);
  SessionRecord pending_past_vocab = after_prompt;
  pending_past_vocab.pending_token = 258;
  Write(dir, "pending_past_vocab", without_checksum(pending_past_vocab));
}

}  // namespace
// fuzz_openai_request: a first byte choosing endpoint, template and the
// x-session-id header, then a request body (or a chat_template.json).
void OpenAiRequestSeeds(const fs::path& dir) {
  Write(dir, "completion",
        std::string("\x00", 1) +
            R"({"prompt":"ROMEO:","max_tokens":16,"temperature":0.8,"top_p":0.9,"top_k":-1,)"
            R"("seed":7,"stop":["\n\n"],"logprobs":2,"stream":true,)"
            R"("stream_options":{"include_usage":true},"session":"new","cache_salt":"s",)"
            R"("user":"u","extra":1})");
  Write(dir, "chat",
        "\x03" R"({"messages":[{"role":"system","content":"Be brief."},)"
        R"({"role":"user","content":[{"type":"text","text":"Hi"}]},)"
        R"({"role":"assistant","content":" Hello."}],"logprobs":true,"top_logprobs":2,)"
        R"("max_completion_tokens":9,"n":1,"tools":[],"response_format":{"type":"text"}})");
  Write(dir, "token_ids",
        "\x04" R"({"prompt":[82,79,77],"presence_penalty":0.5,"frequency_penalty":0.5,)"
        R"("repetition_penalty":1.1,"min_p":0.05,"ignore_eos":true})");
  Write(dir, "json_schema",
        "\x03" R"({"messages":[{"role":"user","content":"JSON?"}],"response_format":{"type":"json_schema",)"
        R"("json_schema":{"name":"r","schema":{"type":"object","properties":{"id":{"type":"integer",)"
        R"("minimum":-5,"maximum":700},"name":{"type":"string","maxLength":4,"minLength":1},)"
        R"("tags":{"type":"array","items":{"enum":["a","b"]},"maxItems":2},"when":{"type":"string",)"
        R"("format":"date-time"},"code":{"type":"string","pattern":"^[A-Z]{2}-\d+$"},)"
        R"("next":{"anyOf":[{"$ref":"#"},{"type":"null"}]}},"required":["id"]}}},"logit_bias":{"5":-100}})");
  Write(dir, "tools",
        "\x03" R"({"messages":[{"role":"user","content":"Weather?"},{"role":"assistant","content":null,)"
        R"("tool_calls":[{"id":"c","type":"function","function":{"name":"w","arguments":"{\"city\":\"Oslo\"}"}}]},)"
        R"({"role":"tool","tool_call_id":"c","content":"-3 C"}],"tools":[{"type":"function","function":)"
        R"({"name":"w","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}],)"
        R"("tool_choice":"auto","parallel_tool_calls":false})");
  Write(dir, "structured_outputs",
        std::string("\x00", 1) +
            R"({"prompt":"x","structured_outputs":{"grammar":"root ::= (\"a\" | [b-d]{1,3})+ \".\""}})");
  Write(dir, "template",
        "\x01" R"({"roles":{"system":{"prefix":"S: "},"user":{"prefix":"Q: ","suffix":"\n"},)"
        R"("assistant":{"prefix":"A:","suffix":"\n"}},"stop":["\n"]})");
}

// State-tuning files of fuzz_tuned_state's shape (2 layers, 2 heads of 4):
// RWKV-PEFT's .pth in float32 and bfloat16, ai00's transposed float16
// safetensors, and the ways they go wrong.
void TunedStateSeeds(const fs::path& dir) {
  auto states = [](torch::ScalarType dtype, bool transposed) {
    TensorMap tensors;
    for (int layer = 0; layer < 2; ++layer) {
      torch::Tensor m = torch::linspace(-1, 1, 32).reshape({2, 4, 4}) * (layer + 1) / 2;
      if (transposed) m = m.transpose(1, 2).contiguous();
      tensors["blocks." + std::to_string(layer) + ".att.time_state"] = m.to(dtype);
    }
    return tensors;
  };
  const std::string peft = SerializePth(states(torch::kFloat32, false));
  Write(dir, "peft_float32", peft);
  Write(dir, "peft_bfloat16", SerializePth(states(torch::kBFloat16, false)));
  Write(dir, "ai00_float16", SerializeSafetensors(states(torch::kFloat16, true)));
  Write(dir, "truncated", peft.substr(0, peft.size() / 2));
  TensorMap wrong = states(torch::kFloat32, false);
  wrong["blocks.1.att.time_state"] = torch::zeros({2, 4, 3});
  Write(dir, "wrong_shape", SerializePth(wrong));
  TensorMap nan = states(torch::kFloat32, false);
  nan["blocks.0.att.time_state"][0][1][2] = std::numeric_limits<float>::quiet_NaN();
  Write(dir, "nan", SerializePth(nan));
}

// Qwen3.5 models of fuzz_qwen35_checkpoint's input (config.json, NUL, one
// safetensors shard): a 2-layer shape of width 8 (one GDN and one attention
// layer, 2 value heads over 1 key head) in each layout a real checkpoint
// comes in, the ways a shard goes wrong, and the real shapes' config.json
// alone.
void Qwen35Seeds(const fs::path& dir) {
  Qwen35Config mini;
  mini.hidden_size = 8;
  mini.intermediate_size = 8;
  mini.vocab_size = 16;
  mini.num_hidden_layers = 2;
  mini.layer_types = {Qwen35LayerKind::kLinearAttention, Qwen35LayerKind::kFullAttention};
  mini.num_attention_heads = 2;
  mini.num_key_value_heads = 1;
  mini.head_dim = 4;
  mini.partial_rotary_factor = 0.5;
  mini.linear_num_key_heads = 1;
  mini.linear_num_value_heads = 2;
  mini.linear_key_head_dim = 4;
  mini.linear_value_head_dim = 4;
  mini.linear_conv_kernel_dim = 2;
  mini.max_position_embeddings = 64;
  mini.eos_token_ids = {15};
  // The shard of `config` under `prefix`, BF16 but for F32 A_log and GDN norms.
  auto shard = [](const Qwen35Config& config, const std::string& prefix) {
    TensorMap tensors;
    for (auto& [name, tensor] : RandomQwen35Weights(config, 1)) {
      const bool f32 = name.find("A_log") != std::string::npos ||
                       name.find("linear_attn.norm") != std::string::npos;
      tensors[name == "lm_head.weight" ? name : prefix + name] =
          tensor.to(f32 ? torch::kFloat32 : torch::kBFloat16);
    }
    tensors["mtp.norm.weight"] = torch::zeros({config.hidden_size}, torch::kBFloat16);
    return tensors;
  };
  auto seed = [&](const std::string& name, const Qwen35Config& config, bool flat,
                  const TensorMap& tensors) {
    Write(dir, name,
          Qwen35HfConfigJson(config, flat).dump() + std::string(1, '\0') +
              SerializeSafetensors(tensors));
  };
  const std::string lm = "model.language_model.";
  TensorMap nested = shard(mini, lm);
  nested["model.visual.merger.linear_fc2.weight"] = torch::zeros({8, 4}, torch::kBFloat16);
  seed("nested", mini, false, nested);
  seed("flat_text_only", mini, true, shard(mini, "model."));
  Qwen35Config untied = mini;
  untied.tie_word_embeddings = false;
  seed("untied", untied, false, shard(untied, lm));
  Qwen35Config gdn = mini;
  gdn.layer_types = {Qwen35LayerKind::kLinearAttention, Qwen35LayerKind::kLinearAttention};
  seed("pure_gdn", gdn, false, shard(gdn, lm));
  TensorMap bad = shard(mini, lm);
  bad[lm + "layers.0.linear_attn.A_log"][1] = std::numeric_limits<float>::quiet_NaN();
  seed("nan", mini, false, bad);
  bad = shard(mini, lm);
  bad[lm + "layers.1.self_attn.q_proj.weight"] = torch::zeros({8, 8}, torch::kBFloat16);
  seed("wrong_shape", mini, false, bad);
  bad = shard(mini, lm);
  bad.erase(lm + "norm.weight");
  bad[lm + "layers.2.mlp.up_proj.weight"] = torch::zeros({8, 8}, torch::kBFloat16);
  seed("missing_and_extra", mini, false, bad);
  bad = shard(mini, lm);
  bad[lm + "layers.0.linear_attn.dt_bias"] = torch::zeros({2}, torch::kInt32);
  seed("int_dtype", mini, false, bad);
  for (const char* shape : {"tiny", "0.8b", "4b"}) {
    Write(dir, std::string("config_") + shape,
          Qwen35HfConfigJson(*Qwen35ShapeByName(shape), false).dump(2));
  }
  nlohmann::json layer_type = Qwen35HfConfigJson(mini, false);
  layer_type["text_config"]["layer_types"][1] = "sliding_attention";
  Write(dir, "config_unknown_layer_type", layer_type.dump());
  nlohmann::json heads = Qwen35HfConfigJson(mini, true);
  heads["linear_num_key_heads"] = 2;
  heads["linear_num_value_heads"] = 3;
  Write(dir, "config_heads", heads.dump());
}

}  // namespace linserve

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s CORPUS_DIR (e.g. fuzz/corpus)\n", argv[0]);
    return 2;
  }
  const std::filesystem::path root = argv[1];
  std::unique_ptr<linserve::TransformerModel> model = linserve::MakeFuzzModel();
  std::string payload;
  linserve::StateFileSeeds(root / "fuzz_state_file", *model, &payload);
  linserve::SafetensorsSeeds(root / "fuzz_safetensors", payload);
  linserve::PthSeeds(root / "fuzz_pth");
  linserve::RequestSeeds(root / "fuzz_request_validation");
  linserve::Utf8Seeds(root / "fuzz_utf8");
  linserve::OpenAiRequestSeeds(root / "fuzz_openai_request");
  linserve::QuantizedModelSeeds(root / "fuzz_quantized_model");
  linserve::QuantizedQwen35Seeds(root / "fuzz_quantized_model");
  linserve::TunedStateSeeds(root / "fuzz_tuned_state");
  linserve::Qwen35Seeds(root / "fuzz_qwen35_checkpoint");
  return 0;
}
