#ifndef LINSERVE_CLIENT_BENCH_GRPC_H_
#define LINSERVE_CLIENT_BENCH_GRPC_H_

// The load test over gRPC: Generate on the callback API, no thread per
// request, so hundreds can be in flight. Statuses are gRPC code names.

#include <memory>

#include "absl/status/statusor.h"
#include "client/bench_transport.h"
#include "client/connection.h"

namespace linserve {

absl::StatusOr<std::unique_ptr<BenchTransport>> MakeGrpcBenchTransport(
    const ConnectionOptions& connection);

}  // namespace linserve

#endif  // LINSERVE_CLIENT_BENCH_GRPC_H_
