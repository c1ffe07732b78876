#include "server/net/listen_address.h"

#include <gtest/gtest.h>

#include "server/common/startup_banner.h"

namespace linserve {
namespace {

TEST(ListenAddressTest, TakesEveryFormUsersWrite) {
  struct Case {
    const char* text;
    const char* host;
    int port;
  };
  for (const Case& c : {Case{"localhost:8080", "localhost", 8080},
                        Case{"127.0.0.1:8080", "127.0.0.1", 8080}, Case{"[::1]:8080", "::1", 8080},
                        Case{"0.0.0.0:0", "0.0.0.0", 0}, Case{"host.example:443", "host.example", 443},
                        Case{":8080", "", 8080}, Case{"[::]:65535", "::", 65535}}) {
    absl::StatusOr<ListenAddress> parsed = ParseListenAddress("http_listen", c.text);
    ASSERT_TRUE(parsed.ok()) << c.text << ": " << parsed.status();
    EXPECT_EQ(parsed->host, c.host) << c.text;
    EXPECT_EQ(parsed->port, c.port) << c.text;
    EXPECT_EQ(parsed->flag, "http_listen");
    EXPECT_EQ(parsed->ToString(), c.text);
  }
}

TEST(ListenAddressTest, RefusesMalformedValuesNamingTheFlag) {
  for (const char* bad : {"8080", "localhost", "::1:8080", "[::1]8080", "[::1:8080", "[x]:80",
                          "localhost:", "localhost:65536", "localhost:-1", "localhost:+80",
                          "local host:80", "a/b:80", "localhost:80x", ""}) {
    absl::StatusOr<ListenAddress> parsed = ParseListenAddress("listen", bad);
    ASSERT_FALSE(parsed.ok()) << bad;
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(parsed.status().message().find("--listen="), absl::string_view::npos)
        << parsed.status();
  }
}

TEST(ListenAddressTest, ASeparateHostAndPortTakeIpv6AndEveryInterface) {
  absl::StatusOr<ListenAddress> v6 = ListenAddressOf("metrics_host", "::1", 9464);
  ASSERT_TRUE(v6.ok()) << v6.status();
  EXPECT_EQ(v6->host, "::1");
  EXPECT_EQ(v6->ToString(), "[::1]:9464");
  absl::StatusOr<ListenAddress> every = ListenAddressOf("metrics_host", "", 0);
  ASSERT_TRUE(every.ok()) << every.status();
  EXPECT_EQ(every->host, "");
}

TEST(ListenAddressTest, ResolvesLiteralsToThemselvesAndEveryInterfaceToBothFamilies) {
  auto resolved = ResolveListenAddress({"listen", "127.0.0.1", 1});
  ASSERT_TRUE(resolved.ok());
  ASSERT_EQ(resolved->size(), 1u);
  EXPECT_EQ((*resolved)[0].ip, "127.0.0.1");
  EXPECT_FALSE((*resolved)[0].optional);  // a literal the user wrote must bind
  resolved = ResolveListenAddress({"listen", "", 1});
  ASSERT_TRUE(resolved.ok());
  ASSERT_EQ(resolved->size(), 2u);
  EXPECT_EQ((*resolved)[0].ip, "0.0.0.0");
  EXPECT_EQ((*resolved)[1].ip, "::");
  resolved = ResolveListenAddress({"listen", "localhost", 1});
  ASSERT_TRUE(resolved.ok()) << resolved.status();
  for (const BindAddress& a : *resolved) EXPECT_TRUE(IsLoopbackIp(a.ip)) << a.ip;
  resolved = ResolveListenAddress({"http_listen", "no-such-host.invalid", 1});
  ASSERT_FALSE(resolved.ok());
  EXPECT_NE(resolved.status().message().find("--http_listen=no-such-host.invalid:1"),
            absl::string_view::npos)
      << resolved.status();
}

TEST(ListenAddressTest, LoopbackIsTheWholeRangeAndIpv6) {
  EXPECT_TRUE(IsLoopbackIp("127.0.0.1"));
  EXPECT_TRUE(IsLoopbackIp("127.1.2.3"));
  EXPECT_TRUE(IsLoopbackIp("::1"));
  EXPECT_FALSE(IsLoopbackIp("0.0.0.0"));
  EXPECT_FALSE(IsLoopbackIp("::"));
  EXPECT_FALSE(IsLoopbackIp("10.0.0.1"));
}

TEST(StartupBannerTest, NamesTheModelAndEveryAddress) {
  StartupFacts facts;
  facts.served_model_name = "default";
  facts.architecture = "transformer";
  facts.weight_elements = 2'170'000;
  facts.weight_bytes = 8'680'000;
  facts.grpc = {"127.0.0.1:50051", "[::1]:50051"};
  facts.http = {"127.0.0.1:8080"};
  facts.metrics = {"127.0.0.1:9464"};
  EXPECT_EQ(StartupBanner(facts),
            "linserve: serving \"default\" (transformer, 2.2M parameters, 8.7 MB) on grpc "
            "127.0.0.1:50051 and [::1]:50051, http http://127.0.0.1:8080, metrics "
            "http://127.0.0.1:9464/metrics");
  facts.tls = true;
  facts.metrics.clear();
  EXPECT_NE(StartupBanner(facts).find("http https://127.0.0.1:8080"), std::string::npos);
  EXPECT_EQ(StartupBanner(facts).find("metrics"), std::string::npos);
  EXPECT_EQ(ShortCount(950), "950");
  EXPECT_EQ(ShortCount(27'800'000'000), "27.8B");
  EXPECT_EQ(ShortBytes(512), "512 B");
  EXPECT_EQ(ShortBytes(1'500'000'000), "1.5 GB");
}

}  // namespace
}  // namespace linserve
