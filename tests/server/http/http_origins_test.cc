#include "server/http/http_origins.h"

#include <gtest/gtest.h>

namespace linserve {
namespace {

OriginPolicy Policy(std::vector<std::string> cors = {}) {
  return {std::move(cors), DefaultAllowedHosts({"http_listen", "localhost", 8080}), false};
}

TEST(HttpOriginsTest, TheServersOwnPageIsAllowedOnTheHostsItAnswersTo) {
  for (const char* host : {"localhost:8080", "127.0.0.1:8080", "[::1]:8080", "LOCALHOST:8080"}) {
    EXPECT_EQ(JudgeOrigin(Policy(), std::string("http://") + host, host), OriginVerdict::kSameOrigin)
        << host;
  }
}

TEST(HttpOriginsTest, DnsRebindingIsRefused) {
  // evil.example resolves to this server: its page is same-origin with its
  // own Host, which the server does not answer to.
  EXPECT_EQ(JudgeOrigin(Policy(), "http://evil.example:8080", "evil.example:8080"),
            OriginVerdict::kRefused);
  OriginPolicy listed = Policy();
  listed.allowed_hosts.push_back("evil.example");
  EXPECT_EQ(JudgeOrigin(listed, "http://evil.example:8080", "evil.example:8080"),
            OriginVerdict::kSameOrigin);
}

TEST(HttpOriginsTest, AnotherOriginNeedsTheCorsList) {
  EXPECT_EQ(JudgeOrigin(Policy(), "http://other.example", "localhost:8080"), OriginVerdict::kRefused);
  EXPECT_EQ(JudgeOrigin(Policy(), "http://localhost:9999", "localhost:8080"), OriginVerdict::kRefused);
  EXPECT_EQ(JudgeOrigin(Policy(), "https://localhost:8080", "localhost:8080"), OriginVerdict::kRefused);
  EXPECT_EQ(JudgeOrigin(Policy(), "http://localhost:8080", ""), OriginVerdict::kRefused);
  EXPECT_EQ(JudgeOrigin(Policy({"http://other.example"}), "http://other.example", "localhost:8080"),
            OriginVerdict::kCors);
  EXPECT_EQ(JudgeOrigin(Policy({"*"}), "http://any.example", "localhost:8080"), OriginVerdict::kCors);
}

TEST(HttpOriginsTest, DefaultHostsAreLoopbackAndTheListenHost) {
  EXPECT_EQ(DefaultAllowedHosts({"http_listen", "", 8080}),
            (std::vector<std::string>{"localhost", "127.0.0.1", "::1"}));
  EXPECT_EQ(DefaultAllowedHosts({"http_listen", "0.0.0.0", 8080}).size(), 3u);
  EXPECT_EQ(DefaultAllowedHosts({"http_listen", "Box.Example", 8080}).back(), "box.example");
  EXPECT_EQ(HostWithoutPort("[::1]:8080"), "::1");
  EXPECT_EQ(HostWithoutPort("Host.Example"), "host.example");
}

}  // namespace
}  // namespace linserve
