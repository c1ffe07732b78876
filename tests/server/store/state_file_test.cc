// The state file rejects every damaged copy of itself (DATA_LOSS) and sound
// files it must not use (FAILED_PRECONDITION), and reads back what it wrote.

#include "server/store/state_file.h"

#include <random>

#include "engine/base/sha256.h"
#include "gtest/gtest.h"

namespace linserve {
namespace {

constexpr int64_t kMaxBytes = 1 << 20;

SessionRecord Sample() {
  SessionRecord r;
  r.model_fingerprint = std::string(64, 'a');
  r.tenant = "tenant-1";
  r.session_id = "0123456789abcdef0123456789abcdef";
  r.position = 4096;
  r.pending_token = 65;
  r.rng_seed = 0xfeedbeefcafe;
  r.rng_draws = 12;
  r.created_unix_ms = 1700000000000;
  r.last_used_unix_ms = 1700000001234;
  for (int i = 0; i < 300; ++i) r.payload.push_back(static_cast<char>(i * 7));
  return r;
}

// `file` with its checksum recomputed, as a sound writer of it would have.
std::string Resealed(std::string file) {
  file.resize(file.size() - 32);
  return file + Sha256Digest({file});
}

TEST(StateFileTest, ReadsBackWhatItWrote) {
  const SessionRecord r = Sample();
  auto back = DecodeStateFile(EncodeStateFile(r), kMaxBytes);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->model_fingerprint, r.model_fingerprint);
  EXPECT_EQ(back->tenant, r.tenant);
  EXPECT_EQ(back->session_id, r.session_id);
  EXPECT_EQ(back->position, r.position);
  EXPECT_EQ(back->pending_token, r.pending_token);
  EXPECT_EQ(back->rng_seed, r.rng_seed);
  EXPECT_EQ(back->rng_draws, r.rng_draws);
  EXPECT_EQ(back->created_unix_ms, r.created_unix_ms);
  EXPECT_EQ(back->last_used_unix_ms, r.last_used_unix_ms);
  EXPECT_EQ(back->payload, r.payload);
  EXPECT_TRUE(back->source.empty());
  EXPECT_TRUE(back->origin.empty());
}

// Version 2 holds the tokens the state consumed (position of them), or none.
TEST(StateFileTest, ReadsBackTheTokens) {
  SessionRecord r = Sample();
  for (int64_t i = 0; i < r.position; ++i) r.tokens.push_back(static_cast<int32_t>(i * 37 % 248077));
  r.tokens[5] = 0x7fffffff;
  auto back = DecodeStateFile(EncodeStateFile(r), 2 * kMaxBytes);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->tokens, r.tokens);
  EXPECT_EQ(back->payload, r.payload);
  auto none = DecodeStateFile(EncodeStateFile(Sample()), kMaxBytes);
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_TRUE(none->tokens.empty());
}

// Version 3 holds an HTTP chat session's messages: its context and reply.
TEST(StateFileTest, ReadsBackTheChat) {
  SessionRecord r = Sample();
  r.chat.context = R"({"messages": [{"role": "user", "content": "hi"}]})";
  r.chat.reply = std::string("<think>\n\n</think>\n\nHello\0 there", 30);
  auto back = DecodeStateFile(EncodeStateFile(r), kMaxBytes);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->chat.context, r.chat.context);
  EXPECT_EQ(back->chat.reply, r.chat.reply);
  EXPECT_EQ(back->payload, r.payload);
  auto none = DecodeStateFile(EncodeStateFile(Sample()), kMaxBytes);
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_TRUE(none->chat.empty());
}

// A version 2 file (no chat section) still reads, with no chat messages.
TEST(StateFileTest, AVersionTwoFileReadsWithoutChat) {
  SessionRecord r = Sample();
  r.tokens.assign(r.position, 9);
  std::string file = EncodeStateFile(r);
  file.resize(file.size() - 32 - 16);  // the checksum and the empty chat lengths
  file[8] = 2;
  auto back = DecodeStateFile(file + Sha256Digest({file}), kMaxBytes);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->tokens, r.tokens);
  EXPECT_TRUE(back->chat.empty());
}

// A chat length the file does not hold is DATA_LOSS naming it.
TEST(StateFileTest, AChatLengthThatLiesIsDataLoss) {
  SessionRecord r = Sample();
  r.chat.context = "{}";
  r.chat.reply = "abc";
  const std::string file = EncodeStateFile(r);
  const size_t context_length_at = file.size() - 32 - 3 - 8 - 2 - 8;
  const size_t reply_length_at = file.size() - 32 - 3 - 8;
  for (size_t at : {context_length_at, reply_length_at}) {
    for (uint64_t lie : {uint64_t{1}, uint64_t{4}, uint64_t{1} << 62, ~uint64_t{0}}) {
      std::string bad = file;
      for (int i = 0; i < 8; ++i) bad[at + i] = static_cast<char>((lie >> (8 * i)) & 0xff);
      auto decoded = DecodeStateFile(Resealed(bad), kMaxBytes);
      EXPECT_EQ(decoded.status().code(), absl::StatusCode::kDataLoss) << at << " " << lie;
      EXPECT_NE(decoded.status().message().find("chat"), std::string::npos) << decoded.status();
    }
  }
}

