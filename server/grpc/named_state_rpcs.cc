// The named-state RPCs: made from a prompt or uploaded in chunks, got,
// listed, deleted (server/scheduling/named_states.h does the work).

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "server/grpc/service.h"
#include "server/grpc/unary_answer.h"

namespace linserve {
namespace {

// Collects an upload's chunks, counted against max_state_upload_bytes
// before each is kept, then hands the whole to the scheduler.
class UploadStream : public grpc::ServerReadReactor<v1::NamedStateChunk> {
 public:
  UploadStream(LinserveService* service, std::string tenant, v1::NamedState* response,
               StreamLimit::Ticket ticket)
      : service_(service),
        tenant_(std::move(tenant)),
        response_(response),
        ticket_(std::move(ticket)) {
    StartRead(&chunk_);
  }

  void OnReadDone(bool ok) override {
    const ServiceOptions& options = service_->options();
    if (ok) {
      if (chunk_.data().size() > static_cast<size_t>(options.max_state_chunk_bytes)) {
        return Done(absl::InvalidArgumentError(
            absl::StrCat("data is ", chunk_.data().size(), " bytes; a chunk holds at most ",
                         options.max_state_chunk_bytes)));
      }
      if (first_) {
        name_ = chunk_.name();
        first_ = false;
      } else if (!chunk_.name().empty() && chunk_.name() != name_) {
        return Done(absl::InvalidArgumentError("name differs between chunks; send it once"));
      }
      if (bytes_.size() + chunk_.data().size() >
          static_cast<size_t>(options.scheduler.max_state_upload_bytes)) {
        return Done(absl::InvalidArgumentError(
            absl::StrCat("the upload exceeds max_state_upload_bytes = ",
                         options.scheduler.max_state_upload_bytes)));
      }
      bytes_.append(chunk_.data());
      StartRead(&chunk_);
      return;
    }
    // The client closed its side: the upload is whole.
    if (first_) return Done(absl::InvalidArgumentError("no chunk: send the name and the bytes"));
    if (absl::Status valid = ValidateStateName("name", name_); !valid.ok()) return Done(valid);
    if (bytes_.empty()) return Done(absl::InvalidArgumentError("data is empty"));
    service_->scheduler()->UploadNamedState(tenant_, name_, std::move(bytes_),
                                            [this](absl::StatusOr<NamedStateInfo> info) {
                                              if (info.ok()) FillNamedState(*info, response_);
                                              Done(info.status());
                                            });
  }
  void OnDone() override { delete this; }

 private:
  void Done(const absl::Status& status) {
    const grpc::Status grpc_status = ToGrpcStatus(status);
    service_->Count("UploadNamedState", grpc_status);
    Finish(grpc_status);
  }

  LinserveService* const service_;
  const std::string tenant_;
  v1::NamedState* const response_;
  v1::NamedStateChunk chunk_;
  bool first_ = true;
  std::string name_;
  std::string bytes_;
  StreamLimit::Ticket ticket_;
};

}  // namespace

void FillNamedState(const NamedStateInfo& info, v1::NamedState* out) {
  out->set_name(info.name);
  out->set_global(info.global);
  out->set_digest(info.digest);
  out->set_state_bytes(info.state_bytes);
  out->set_position(info.position);
  out->set_created_unix_ms(info.created_unix_ms);
  out->set_source(info.source);
  out->set_prompt_tokens(info.prompt_tokens);
  out->set_prefill_ms(info.prefill_ms);
  out->set_cached_tokens(info.cached_tokens);
}

grpc::ServerUnaryReactor* LinserveService::CreateNamedState(
    grpc::CallbackServerContext* context, const v1::CreateNamedStateRequest* request,
    v1::NamedState* response) {
  Scheduler* scheduler = this->scheduler();
  if (scheduler == nullptr) return Reply(context, "CreateNamedState", NotReady());
  absl::Status valid = ValidateSessionPrompt("prompt", request->prompt(), options().limits);
  if (valid.ok()) valid = ValidateCacheSalt("cache_salt", request->cache_salt(), options().limits);
  if (!valid.ok()) return Reply(context, "CreateNamedState", valid);
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  scheduler->CreateNamedState(
      TenantOf(*context), request->name(), request->prompt(), request->cache_salt(),
      Answer<NamedStateInfo>(this, reactor, "CreateNamedState",
                             [response](const NamedStateInfo& info) {
                               FillNamedState(info, response);
                             }));
  return reactor;
}

grpc::ServerReadReactor<v1::NamedStateChunk>* LinserveService::UploadNamedState(
    grpc::CallbackServerContext* context, v1::NamedState* response) {
  if (scheduler() == nullptr) {
    const grpc::Status status = ToGrpcStatus(NotReady());
    Count("UploadNamedState", status);
    return new RefusedRead<v1::NamedStateChunk>(status);
  }
  absl::StatusOr<StreamLimit::Ticket> ticket = OpenStream(TenantOf(*context));
  if (!ticket.ok()) {
    const grpc::Status status = ToGrpcStatus(ticket.status());
    Count("UploadNamedState", status);
    return new RefusedRead<v1::NamedStateChunk>(status);
  }
  return new UploadStream(this, TenantOf(*context), response, *std::move(ticket));
}

grpc::ServerUnaryReactor* LinserveService::GetNamedState(grpc::CallbackServerContext* context,
                                                         const v1::GetNamedStateRequest* request,
                                                         v1::NamedState* response) {
  Scheduler* scheduler = this->scheduler();
  if (scheduler == nullptr) return Reply(context, "GetNamedState", NotReady());
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  scheduler->GetNamedState(TenantOf(*context), request->name(),
                           Answer<NamedStateInfo>(this, reactor, "GetNamedState",
                                                  [response](const NamedStateInfo& info) {
                                                    FillNamedState(info, response);
                                                  }));
  return reactor;
}

grpc::ServerUnaryReactor* LinserveService::ListNamedStates(
    grpc::CallbackServerContext* context, const v1::ListNamedStatesRequest*,
    v1::ListNamedStatesResponse* response) {
  Scheduler* scheduler = this->scheduler();
  if (scheduler == nullptr) return Reply(context, "ListNamedStates", NotReady());
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  scheduler->ListNamedStates(
      TenantOf(*context),
      Answer<std::vector<NamedStateInfo>>(
          this, reactor, "ListNamedStates", [response](const std::vector<NamedStateInfo>& all) {
            for (const NamedStateInfo& info : all) FillNamedState(info, response->add_states());
          }));
  return reactor;
}

grpc::ServerUnaryReactor* LinserveService::DeleteNamedState(
    grpc::CallbackServerContext* context, const v1::DeleteNamedStateRequest* request,
    v1::DeleteNamedStateResponse*) {
  Scheduler* scheduler = this->scheduler();
  if (scheduler == nullptr) return Reply(context, "DeleteNamedState", NotReady());
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  scheduler->DeleteNamedState(TenantOf(*context), request->name(),
                              Answer<bool>(this, reactor, "DeleteNamedState", [](const bool&) {}));
  return reactor;
}

}  // namespace linserve
