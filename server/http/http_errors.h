#ifndef LINSERVE_SERVER_HTTP_ERRORS_H_
#define LINSERVE_SERVER_HTTP_ERRORS_H_

// The HTTP API's errors: a status from the shared request path becomes an
// HTTP status and OpenAI's error body,
//   {"error": {"message": ..., "type": ..., "param": ..., "code": <status>}}.
//
//   INVALID_ARGUMENT    400 invalid_request_error (param: the field)
//   UNAUTHENTICATED     401 authentication_error
//   PERMISSION_DENIED   403 permission_error
//   NOT_FOUND           404 not_found_error
//   FAILED_PRECONDITION 409 conflict_error (a busy session)
//   ABORTED             409 conflict_error (another replica holds the session)
//   ALREADY_EXISTS      409 conflict_error (a named state's name is taken)
//   RESOURCE_EXHAUSTED  429 rate_limit_error, with Retry-After
//   UNAVAILABLE         503 service_unavailable_error, with Retry-After
//   DEADLINE_EXCEEDED   504 timeout_error
//   anything else       500 server_error

#include <nlohmann/json.hpp>
#include <string>

#include "absl/status/status.h"

namespace linserve {

struct HttpError {
  int status = 500;
  nlohmann::json body;
  int retry_after_seconds = 0;  // > 0: send Retry-After
};

HttpError ToHttpError(const absl::Status& status, const std::string& param = "");

// An error of an HTTP status that has no status code behind it (413, 404 of
// an unknown path, ...).
HttpError HttpErrorOf(int http_status, const std::string& message);

// The canonical status code name a finished HTTP request is counted under in
// linserve_requests_total (the same names as gRPC's).
std::string CodeNameOfHttpStatus(int http_status);

}  // namespace linserve

#endif  // LINSERVE_SERVER_HTTP_ERRORS_H_
