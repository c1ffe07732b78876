#ifndef LINSERVE_SERVER_PROTOCOL_H_
#define LINSERVE_SERVER_PROTOCOL_H_

namespace linserve {

// The transport a request came by: the `protocol` label of the per-request
// metrics (server/common/metrics.h).
enum class Protocol { kGrpc = 0, kHttp = 1 };
inline constexpr int kProtocols = 2;

inline const char* ProtocolName(Protocol protocol) {
  return protocol == Protocol::kHttp ? "http" : "grpc";
}

}  // namespace linserve

#endif  // LINSERVE_SERVER_PROTOCOL_H_
