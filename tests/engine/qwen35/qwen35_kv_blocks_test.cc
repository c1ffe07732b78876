// Qwen3.5's KV cache in reference-counted blocks: a state made from another
// (a fork, a batch's piece, a state resumed from a kept one) shares the
// blocks, a writer copies only the block it writes into, and neither the
// block size nor the sharing changes a bit of the logits or the state file.

#include <cstdint>
#include <memory>
#include <vector>

#include <torch/types.h>

#include "engine/model/language_model.h"
#include "engine/model/state.h"
#include "engine/qwen35/qwen35_model.h"
#include "engine/qwen35/qwen35_random.h"
#include "gtest/gtest.h"

namespace linserve {
namespace {

std::vector<int64_t> Prompt(int64_t n, int64_t vocab, int64_t salt = 0) {
  std::vector<int64_t> tokens;
  for (int64_t i = 0; i < n; ++i) tokens.push_back((i * 53 + salt * 17 + 3) % vocab);
  return tokens;
}

std::unique_ptr<Qwen35Model> TinyModel(int64_t block_tokens) {
  absl::StatusOr<Qwen35Config> config = Qwen35ShapeByName("tiny");
  EXPECT_TRUE(config.ok()) << config.status();
  LoadOptions options;
  options.dtype = torch::kFloat32;
  options.kv_block_tokens = block_tokens;
  absl::StatusOr<std::unique_ptr<Qwen35Model>> model = Qwen35Model::FromTensors(
      *config, RandomQwen35Weights(*config, 7), Tokenizer::Bytes(config->vocab_size), options);
  EXPECT_TRUE(model.ok()) << model.status();
  return model.ok() ? *std::move(model) : nullptr;
}

// Every block of `state` (one session), layer by layer, tensor by tensor.
std::vector<const void*> BlockStorages(const State& state) {
  std::vector<const void*> out;
  for (const std::vector<TensorBlocks>& layer : state.tables.at(0).layers) {
    for (const TensorBlocks& tensor : layer) {
      for (const torch::Tensor& block : tensor) {
        out.push_back(block.storage().unsafeGetStorageImpl());
      }
    }
  }
  return out;
}

int64_t AttentionLayers(const Qwen35Model& model) {
  int64_t n = 0;
  for (Qwen35LayerKind kind : model.config().layer_types) {
    n += kind == Qwen35LayerKind::kFullAttention;
  }
  return n;
}

std::vector<float> Row(const torch::Tensor& logits) {
  return std::vector<float>(logits.data_ptr<float>(), logits.data_ptr<float>() + logits.numel());
}

TEST(Qwen35KvBlocksTest, AForkSharesEveryBlockAndCopiesOnlyTheOneItWritesInto) {
  std::unique_ptr<Qwen35Model> model = TinyModel(16);
  ASSERT_NE(model, nullptr);
  const int64_t vocab = model->vocab_size();
  State parent = model->NewState();
  ASSERT_TRUE(model->Prefill(parent, Prompt(40, vocab)).ok());  // 3 blocks, the last partial
  const std::string parent_file = model->SerializeState(parent);
  const std::vector<const void*> before = BlockStorages(parent);
  ASSERT_EQ(static_cast<int64_t>(before.size()), AttentionLayers(*model) * 2 * 3);

  State fork = CloneState(parent);
  EXPECT_EQ(BlockStorages(fork), before) << "a fork copied KV blocks";
  const ResidentStates shared = MeasureResidentStates({&parent, &fork});
  EXPECT_EQ(shared.block_references, 2 * shared.distinct_blocks);
  EXPECT_EQ(shared.fixed_parts, 2) << "CloneState copies the recurrent part";

  // The fork writes position 40, in its third block: that block alone is
  // copied, in every attention layer, keys and values.
  absl::StatusOr<torch::Tensor> forked = model->Step(fork, {5});
  ASSERT_TRUE(forked.ok()) << forked.status();
  const std::vector<const void*> after = BlockStorages(fork);
  ASSERT_EQ(after.size(), before.size());
  for (size_t i = 0; i < after.size(); ++i) {
    if (i % 3 == 2) {
      EXPECT_NE(after[i], before[i]) << "block " << i << " was written while shared";
    } else {
      EXPECT_EQ(after[i], before[i]) << "block " << i << " was copied though unwritten";
    }
  }
  EXPECT_EQ(BlockStorages(parent), before);
  EXPECT_EQ(model->SerializeState(parent), parent_file) << "the fork's step changed its parent";

  // Both go on as one session running the whole text would.
  State whole = model->NewState();
  std::vector<int64_t> text = Prompt(40, vocab);
  text.push_back(5);
  absl::StatusOr<std::vector<float>> expected = model->Prefill(whole, text);
  ASSERT_TRUE(expected.ok());
  EXPECT_EQ(Row(*forked), *expected);
  absl::StatusOr<torch::Tensor> stepped = model->Step(parent, {5});
  ASSERT_TRUE(stepped.ok());
  EXPECT_EQ(Row(*stepped), *expected);
  EXPECT_EQ(model->SerializeState(fork), model->SerializeState(whole));
}

TEST(Qwen35KvBlocksTest, ThirtyTwoForksOfOnePrefixAddOnlyTheirOwnBlocks) {
  std::unique_ptr<Qwen35Model> model = TinyModel(16);
  ASSERT_NE(model, nullptr);
  State prefix = model->NewState();
  ASSERT_TRUE(model->Prefill(prefix, Prompt(200, model->vocab_size())).ok());  // 13 blocks
  const int64_t alone = MeasureResidentStates({&prefix}).bytes;
  EXPECT_EQ(alone, model->StateBytes(0) + (model->StateBytes(13 * 16) - model->StateBytes(0)));

  std::vector<State> forks;
  for (int i = 0; i < 32; ++i) {
    forks.push_back(CloneState(prefix));
    ASSERT_TRUE(model->Prefill(forks.back(), Prompt(20, model->vocab_size(), i + 1)).ok());
  }
  std::vector<const State*> all = {&prefix};
  for (const State& fork : forks) all.push_back(&fork);
  // Each fork wrote positions 200..219: its own copy of block 12 (200 is
  // inside it) and a new block 13, per attention layer, keys and values;
  // the first 12 blocks stay the prefix's.
  const int64_t block_bytes = model->StateBytes(16) - model->StateBytes(0);  // keys and values
  const int64_t per_fork = model->StateBytes(0) + 2 * block_bytes;
  const ResidentStates measured = MeasureResidentStates(all);
  EXPECT_EQ(measured.bytes, alone + 32 * per_fork);
  EXPECT_EQ(measured.fixed_parts, 33);
  const int64_t per_state = AttentionLayers(*model) * 2;  // blocks per position block
  EXPECT_EQ(measured.distinct_blocks, per_state * (13 + 32 * 2));
  EXPECT_EQ(measured.block_references, per_state * (13 + 32 * 14));
  EXPECT_EQ(measured.block_bytes, measured.distinct_blocks * block_bytes / per_state);

  // A state shared whole (what a server's fork holds until either session
  // moves on) counts nothing more.
  const State shared = prefix;
  all.push_back(&shared);
  EXPECT_EQ(MeasureResidentStates(all).bytes, measured.bytes);
  EXPECT_EQ(MeasureResidentStates(all).fixed_parts, 33);
}

TEST(Qwen35KvBlocksTest, TheBlockSizeChangesNoBitNorTheStateFile) {
  std::unique_ptr<Qwen35Model> reference = TinyModel(64);
  ASSERT_NE(reference, nullptr);
  const std::vector<int64_t> prompt = Prompt(100, reference->vocab_size());
  State expected = reference->NewState();
  absl::StatusOr<std::vector<float>> expected_logits = reference->Prefill(expected, prompt);
  ASSERT_TRUE(expected_logits.ok());
  for (int64_t block_tokens : {16, 48, 256}) {
    std::unique_ptr<Qwen35Model> model = TinyModel(block_tokens);
    ASSERT_NE(model, nullptr);
    State state = model->NewState();
    absl::StatusOr<std::vector<float>> logits = model->Prefill(state, prompt);
    ASSERT_TRUE(logits.ok());
    EXPECT_EQ(*logits, *expected_logits) << block_tokens << "-position blocks";
    EXPECT_EQ(model->SerializeState(state), reference->SerializeState(expected))
        << block_tokens << "-position blocks";
    // A file written under one block size reads under another and goes on
    // with the same bits.
    absl::StatusOr<State> read = model->DeserializeState(reference->SerializeState(expected));
    ASSERT_TRUE(read.ok()) << read.status();
    absl::StatusOr<torch::Tensor> a = model->Step(*read, {7});
    absl::StatusOr<torch::Tensor> b = reference->Step(expected, {7});
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_TRUE(torch::equal(*a, *b)) << block_tokens << "-position blocks";
    expected = reference->NewState();
    ASSERT_TRUE(reference->Prefill(expected, prompt).ok());
  }
}

TEST(Qwen35KvBlocksTest, BatchingSplittingAndResumingMoveNoKvBytes) {
  std::unique_ptr<Qwen35Model> model = TinyModel(16);
  ASSERT_NE(model, nullptr);
  State a = model->NewState(), b = model->NewState();
  ASSERT_TRUE(model->Prefill(a, Prompt(33, model->vocab_size(), 1)).ok());
  ASSERT_TRUE(model->Prefill(b, Prompt(70, model->vocab_size(), 2)).ok());
  State batch = StackStates({&a, &b});
  const std::vector<State> pieces = model->SplitState(batch);
  EXPECT_EQ(BlockStorages(pieces[0]), BlockStorages(a));
  EXPECT_EQ(BlockStorages(pieces[1]), BlockStorages(b));

  // A kept state at 20 resumed against the live session at 70: the blocks
  // up to 20 are the live one's, cut to the two that hold positions 0..19.
  State kept_source = model->NewState();
  ASSERT_TRUE(model->Prefill(kept_source, Prompt(20, model->vocab_size(), 2)).ok());
  const State kept = KeepFixedPart(kept_source, model->state_layout());
  EXPECT_TRUE(kept.tables.empty());
  const State resumed = ResumeFromKept(kept, b, model->state_layout());
  const std::vector<const void*> live = BlockStorages(b), cut = BlockStorages(resumed);
  ASSERT_EQ(cut.size(), static_cast<size_t>(AttentionLayers(*model) * 2 * 2));
  for (size_t i = 0, j = 0; i < live.size(); ++i) {
    if (i % 5 < 2) EXPECT_EQ(cut[j++], live[i]) << "block " << i;  // 70 positions: 5 blocks
  }
  EXPECT_EQ(model->SerializeState(resumed), model->SerializeState(kept_source));
}

TEST(Qwen35KvBlocksTest, ABlockSizeThatIsNotAMultipleOf16IsRefusedByName) {
  absl::StatusOr<Qwen35Config> config = Qwen35ShapeByName("tiny");
  ASSERT_TRUE(config.ok());
  for (int64_t bad : {0, -16, 24}) {
    LoadOptions options;
    options.kv_block_tokens = bad;
    absl::StatusOr<std::unique_ptr<Qwen35Model>> model = Qwen35Model::FromTensors(
        *config, RandomQwen35Weights(*config, 7), Tokenizer::Bytes(config->vocab_size), options);
    ASSERT_FALSE(model.ok()) << bad;
    EXPECT_NE(model.status().message().find("--kv_block_tokens"), std::string::npos)
        << model.status();
  }
}

}  // namespace
}  // namespace linserve
