#ifndef LINSERVE_ENGINE_STATUS_MACROS_H_
#define LINSERVE_ENGINE_STATUS_MACROS_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"

// Returns from the enclosing function when `expr` (an absl::Status) is not OK.
#define LINSERVE_RETURN_IF_ERROR(expr)            \
  do {                                            \
    const ::absl::Status linserve_status_ = (expr); \
    if (!linserve_status_.ok()) return linserve_status_; \
  } while (0)

#define LINSERVE_CONCAT_INNER_(a, b) a##b
#define LINSERVE_CONCAT_(a, b) LINSERVE_CONCAT_INNER_(a, b)

// `LINSERVE_ASSIGN_OR_RETURN(auto x, StatusOrExpr());` assigns the value or
// returns the error.
#define LINSERVE_ASSIGN_OR_RETURN(lhs, expr) \
  LINSERVE_ASSIGN_OR_RETURN_IMPL_(LINSERVE_CONCAT_(linserve_statusor_, __LINE__), lhs, expr)
#define LINSERVE_ASSIGN_OR_RETURN_IMPL_(statusor, lhs, expr) \
  auto statusor = (expr);                                    \
  if (!statusor.ok()) return statusor.status();              \
  lhs = std::move(statusor).value()

#endif  // LINSERVE_ENGINE_STATUS_MACROS_H_
