// ExportSession and ImportSession: a session's state file streamed in chunks.

#include <algorithm>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/grpc/generate_stream.h"
#include "server/grpc/service.h"
#include "server/grpc/unary_answer.h"
#include "server/store/state_file.h"

namespace linserve {
namespace {

// Streams one state file in chunks of at most max_state_chunk_bytes.
class ExportStream : public grpc::ServerWriteReactor<v1::StateChunk> {
 public:
  ExportStream(LinserveService* service) : service_(service) {}

  // Called once, from the scheduler's thread, with the file or the error.
  void Begin(absl::StatusOr<std::string> file) {
    if (!file.ok()) return Done(ToGrpcStatus(file.status()));
    file_ = *std::move(file);
    WriteNext();
  }

  void OnWriteDone(bool ok) override {
    if (!ok) return Done(grpc::Status(grpc::StatusCode::CANCELLED, "the client went away"));
    WriteNext();
  }
  void OnDone() override { delete this; }
  void Hold(StreamLimit::Ticket ticket) { ticket_ = std::move(ticket); }

 private:
  void WriteNext() {
    if (offset_ >= file_.size()) return Done(grpc::Status::OK);
    const size_t n = std::min<size_t>(service_->options().max_state_chunk_bytes,
                                      file_.size() - offset_);
    chunk_.set_data(file_.substr(offset_, n));
    offset_ += n;
    StartWrite(&chunk_);
  }
  void Done(const grpc::Status& status) {
    service_->Count("ExportSession", status);
    Finish(status);
  }

  LinserveService* const service_;
  std::string file_;
  size_t offset_ = 0;
  v1::StateChunk chunk_;
  StreamLimit::Ticket ticket_;
};

// Room for the file of a session of the served model: its state and a
// header, within the bound on a file.
size_t ExpectedFileBytes(const LinserveService& service) {
  constexpr int64_t kHeaderRoom = 4096;
  const int64_t state = service.scheduler()->model_facts().state_bytes_per_session;
  return static_cast<size_t>(std::min(state + kHeaderRoom, service.options().scheduler.max_state_bytes));
}

// Collects the chunks, checks the whole file, then hands it to the scheduler.
class ImportStream : public grpc::ServerReadReactor<v1::StateChunk> {
 public:
  ImportStream(LinserveService* service, std::string tenant, v1::Session* response,
               StreamLimit::Ticket ticket)
      : service_(service),
        tenant_(std::move(tenant)),
        response_(response),
        file_(ExpectedFileBytes(*service)),
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
      if (file_.size() + chunk_.data().size() >
          static_cast<size_t>(options.scheduler.max_state_bytes)) {
        return Done(absl::ResourceExhaustedError(
            absl::StrCat("the state file exceeds max_state_bytes = ",
                         options.scheduler.max_state_bytes)));
      }
      file_.Append(chunk_.data());  // checksummed now, while the next chunk travels
      StartRead(&chunk_);
      return;
    }
    // The client closed its side: the file is whole.
    Scheduler* scheduler = service_->scheduler();
    absl::StatusOr<SessionRecord> record =
        file_.Decode(options.scheduler.max_state_bytes, scheduler->model_facts().fingerprint);
    if (!record.ok()) return Done(record.status());
    scheduler->ImportSession(tenant_, *std::move(record),
                             [this](absl::StatusOr<SessionInfo> info) {
                               if (info.ok()) FillSession(*info, response_);
                               Done(info.status());
                             });
  }
  void OnDone() override { delete this; }

 private:
  void Done(const absl::Status& status) {
    const grpc::Status grpc_status = ToGrpcStatus(status);
    service_->Count("ImportSession", grpc_status);
    Finish(grpc_status);
  }

  LinserveService* const service_;
  const std::string tenant_;
  v1::Session* const response_;
  v1::StateChunk chunk_;
  StateFileAssembler file_;
  StreamLimit::Ticket ticket_;
};

}  // namespace

grpc::ServerWriteReactor<v1::StateChunk>* LinserveService::ExportSession(
    grpc::CallbackServerContext* context, const v1::ExportSessionRequest* request) {
  auto* stream = new ExportStream(this);
  absl::StatusOr<StreamLimit::Ticket> ticket = OpenStream(TenantOf(*context));
  if (!ticket.ok()) {
    stream->Begin(ticket.status());
    return stream;
  }
  stream->Hold(*std::move(ticket));
  Scheduler* scheduler = this->scheduler();
  if (scheduler == nullptr) {
    stream->Begin(absl::UnavailableError("the model is still loading; retry shortly"));
    return stream;
  }
  absl::Status valid = ValidateSessionId("session_id", request->session_id());
  if (!valid.ok()) {
    stream->Begin(valid);
    return stream;
  }
  scheduler->ExportSession(TenantOf(*context), request->session_id(),
                           [stream](absl::StatusOr<std::string> file) {
                             stream->Begin(std::move(file));
                           });
  return stream;
}

grpc::ServerReadReactor<v1::StateChunk>* LinserveService::ImportSession(
    grpc::CallbackServerContext* context, v1::Session* response) {
  if (scheduler() == nullptr) {
    const grpc::Status status(grpc::StatusCode::UNAVAILABLE, "the model is still loading");
    Count("ImportSession", status);
    return new RefusedRead<v1::StateChunk>(status);
  }
  absl::StatusOr<StreamLimit::Ticket> ticket = OpenStream(TenantOf(*context));
  if (!ticket.ok()) {
    const grpc::Status status = ToGrpcStatus(ticket.status());
    Count("ImportSession", status);
    return new RefusedRead<v1::StateChunk>(status);
  }
  return new ImportStream(this, TenantOf(*context), response, *std::move(ticket));
}

}  // namespace linserve