// A version 1 file (no token section) still reads, its tokens not known.
TEST(StateFileTest, AVersionOneFileReadsWithoutTokens) {
  std::string file = EncodeStateFile(Sample());
  file.resize(file.size() - 32 - 8 - 16);  // the checksum, token count and chat lengths
  file[8] = 1;
  auto back = DecodeStateFile(file + Sha256Digest({file}), kMaxBytes);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->payload, Sample().payload);
  EXPECT_TRUE(back->tokens.empty());
}

// A token count that is neither 0 nor the position, or that the file does
// not hold, is DATA_LOSS naming it (a client can reseal a crafted file).
TEST(StateFileTest, ATokenCountThatLiesIsDataLoss) {
  SessionRecord r = Sample();
  r.tokens.assign(10, 7);  // 10 tokens at position 4096
  auto wrong = DecodeStateFile(EncodeStateFile(r), kMaxBytes);
  EXPECT_EQ(wrong.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(wrong.status().message().find("token count 10 is neither 0 nor the position 4096"),
            std::string::npos)
      << wrong.status();
  std::string file = EncodeStateFile(Sample());
  const size_t count_at = file.size() - 32 - 16 - 8;  // before the empty chat lengths
  for (uint64_t lie : {uint64_t{1}, uint64_t{1} << 62, ~uint64_t{0}}) {
    std::string bad = file;
    for (int i = 0; i < 8; ++i) bad[count_at + i] = static_cast<char>((lie >> (8 * i)) & 0xff);
    auto decoded = DecodeStateFile(Resealed(bad), kMaxBytes);
    EXPECT_EQ(decoded.status().code(), absl::StatusCode::kDataLoss) << lie;
    EXPECT_NE(decoded.status().message().find("token count"), std::string::npos)
        << decoded.status();
  }
}

// A named state's source and a session's origin are written only when set,
// so a session's header is what it was before named states.
TEST(StateFileTest, SourceAndOriginAreWrittenOnlyWhenSet) {
  SessionRecord r = Sample();
  const std::string plain = EncodeStateFile(r);
  EXPECT_EQ(plain.find("source"), std::string::npos);
  EXPECT_EQ(plain.find("origin"), std::string::npos);
  r.source = "rwkv_peft";
  r.origin = std::string(64, 'd');
  auto back = DecodeStateFile(EncodeStateFile(r), kMaxBytes);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->source, "rwkv_peft");
  EXPECT_EQ(back->origin, r.origin);
}

TEST(StateFileTest, EveryTruncationIsDataLoss) {
  const std::string file = EncodeStateFile(Sample());
  for (size_t length = 0; length < file.size(); ++length) {
    auto decoded = DecodeStateFile(std::string_view(file).substr(0, length), kMaxBytes);
    ASSERT_EQ(decoded.status().code(), absl::StatusCode::kDataLoss) << "length " << length;
  }
}

TEST(StateFileTest, EverySingleBitFlipIsDataLoss) {
  const std::string file = EncodeStateFile(Sample());
  std::mt19937_64 random(3);
  for (int i = 0; i < 10000; ++i) {
    std::string damaged = file;
    const size_t bit = random() % (file.size() * 8);
    damaged[bit / 8] = static_cast<char>(damaged[bit / 8] ^ (1 << (bit % 8)));
    ASSERT_EQ(DecodeStateFile(damaged, kMaxBytes).status().code(), absl::StatusCode::kDataLoss)
        << "bit " << bit;
  }
}

// The file as ImportSession receives it: in pieces of `step` bytes (the
// last one shorter).
absl::StatusOr<SessionRecord> Assembled(std::string_view file, size_t step,
                                        std::string_view fingerprint = std::string(64, 'a')) {
  StateFileAssembler assembler(/*expected_bytes=*/file.size() / 2);
  for (size_t at = 0; at < file.size(); at += step) assembler.Append(file.substr(at, step));
  return assembler.Decode(kMaxBytes, fingerprint);
}

