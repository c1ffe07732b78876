// Every bad field of a Generate request is INVALID_ARGUMENT naming the field
// and its bound; good requests come out in the engine's terms.

#include "server/requests/request_validation.h"

#include <cmath>
#include <limits>

#include "absl/container/flat_hash_set.h"
#include "gtest/gtest.h"
#include "server/requests/session_id.h"

namespace linserve {
namespace {

v1::GenerateRequest Good() {
  v1::GenerateRequest r;
  r.set_prompt("ROMEO:");
  return r;
}

void ExpectInvalid(const v1::GenerateRequest& request, const std::string& expected) {
  auto call = ValidateGenerateRequest(request, RequestLimits{});
  ASSERT_EQ(call.status().code(), absl::StatusCode::kInvalidArgument) << expected;
  EXPECT_NE(call.status().message().find(expected), std::string::npos)
      << "got: " << call.status().message() << "\nwanted: " << expected;
}

TEST(RequestValidationTest, GoodRequestTakesTheDefaults) {
  auto call = ValidateGenerateRequest(Good(), RequestLimits{});
  ASSERT_TRUE(call.ok()) << call.status();
  EXPECT_EQ(call->prompt, "ROMEO:");
  EXPECT_EQ(call->sampling.temperature, 1.0f);
  EXPECT_EQ(call->sampling.top_p, 1.0f);
  EXPECT_EQ(call->sampling.repetition_penalty, 1.0f);
  EXPECT_EQ(call->sampling.max_new_tokens, RequestLimits{}.default_max_new_tokens);
  EXPECT_FALSE(call->seed_given);
}

TEST(RequestValidationTest, ASeedOfZeroIsASeedWhenTheFieldIsSet) {
  v1::GenerateRequest r = Good();
  r.mutable_sampling()->set_seed(0);
  auto call = ValidateGenerateRequest(r, RequestLimits{});
  ASSERT_TRUE(call.ok()) << call.status();
  EXPECT_TRUE(call->seed_given);
  EXPECT_EQ(call->sampling.seed, 0u);
  // An old client's 0 never reaches the wire: the field arrives unset.
  v1::GenerateRequest old_client;
  ASSERT_TRUE(old_client.ParseFromString(Good().SerializeAsString()));
  call = ValidateGenerateRequest(old_client, RequestLimits{});
  ASSERT_TRUE(call.ok()) << call.status();
  EXPECT_FALSE(call->seed_given);
}

TEST(RequestValidationTest, FieldsReachTheEngineParams) {
  v1::GenerateRequest r = Good();
  r.set_session_id("0123456789abcdef0123456789abcdef");
  r.mutable_sampling()->set_temperature(0.0f);
  r.mutable_sampling()->set_top_k(5);
  r.mutable_sampling()->set_seed(42);
  r.set_max_new_tokens(7);
  r.add_stop("\n\n");
  r.set_logprobs(true);
  r.set_top_logprobs(3);
  auto call = ValidateGenerateRequest(r, RequestLimits{});
  ASSERT_TRUE(call.ok()) << call.status();
  EXPECT_EQ(call->sampling.temperature, 0.0f);
  EXPECT_EQ(call->sampling.top_k, 5);
  EXPECT_EQ(call->sampling.seed, 42u);
  EXPECT_TRUE(call->seed_given);
  EXPECT_EQ(call->sampling.max_new_tokens, 7);
  EXPECT_EQ(call->sampling.stop, std::vector<std::string>{"\n\n"});
  EXPECT_EQ(call->top_logprobs, 3);
}

TEST(RequestValidationTest, EveryBadFieldIsNamedWithItsBound) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  v1::GenerateRequest r;
  ExpectInvalid(r, "prompt is empty");

  r = Good();
  r.set_prompt(std::string("ab\xff", 3));
  ExpectInvalid(r, "prompt is not valid UTF-8 (first bad byte at offset 2)");
  r.set_prompt(std::string("caf\xc3", 4));  // truncated last character
  ExpectInvalid(r, "prompt is not valid UTF-8 (first bad byte at offset 3)");
  r.set_prompt(std::string(RequestLimits{}.max_prompt_bytes + 1, 'a'));
  ExpectInvalid(r, "prompt is 16385 bytes; at most 16384 are allowed");

