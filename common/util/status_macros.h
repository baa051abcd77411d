// TESSERA_ASSIGN_OR_RETURN(lhs, expr): evaluates `expr` (an absl::StatusOr<T>); on error returns
// its status from the enclosing function, otherwise assigns the value to `lhs` (an existing
// variable or member). Keeps loaders that bind many fields one line per field.
// TESSERA_RETURN_IF_ERROR(expr): evaluates `expr` (an absl::Status) and returns it when not OK.
#pragma once

#include <utility>

#define TESSERA_STATUS_CONCAT_INNER(a, b) a##b
#define TESSERA_STATUS_CONCAT(a, b) TESSERA_STATUS_CONCAT_INNER(a, b)

#define TESSERA_ASSIGN_OR_RETURN(lhs, expr)                                              \
  TESSERA_ASSIGN_OR_RETURN_IMPL(TESSERA_STATUS_CONCAT(tessera_status_or_, __LINE__), lhs, \
                                expr)

#define TESSERA_ASSIGN_OR_RETURN_IMPL(status_or, lhs, expr) \
  auto status_or = (expr);                                  \
  if (!status_or.ok()) return status_or.status();           \
  lhs = std::move(*status_or)

#define TESSERA_RETURN_IF_ERROR(expr)                                           \
  do {                                                                          \
    if (const ::absl::Status tessera_status_ = (expr); !tessera_status_.ok()) { \
      return tessera_status_;                                                   \
    }                                                                           \
  } while (false)
