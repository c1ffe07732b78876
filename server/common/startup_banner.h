#ifndef LINSERVE_SERVER_COMMON_STARTUP_BANNER_H_
#define LINSERVE_SERVER_COMMON_STARTUP_BANNER_H_

#include <cstdint>
#include <string>
#include <vector>

namespace linserve {

// What the start-up banner tells: the model and where each port listens.
struct StartupFacts {
  std::string served_model_name;  // the API's model id
  std::string architecture;       // "transformer", "rwkv7"
  int64_t weight_elements = 0;
  int64_t weight_bytes = 0;
  // Each port's bound addresses ("127.0.0.1:50051", "[::1]:50051"); empty
  // where that port is off.
  std::vector<std::string> grpc, http, metrics, health;
  bool tls = false;  // the HTTP ports speak https
};

// One line for a person, printed on stdout once the model is loaded and
// every port is bound, e.g.
//   linserve: serving "default" (transformer, 2.1M parameters, 8.4 MB) on
//   grpc 127.0.0.1:50051, http http://127.0.0.1:8080, metrics
//   http://127.0.0.1:9464/metrics
// (one line). The JSON log on stderr is for machines.
std::string StartupBanner(const StartupFacts& facts);

// 2.1M, 12.0B, 950: a count in short form.
std::string ShortCount(int64_t n);
// 8.4 MB, 1.2 GB, 512 B: bytes in decimal units.
std::string ShortBytes(int64_t bytes);

}  // namespace linserve

#endif  // LINSERVE_SERVER_COMMON_STARTUP_BANNER_H_
