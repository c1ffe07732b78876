// linserve-train: training lowers the validation loss for every kind, and a
// run killed with SIGKILL and started again ends with the same files as one
// that never stopped.

#include "tools/train/trainer.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>

#include <torch/nn/functional/loss.h>
#include <torch/types.h>
#include <torch/utils.h>

#include "engine/transformer/transformer_model.h"
#include "gtest/gtest.h"
#include "tests/engine/test_models.h"
#include "tools/train/corpus.h"
#include "tools/train/evaluation.h"

namespace linserve {
namespace {

namespace fs = std::filesystem;

// A small text with structure to learn: sentences of a toy grammar.
std::string ToyText(size_t bytes) {
  const std::vector<std::string> subjects = {"the king", "a fool", "my lord", "the queen", "thou"};
  const std::vector<std::string> verbs = {"speaks", "weeps", "loves", "fears", "calls"};
  const std::vector<std::string> objects = {"the crown.", "his sword.", "the night.", "me.",
                                            "thy name."};
  std::mt19937 generator(5);
  std::string text;
  while (text.size() < bytes) {
    text += subjects[generator() % subjects.size()] + " " + verbs[generator() % verbs.size()] +
            " " + objects[generator() % objects.size()] + "\n";
  }
  return text;
}

// LINSERVE_TEST_DEVICE=cuda runs the trainer's processes on the GPU.
std::string TestDevice() {
  const char* device = std::getenv("LINSERVE_TEST_DEVICE");
  return device != nullptr && *device ? device : "cpu";
}

class TrainerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("linserve_train_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    corpus_path_ = (dir_ / "corpus.txt").string();
    std::ofstream(corpus_path_) << ToyText(40000);
  }
  void TearDown() override { fs::remove_all(dir_); }

  TrainOptions Tiny(const ModelConfig& config, const std::string& out) const {
    TrainOptions o;
    o.config = config;
    o.corpus_path = corpus_path_;
    o.out_dir = (dir_ / out).string();
    o.steps = 200;
    o.batch_size = 8;
    o.context = 48;
    o.schedule.peak = 1e-2;
    o.schedule.floor = 1e-3;
    o.schedule.warmup = 20;
    o.eval_every = 200;
    o.eval_windows = 32;
    o.checkpoint_every = 0;
    o.progress = false;
    return o;
  }

