#ifndef LINSERVE_SERVER_SERVICE_H_
#define LINSERVE_SERVER_SERVICE_H_

#include <atomic>
#include <string>

#include <grpcpp/grpcpp.h>

#include "linserve/v1/linserve.grpc.pb.h"
#include "server/common/metrics.h"
#include "server/common/reasoning_split.h"
#include "server/requests/request_validation.h"
#include "server/scheduling/scheduler.h"
#include "server/grpc/stream_limit.h"

namespace linserve {

struct ServiceOptions {
  RequestLimits limits;
  SchedulerOptions scheduler;           // reported in ModelInfo.limits
  int32_t max_state_chunk_bytes = 64 << 10;  // ExportSession chunks, ImportSession's cap per chunk
  int64_t max_open_streams = 1024;  // Generate, Export and ImportSession streams open at once
  int64_t max_open_streams_per_tenant = 256;  // of those, one authenticated tenant's
};

// The linserve.v1.Linserve service on gRPC's callback API: requests are
// validated and turned into plain structs here, at the edge, then handed to
// the Scheduler; its answers come back through reactors. Holds no session
// state of its own. Thread-safe.
class LinserveService final : public v1::Linserve::CallbackService {
 public:
  LinserveService(Metrics* metrics, ServiceOptions options);

  // Until the scheduler is set every RPC is UNAVAILABLE (the model is still
  // loading). The scheduler must outlive the server's RPCs.
  // Requests are then checked against the served model's vocabulary, and
  // Generate's messages mark reasoning in `reasoning_format`.
  void SetScheduler(Scheduler* scheduler,
                    ReasoningFormat reasoning_format = ReasoningFormat::kNone);

  grpc::ServerWriteReactor<v1::GenerateResponse>* Generate(
      grpc::CallbackServerContext* context, const v1::GenerateRequest* request) override;
  grpc::ServerUnaryReactor* CreateSession(grpc::CallbackServerContext* context,
                                          const v1::CreateSessionRequest* request,
                                          v1::Session* response) override;
  grpc::ServerUnaryReactor* GetSession(grpc::CallbackServerContext* context,
                                       const v1::GetSessionRequest* request,
                                       v1::Session* response) override;
  grpc::ServerUnaryReactor* ListSessions(grpc::CallbackServerContext* context,
                                         const v1::ListSessionsRequest* request,
                                         v1::ListSessionsResponse* response) override;
  grpc::ServerUnaryReactor* DeleteSession(grpc::CallbackServerContext* context,
                                          const v1::DeleteSessionRequest* request,
                                          v1::DeleteSessionResponse* response) override;
  grpc::ServerUnaryReactor* ForkSession(grpc::CallbackServerContext* context,
                                        const v1::ForkSessionRequest* request,
                                        v1::Session* response) override;
  grpc::ServerWriteReactor<v1::StateChunk>* ExportSession(
      grpc::CallbackServerContext* context, const v1::ExportSessionRequest* request) override;
  grpc::ServerReadReactor<v1::StateChunk>* ImportSession(grpc::CallbackServerContext* context,
                                                         v1::Session* response) override;
  // Named states (named_state_rpcs.cc).
  grpc::ServerUnaryReactor* CreateNamedState(grpc::CallbackServerContext* context,
                                             const v1::CreateNamedStateRequest* request,
                                             v1::NamedState* response) override;
  grpc::ServerReadReactor<v1::NamedStateChunk>* UploadNamedState(
      grpc::CallbackServerContext* context, v1::NamedState* response) override;
  grpc::ServerUnaryReactor* GetNamedState(grpc::CallbackServerContext* context,
                                          const v1::GetNamedStateRequest* request,
                                          v1::NamedState* response) override;
  grpc::ServerUnaryReactor* ListNamedStates(grpc::CallbackServerContext* context,
                                            const v1::ListNamedStatesRequest* request,
                                            v1::ListNamedStatesResponse* response) override;
  grpc::ServerUnaryReactor* DeleteNamedState(grpc::CallbackServerContext* context,
                                             const v1::DeleteNamedStateRequest* request,
                                             v1::DeleteNamedStateResponse* response) override;
  grpc::ServerUnaryReactor* GetModelInfo(grpc::CallbackServerContext* context,
                                         const v1::GetModelInfoRequest* request,
                                         v1::ModelInfo* response) override;

  // For the reactors of this file.
  void Count(const char* method, const grpc::Status& status);
  Scheduler* scheduler() const { return scheduler_.load(); }
  // A place under --max_open_streams and `tenant`'s share, or
  // RESOURCE_EXHAUSTED (counted).
  absl::StatusOr<StreamLimit::Ticket> OpenStream(const std::string& tenant);
  const ServiceOptions& options() const { return options_; }

 private:
  // A unary call answered at once with `status`, counted.
  grpc::ServerUnaryReactor* Reply(grpc::CallbackServerContext* context, const char* method,
                                  const absl::Status& status);

  Metrics* const metrics_;
  ServiceOptions options_;  // fixed once the scheduler is set
  StreamLimit streams_;
  std::atomic<Scheduler*> scheduler_{nullptr};
  ReasoningFormat reasoning_format_ = ReasoningFormat::kNone;  // published with scheduler_
};

// The access-log line of one Generate (gRPC) or completion (HTTP): the
// status code's name, the error's text ("" when none) and, when the turn
// ran, its summary.
void LogGenerate(const std::string& protocol, const std::string& code, const std::string& error,
                 const TurnSummary* summary);

// Every field of the answer from the scheduler's view, so that each RPC that
// answers with a Session (create, get, fork, import) says the same.
void FillSession(const SessionInfo& info, v1::Session* out);
void FillNamedState(const NamedStateInfo& info, v1::NamedState* out);

// The caller's tenant: the "linserve-tenant" property an authentication
// processor put on the call, or "" when auth is off.
std::string TenantOf(const grpc::CallbackServerContext& context);

}  // namespace linserve

#endif  // LINSERVE_SERVER_SERVICE_H_
