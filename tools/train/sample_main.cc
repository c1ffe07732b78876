// linserve-sample: one completion from a model directory, without a server
// (the model card's samples come from here).
//
//   linserve-sample --model=models/default --prompt="ROMEO:" --seed=1

#include <cstdio>
#include <iostream>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "engine/model/language_model.h"
#include "engine/generation/one_shot_generation.h"
#include "engine/text/tokenizer.h"

ABSL_FLAG(std::string, model, "", "model directory (config.json + model.safetensors)");
ABSL_FLAG(std::string, prompt, "", "text the completion continues");
ABSL_FLAG(int32_t, max_new_tokens, 300, "bytes to sample at most");
ABSL_FLAG(float, temperature, 0.8f, "sampling temperature (0: greedy)");
ABSL_FLAG(int32_t, top_k, 0, "keep the k most likely bytes (0: off)");
ABSL_FLAG(float, top_p, 1.0f, "nucleus sampling threshold (1: off)");
ABSL_FLAG(uint64_t, seed, 1, "sampling seed");
ABSL_FLAG(std::string, device, "cpu", "cpu, cuda or cuda:N");

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage("one sampled completion from a linserve model");
  absl::ParseCommandLine(argc, argv);
  auto fail = [](const absl::Status& status) {
    std::cerr << "linserve-sample: " << status << std::endl;
    return 1;
  };
  absl::StatusOr<torch::Device> device = linserve::ParseDevice(absl::GetFlag(FLAGS_device));
  if (!device.ok()) return fail(device.status());
  linserve::LoadOptions load;
  load.device = *device;
  auto model = linserve::LanguageModel::Load(absl::GetFlag(FLAGS_model), load);
  if (!model.ok()) return fail(model.status());

  linserve::SamplingParams params;
  params.max_new_tokens = absl::GetFlag(FLAGS_max_new_tokens);
  params.temperature = absl::GetFlag(FLAGS_temperature);
  params.top_k = absl::GetFlag(FLAGS_top_k);
  params.top_p = absl::GetFlag(FLAGS_top_p);
  params.seed = absl::GetFlag(FLAGS_seed);
  if (absl::Status valid = linserve::ValidateSamplingParams(params, {}); !valid.ok()) {
    return fail(valid);
  }
  const linserve::Tokenizer& tokenizer = (*model)->tokenizer();
  linserve::State state = (*model)->NewState();
  auto result = linserve::Generate(**model, state,
                                   tokenizer.Encode(absl::GetFlag(FLAGS_prompt), /*starts_text=*/true),
                                   params);
  if (!result.ok()) return fail(result.status());
  std::fwrite(result->text.data(), 1, result->text.size(), stdout);
  std::printf("\n");
  return 0;
}
