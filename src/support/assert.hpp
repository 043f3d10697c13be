// Internal invariants that stay checked in release builds (as ccache's
// ASSERT). Never used for user errors: bad input is a Diagnostic.
//
// A failed SHARDC_ASSERT throws shardc::InternalError; the CLI catches it at
// its one boundary (src/cli/main.cpp), prints
//   shardc: internal error: src/planner/x.cpp:42: <condition>: <message>
// with a request to report it, and exits with ExitCode::Internal (3).
#pragma once

#include <stdexcept>
#include <string>

namespace shardc {

/// A broken internal invariant: a shardc bug, not a problem of the input.
class InternalError : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

/// Throws InternalError("file:line: condition: message"). Out of line so
/// the check costs one branch at its call site.
[[noreturn]] void assertion_failed(const char* file, int line, const char* condition,
                                   const std::string& message);

}  // namespace shardc

/// Checks `cond` in every build type; on failure throws InternalError with
/// the file, line, the condition's text and `msg` (anything convertible to
/// std::string; evaluated only on failure).
#define SHARDC_ASSERT(cond, msg)                                               \
  do {                                                                         \
    if (!(cond)) ::shardc::assertion_failed(__FILE__, __LINE__, #cond, (msg)); \
  } while (false)