TEST(StateFileAssemblerTest, DecodesAsTheWholeFileDoesWhereverItIsCut) {
  const std::string file = EncodeStateFile(Sample());
  for (size_t step : {size_t{1}, size_t{7}, size_t{31}, size_t{32}, size_t{33}, size_t{64},
                      file.size() - 1, file.size()}) {
    absl::StatusOr<SessionRecord> back = Assembled(file, step);
    ASSERT_TRUE(back.ok()) << "step " << step << ": " << back.status();
    EXPECT_EQ(back->payload, Sample().payload);
    EXPECT_EQ(back->session_id, Sample().session_id);
    EXPECT_EQ(back->position, Sample().position);
  }
  EXPECT_EQ(Assembled(file, 64, std::string(64, 'b')).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(StateFileAssemblerTest, RefusesWhatDecodeStateFileRefuses) {
  const std::string file = EncodeStateFile(Sample());
  for (size_t length = 0; length < file.size(); ++length) {
    ASSERT_EQ(Assembled(std::string_view(file).substr(0, length), 13).status().code(),
              absl::StatusCode::kDataLoss)
        << "length " << length;
  }
  std::mt19937_64 random(5);
  for (int i = 0; i < 2000; ++i) {
    std::string damaged = file;
    const size_t bit = random() % (file.size() * 8);
    damaged[bit / 8] = static_cast<char>(damaged[bit / 8] ^ (1 << (bit % 8)));
    ASSERT_EQ(Assembled(damaged, 1 + random() % 100).status().code(),
              absl::StatusCode::kDataLoss)
        << "bit " << bit;
  }
  EXPECT_EQ(Assembled(file + "x", 50).status().code(), absl::StatusCode::kDataLoss);
}

TEST(StateFileTest, AppendedBytesAreDataLoss) {
  EXPECT_EQ(DecodeStateFile(EncodeStateFile(Sample()) + "x", kMaxBytes).status().code(),
            absl::StatusCode::kDataLoss);
}

TEST(StateFileTest, AnotherFormatVersionIsFailedPrecondition) {
  std::string file = EncodeStateFile(Sample());
  file[8] = 4;  // version 4, checksum made to match
  auto decoded = DecodeStateFile(Resealed(file), kMaxBytes);
  EXPECT_EQ(decoded.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(decoded.status().message().find("format version 4"), std::string::npos)
      << decoded.status();
}

TEST(StateFileTest, AnotherModelIsFailedPrecondition) {
  const std::string file = EncodeStateFile(Sample());
  EXPECT_TRUE(DecodeStateFileOfModel(file, kMaxBytes, std::string(64, 'a')).ok());
  auto other = DecodeStateFileOfModel(file, kMaxBytes, std::string(64, 'b'));
  EXPECT_EQ(other.status().code(), absl::StatusCode::kFailedPrecondition) << other.status();
}

TEST(StateFileTest, SoundFileWithBadFieldsIsDataLoss) {
  SessionRecord r = Sample();
  r.position = -1;
  EXPECT_EQ(DecodeStateFile(EncodeStateFile(r), kMaxBytes).status().code(),
            absl::StatusCode::kDataLoss);
  r = Sample();
  r.pending_token = -2;
  EXPECT_EQ(DecodeStateFile(EncodeStateFile(r), kMaxBytes).status().code(),
            absl::StatusCode::kDataLoss);
}

TEST(StateFileTest, FileOverTheLimitIsRefusedBeforeReading) {
  const std::string file = EncodeStateFile(Sample());
  auto decoded = DecodeStateFile(file, static_cast<int64_t>(file.size()) - 1);
  EXPECT_EQ(decoded.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(decoded.status().message().find("limit"), std::string::npos);
}

// A header length or payload length claiming more than the file holds is
// refused without allocating it.
TEST(StateFileTest, LengthsLargerThanTheFileAreDataLoss) {
  std::string file = EncodeStateFile(Sample());
  std::string huge_header = file;
  huge_header[12] = huge_header[13] = huge_header[14] = huge_header[15] = '\xff';
  EXPECT_EQ(DecodeStateFile(Resealed(huge_header), kMaxBytes).status().code(),
            absl::StatusCode::kDataLoss);
}

// Header numbers that are not integers of the field's type: JSON allows
// them, a resealed file can carry them, and converting them blindly is
// undefined behaviour (a float past int64) or a silent wrap (found by
// fuzz/fuzz_state_file).
TEST(StateFileTest, HeaderNumbersOutsideTheirTypeAreDataLoss) {
  const std::string file = EncodeStateFile(Sample());
  const uint32_t header_bytes = static_cast<unsigned char>(file[12]) |
                                static_cast<unsigned char>(file[13]) << 8;
  const std::string header = file.substr(16, header_bytes);
  struct Case {
    std::string from, to, message;
  };
  const Case cases[] = {
      {"\"position\":4096", "\"position\":1e300", "position = 1e+300 is not an integer"},
      {"\"position\":4096", "\"position\":4096.5", "position = 4096.5 is not an integer"},
      {"\"position\":4096", "\"position\":9223372036854775808", "position = 9223372036854775808"},
      {"\"rng_draws\":12", "\"rng_draws\":-1", "rng_draws = -1 is not an integer"},
      {"\"rng_seed\":280297064090366", "\"rng_seed\":1.5", "rng_seed = 1.5"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.to);
    std::string changed = header;
    const size_t at = changed.find(c.from);
    ASSERT_NE(at, std::string::npos) << header;
    changed.replace(at, c.from.size(), c.to);
    std::string crafted = file.substr(0, 12);
    for (int i = 0; i < 4; ++i) crafted.push_back(static_cast<char>(changed.size() >> (8 * i)));
    crafted += changed + file.substr(16 + header_bytes);
    auto decoded = DecodeStateFile(Resealed(crafted), kMaxBytes);
    EXPECT_EQ(decoded.status().code(), absl::StatusCode::kDataLoss);
    EXPECT_NE(decoded.status().message().find(c.message), std::string::npos) << decoded.status();
  }
}

}  // namespace
}  // namespace linserve
