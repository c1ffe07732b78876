#include "server/http/http_errors.h"

namespace linserve {
namespace {

struct Kind {
  int status;
  const char* type;
};

Kind KindOf(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kOutOfRange:
      return {400, "invalid_request_error"};
    case absl::StatusCode::kUnauthenticated:
      return {401, "authentication_error"};
    case absl::StatusCode::kPermissionDenied:
      return {403, "permission_error"};
    case absl::StatusCode::kNotFound:
      return {404, "not_found_error"};
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kAborted:
    case absl::StatusCode::kAlreadyExists:
      return {409, "conflict_error"};
    case absl::StatusCode::kResourceExhausted:
      return {429, "rate_limit_error"};
    case absl::StatusCode::kUnavailable:
      return {503, "service_unavailable_error"};
    case absl::StatusCode::kDeadlineExceeded:
      return {504, "timeout_error"};
    default:
      return {500, "server_error"};
  }
}

const char* TypeOfHttpStatus(int status) {
  switch (status) {
    case 400:
      return "invalid_request_error";
    case 401:
      return "authentication_error";
    case 403:
      return "permission_error";
    case 404:
      return "not_found_error";
    case 413:
      return "request_too_large";
    case 429:
      return "rate_limit_error";
    case 503:
      return "service_unavailable_error";
    default:
      return status >= 500 ? "server_error" : "invalid_request_error";
  }
}

nlohmann::json Body(const std::string& message, const char* type, const std::string& param,
                    int status) {
  return {{"error",
           {{"message", message},
            {"type", type},
            {"param", param.empty() ? nlohmann::json(nullptr) : nlohmann::json(param)},
            {"code", status}}}};
}

}  // namespace

HttpError ToHttpError(const absl::Status& status, const std::string& param) {
  const Kind kind = KindOf(status.code());
  HttpError error;
  error.status = kind.status;
  error.body = Body(std::string(status.message()), kind.type, param, kind.status);
  // Capacity comes back within a turn's time; a restart takes longer.
  if (kind.status == 429) error.retry_after_seconds = 1;
  if (kind.status == 503) error.retry_after_seconds = 5;
  return error;
}

HttpError HttpErrorOf(int http_status, const std::string& message) {
  HttpError error;
  error.status = http_status;
  error.body = Body(message, TypeOfHttpStatus(http_status), "", http_status);
  return error;
}

std::string CodeNameOfHttpStatus(int http_status) {
  switch (http_status) {
    case 200:
      return "OK";
    case 400:
    case 413:
    case 431:
      return "INVALID_ARGUMENT";
    case 401:
      return "UNAUTHENTICATED";
    case 403:
      return "PERMISSION_DENIED";
    case 404:
      return "NOT_FOUND";
    case 409:
      return "FAILED_PRECONDITION";
    case 429:
      return "RESOURCE_EXHAUSTED";
    case 499:
      return "CANCELLED";
    case 503:
      return "UNAVAILABLE";
    case 504:
      return "DEADLINE_EXCEEDED";
    default:
      return http_status < 500 ? "INVALID_ARGUMENT" : "INTERNAL";
  }
}

}  // namespace linserve
