// linserve-eval: the validation loss (nats/byte) of a model directory on the
// held-out last 10% of a corpus, in any of the engine's three forms.
//
//   linserve-eval --model=models/default --corpus=tinyshakespeare.txt
//
// The context defaults to the one the model was trained at
// (config.json training.context).

#include <cmath>
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <limits>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_split.h"
#include "engine/transformer/transformer_model.h"
#include "tools/train/corpus.h"
#include "tools/train/evaluation.h"

ABSL_FLAG(std::string, model, "", "model directory (config.json + model.safetensors)");
ABSL_FLAG(std::string, corpus, "", "the text corpus; its last 10% of bytes are scored");
ABSL_FLAG(int64_t, context, 0, "bytes per window; 0: the model's training context (or 256)");
ABSL_FLAG(int64_t, windows, 64,
          "validation windows, evenly spaced over the held-out bytes; 0: every non-overlapping "
          "window (the whole held-out split)");
ABSL_FLAG(std::string, forms, "chunked", "comma-separated: chunked, reference, recurrent");
ABSL_FLAG(std::string, device, "cpu", "cpu, cuda or cuda:N");
ABSL_FLAG(std::string, dtype, "",
          "empty (float32), or int8 / int4: the model's matrices quantized at load (CPU)");
ABSL_FLAG(int64_t, quantization_group, 0, "with int8 / int4: inputs per scale, 32 or 64; "
          "0 picks the format's default");

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage("validation loss of a linserve model on a corpus's held-out 10%");
  absl::ParseCommandLine(argc, argv);
  auto fail = [](const absl::Status& status) {
    std::cerr << "linserve-eval: " << status << std::endl;
    return 1;
  };
  absl::StatusOr<torch::Device> device = linserve::ParseDevice(absl::GetFlag(FLAGS_device));
  if (!device.ok()) return fail(device.status());
  linserve::LoadOptions load;
  load.device = *device;
  if (const std::string dtype = absl::GetFlag(FLAGS_dtype); !dtype.empty()) {
    if (absl::Status applied = linserve::ApplyDtypeFlag(dtype, load); !applied.ok()) {
      return fail(applied);
    }
  }
  load.quantization_group = absl::GetFlag(FLAGS_quantization_group);
  auto model = linserve::TransformerModel::Load(absl::GetFlag(FLAGS_model), load);
  if (!model.ok()) return fail(model.status());
  auto corpus = linserve::Corpus::Load(absl::GetFlag(FLAGS_corpus));
  if (!corpus.ok()) return fail(corpus.status());
  int64_t context = absl::GetFlag(FLAGS_context);
  if (context <= 0) context = (*model)->config().training.value("context", int64_t{256});

  int64_t windows = absl::GetFlag(FLAGS_windows);
  if (windows <= 0) windows = std::numeric_limits<int64_t>::max();

  std::printf("state bytes per session: %lld\n",
              static_cast<long long>((*model)->StateBytes(context)));
  double first = 0, widest = 0;
  bool have_first = false;
  for (absl::string_view name : absl::StrSplit(absl::GetFlag(FLAGS_forms), ',', absl::SkipEmpty())) {
    absl::StatusOr<linserve::Form> form = linserve::ParseForm(std::string(name));
    if (!form.ok()) return fail(form.status());
    absl::StatusOr<double> loss =
        linserve::ValidationLoss(**model, *corpus, context, windows, *form);
    if (!loss.ok()) return fail(loss.status());
    const int64_t scored = std::min(windows, corpus->validation_bytes() / (context + 1));
    std::printf("%-10s %.4f nats/byte  (context %lld, %lld windows)\n", linserve::FormName(*form),
                *loss, static_cast<long long>(context), static_cast<long long>(scored));
    if (!have_first) first = *loss, have_first = true;
    widest = std::max(widest, std::abs(*loss - first));
  }
  std::printf("largest difference between forms: %.2e nats/byte\n", widest);
  return 0;
}