  r = Good();
  r.set_session_id("../../etc/passwd");
  ExpectInvalid(r, "session_id is malformed");
  r.set_session_id("0123456789ABCDEF0123456789ABCDEF");
  ExpectInvalid(r, "session_id is malformed");

  r = Good();
  r.set_max_new_tokens(-1);
  ExpectInvalid(r, "max_new_tokens = -1 is outside [1, 4096]");
  r.set_max_new_tokens(4097);
  ExpectInvalid(r, "max_new_tokens = 4097 is outside [1, 4096]");

  r = Good();
  r.mutable_sampling()->set_temperature(nan);
  ExpectInvalid(r, "temperature = nan is outside [0, 100]");
  r.mutable_sampling()->set_temperature(-1);
  ExpectInvalid(r, "temperature = -1 is outside [0, 100]");
  r = Good();
  r.mutable_sampling()->set_top_p(0);
  ExpectInvalid(r, "top_p = 0 is outside (0, 1]");
  r = Good();
  r.mutable_sampling()->set_top_k(259);
  ExpectInvalid(r, "top_k = 259 is outside [0, 258]");
  r = Good();
  r.mutable_sampling()->set_min_p(inf);
  ExpectInvalid(r, "min_p = inf is outside [0, 1]");
  r = Good();
  r.mutable_sampling()->set_repetition_penalty(0);
  ExpectInvalid(r, "repetition_penalty = 0 is outside (0, 10]");
  r = Good();
  r.mutable_sampling()->set_presence_penalty(3);
  ExpectInvalid(r, "presence_penalty = 3 is outside [-2, 2]");
  r = Good();
  r.mutable_sampling()->set_frequency_penalty(-inf);
  ExpectInvalid(r, "frequency_penalty = -inf is outside [-2, 2]");

  r = Good();
  r.add_stop("");
  ExpectInvalid(r, "stop[0] is empty");
  r = Good();
  for (int i = 0; i < 9; ++i) r.add_stop("x");
  ExpectInvalid(r, "stop has 9 sequences; at most 8 are allowed");
  r = Good();
  r.add_stop(std::string(257, 'x'));
  ExpectInvalid(r, "stop[0] is 257 bytes; at most 256 are allowed");

  r = Good();
  r.set_logprobs(true);
  r.set_top_logprobs(21);
  ExpectInvalid(r, "top_logprobs = 21 is outside [0, 20]");
  r.set_logprobs(false);
  r.set_top_logprobs(2);
  ExpectInvalid(r, "top_logprobs needs logprobs = true");

  r = Good();
  r.set_cache_salt(std::string(257, 's'));
  ExpectInvalid(r, "cache_salt is 257 bytes; at most max_cache_salt_bytes = 256 are allowed");
  r.set_cache_salt(std::string(256, 's'));
  EXPECT_EQ(ValidateGenerateRequest(r, RequestLimits{})->cache_salt, std::string(256, 's'));
}

TEST(RequestValidationTest, ContinuingASessionMayHaveAnEmptyPrompt) {
  v1::GenerateRequest r;
  r.set_session_id("0123456789abcdef0123456789abcdef");
  EXPECT_TRUE(ValidateGenerateRequest(r, RequestLimits{}).ok());
}

TEST(RequestValidationTest, Utf8ChecksAcceptEveryValidCharacter) {
  EXPECT_TRUE(ValidateUtf8("t", "plain ascii").ok());
  EXPECT_TRUE(ValidateUtf8("t", "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 \xef\xbf\xbd").ok());
  EXPECT_FALSE(ValidateUtf8("t", "\xed\xa0\x80").ok());   // surrogate
  EXPECT_FALSE(ValidateUtf8("t", "\xc0\xaf").ok());       // overlong
  EXPECT_FALSE(ValidateUtf8("t", "\xf4\x90\x80\x80").ok());  // above U+10FFFF
}

TEST(SessionIdTest, FreshIdsAreWellFormedAndDistinct) {
  absl::flat_hash_set<std::string> seen;
  for (int i = 0; i < 10000; ++i) {
    auto id = NewSessionId();
    ASSERT_TRUE(id.ok()) << id.status();
    ASSERT_TRUE(ValidateSessionId("id", *id).ok()) << *id;
    ASSERT_TRUE(seen.insert(*id).second) << "repeated id " << *id;
  }
}

}  // namespace
}  // namespace linserve
