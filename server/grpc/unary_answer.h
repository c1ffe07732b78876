#ifndef LINSERVE_SERVER_GRPC_UNARY_ANSWER_H_
#define LINSERVE_SERVER_GRPC_UNARY_ANSWER_H_

// What the service's RPCs share: the answer before the model is loaded,
// the callback that finishes a unary call from whichever thread the
// scheduler answers on, and the reactor that refuses a client stream.

#include <functional>
#include <utility>

#include <grpcpp/grpcpp.h>

#include "absl/status/status.h"
#include "server/grpc/generate_stream.h"
#include "server/grpc/service.h"

namespace linserve {

inline absl::Status NotReady() {
  return absl::UnavailableError("the model is still loading; retry shortly");
}

// Fills the response with `fill` when the result is OK, then finishes the
// call and counts it under `method`.
template <typename T>
Scheduler::Done<T> Answer(LinserveService* service, grpc::ServerUnaryReactor* reactor,
                          const char* method, std::function<void(const T&)> fill) {
  return [service, reactor, method, fill = std::move(fill)](absl::StatusOr<T> result) {
    if (result.ok()) fill(*result);
    const grpc::Status status = ToGrpcStatus(result.status());
    service->Count(method, status);
    reactor->Finish(status);
  };
}

// Answers a client stream at once (opened past --max_open_streams, or
// before the model is loaded) without reading anything.
template <typename Message>
class RefusedRead : public grpc::ServerReadReactor<Message> {
 public:
  explicit RefusedRead(const grpc::Status& status) { this->Finish(status); }
  void OnDone() override { delete this; }
};

}  // namespace linserve

#endif  // LINSERVE_SERVER_GRPC_UNARY_ANSWER_H_