  fs::path dir_;
  std::string corpus_path_;
};

TEST_F(TrainerTest, TrainingLowersValidationLossForEveryKind) {
  auto corpus = Corpus::Load(corpus_path_);
  ASSERT_TRUE(corpus.ok()) << corpus.status();
  for (const NamedConfig& named : AllKindConfigs()) {
    TrainOptions options = Tiny(named.config, named.name);
    auto untrained = TransformerModel::Create(named.config, options.seed, torch::kCPU);
    auto before = ValidationLoss(*untrained, *corpus, options.context, options.eval_windows);
    ASSERT_TRUE(before.ok()) << before.status();
    auto result = Train(options);
    ASSERT_TRUE(result.ok()) << named.name << ": " << result.status();
    // From ~ln(258) = 5.55 nats/byte; the toy grammar is learnable well
    // below 2.5 in 200 steps.
    EXPECT_LT(result->val_loss, *before - 2.5) << named.name << ": " << *before << " -> "
                                              << result->val_loss;
    // What was written loads and scores the same.
    auto loaded = TransformerModel::Load(options.out_dir, LoadOptions{});
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    auto again = ValidationLoss(**loaded, *corpus, options.context, options.eval_windows);
    ASSERT_TRUE(again.ok());
    EXPECT_NEAR(*again, result->val_loss, 1e-5) << named.name;
    EXPECT_EQ((*loaded)->config().training["corpus_sha256"], corpus->sha256());
  }
}

// The evaluation's three forms agree on a trained model, for every kind.
TEST_F(TrainerTest, ValidationLossIsTheSameInEveryForm) {
  auto corpus = Corpus::Load(corpus_path_);
  ASSERT_TRUE(corpus.ok());
  for (const NamedConfig& named : AllKindConfigs()) {
    TrainOptions options = Tiny(named.config, named.name);
    options.steps = 30;
    ASSERT_TRUE(Train(options).ok()) << named.name;
    auto model = TransformerModel::Load(options.out_dir, LoadOptions{});
    ASSERT_TRUE(model.ok());
    auto chunked = ValidationLoss(**model, *corpus, 40, 8, Form::kChunked);
    auto reference = ValidationLoss(**model, *corpus, 40, 8, Form::kReference);
    auto recurrent = ValidationLoss(**model, *corpus, 40, 8, Form::kRecurrent);
    ASSERT_TRUE(chunked.ok() && reference.ok() && recurrent.ok());
    EXPECT_NEAR(*chunked, *reference, 1e-4) << named.name;
    EXPECT_NEAR(*recurrent, *reference, 1e-4) << named.name;
  }
}

// A model that takes a BOS is trained and scored after one: each window's
// loss is that of BOS + the window from the zero state, every byte scored,
// exactly what the server computes for a conversation.
TEST_F(TrainerTest, AModelThatTakesBosSeesItFirstInEveryWindow) {
  ModelConfig config = ConfigNamed("linear_elu");
  config.add_bos = true;
  torch::manual_seed(3);
  Transformer net(config);
  const torch::Tensor windows = torch::randint(0, 256, {3, 9}, torch::kInt64);  // (N, T + 1)
  torch::NoGradGuard no_grad;
  const torch::Tensor loss = WindowLoss(net, windows, Form::kChunked);

  const torch::Tensor bos = torch::full({3, 1}, config.bos_id, torch::kInt64);
  const torch::Tensor inputs = torch::cat({bos, windows.narrow(1, 0, 8)}, 1);  // (N, T + 1)
  const torch::Tensor logits = net->ForwardReference(inputs);                  // (N, T + 1, V)
  const torch::Tensor expected = torch::nn::functional::cross_entropy(
      logits.reshape({-1, logits.size(-1)}), windows.reshape({-1}));
  EXPECT_NEAR(loss.item<double>(), expected.item<double>(), 1e-5);

  // The switch is what makes the difference.
  config.add_bos = false;
  torch::manual_seed(3);
  Transformer plain(config);
  EXPECT_GT(std::abs(WindowLoss(plain, windows, Form::kChunked).item<double>() -
                     loss.item<double>()),
            1e-4);
}

std::string ReadAll(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

// Runs linserve-train with `args`; kills it with SIGKILL once its checkpoint
// reaches `kill_at_step` (0: let it finish). Returns the exit status.
int RunTrainer(const std::vector<std::string>& args, const fs::path& out, int64_t kill_at_step) {
  const pid_t pid = fork();
  if (pid == 0) {
    std::vector<char*> argv = {const_cast<char*>(LINSERVE_TRAIN_BINARY)};
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  if (kill_at_step > 0) {
    const fs::path state = out / "checkpoint" / "trainer.json";
    while (true) {
      int status = 0;
      if (waitpid(pid, &status, WNOHANG) == pid) return status;  // finished first
      std::ifstream in(state);
      nlohmann::json json = nlohmann::json::parse(in, nullptr, false);
      if (!json.is_discarded() && json.value("step", int64_t{0}) >= kill_at_step) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    kill(pid, SIGKILL);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return status;
}

TEST_F(TrainerTest, KilledAndResumedEndsWithTheSameFiles) {
  for (const char* kind : {"linear_elu", "vq"}) {
    auto args = [&](const std::string& out) {
      return std::vector<std::string>{
          "--corpus=" + corpus_path_, "--out=" + (dir_ / out).string(), std::string("--kind=") + kind,
          "--steps=60", "--batch_size=4", "--context=32", "--warmup=5", "--eval_every=20",
          "--eval_windows=8", "--checkpoint_every=10", "--progress=false",
          "--device=" + TestDevice()};
    };
    const std::string whole = std::string(kind) + "_whole", killed = std::string(kind) + "_killed";
    ASSERT_EQ(RunTrainer(args(whole), dir_ / whole, 0), 0);
    const int status = RunTrainer(args(killed), dir_ / killed, 30);
    ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << "status " << status;
    EXPECT_FALSE(fs::exists(dir_ / killed / "model.safetensors")) << "killed before the end";
    ASSERT_EQ(RunTrainer(args(killed), dir_ / killed, 0), 0);
    for (const char* file : {"model.safetensors", "config.json"}) {
      EXPECT_EQ(ReadAll(dir_ / whole / file), ReadAll(dir_ / killed / file)) << kind << " " << file;
    }
  }
}

// Transformer-VQ's codebook learning: with moving-average updates the codes
// follow the keys, so quantising costs far less than with a frozen codebook.
TEST_F(TrainerTest, VqCodebookFollowsTheKeys) {
  auto corpus = Corpus::Load(corpus_path_);
  ASSERT_TRUE(corpus.ok());
  auto quantisation_error = [&](const std::string& out) {
    auto model = TransformerModel::Load((dir_ / out).string(), LoadOptions{});
    EXPECT_TRUE(model.ok()) << model.status();
    Transformer& net = (*model)->module();
    net->train();
    std::vector<int64_t> bytes = corpus->ValidationWindows(48, 16);
    net->ForwardReference(torch::tensor(bytes, torch::kInt64).view({16, 48}));
    return net->TakeCommitmentLoss().item<double>();  // sum over layers of mean |k - C_z|^2
  };
  TrainOptions learning = Tiny(ConfigNamed("vq"), "learning");
  ASSERT_TRUE(Train(learning).ok());
  TrainOptions frozen = Tiny(ConfigNamed("vq"), "frozen");
  frozen.vq_ema_decay = 1.0;  // codes never move
  ASSERT_TRUE(Train(frozen).ok());
  const double learned = quantisation_error("learning"), fixed = quantisation_error("frozen");
  EXPECT_LT(learned, 0.5 * fixed) << "with EMA " << learned << ", frozen " << fixed;
}

TEST_F(TrainerTest, CheckpointOfAnotherRunIsRefused) {
  TrainOptions options = Tiny(ConfigNamed("linear_elu"), "run");
  options.steps = 20;
  options.checkpoint_every = 10;
  ASSERT_TRUE(Train(options).ok());
  options.seed = 2;
  auto other = Train(options);
  ASSERT_FALSE(other.ok());
  EXPECT_NE(std::string(other.status().message()).find("other options"), std::string::npos)
      << other.status();
}

}  // namespace
}  // namespace linserve
