// Diagnostics: the product's error and warning values (contract §5.7).
//
// A Diagnostic is a value, never an exception: every pass appends to a
// DiagnosticSink and keeps going where it cheaply can, so one `validate` run
// reports every problem. Codes are the typed `DiagCode` table
// (shardc/diag_code.hpp); docs/diagnostics.md is generated from it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <iosfwd>
#include <string>
#include <string_view>
#include <vector>

#include "core/diag_code.hpp"
#include "support/limits.hpp"

namespace shardc {

/// A file path as locations hold it: interned, so copying a SourceLoc
/// copies a pointer, not a string (a model's 45,000 params each carry one).
/// Equal paths share one interned text, which lives until the process exits
/// (a few per run; the table only grows). Converts from and to std::string.
class SourcePath {
 public:
  SourcePath() = default;  ///< the empty path
  // Implicit, so `SourceLoc{path, line, column}` takes a std::string.
  SourcePath(std::string_view path);   // NOLINT(google-explicit-constructor)
  SourcePath(const std::string& path)  // NOLINT(google-explicit-constructor)
      : SourcePath(std::string_view(path)) {}
  SourcePath(const char* path)  // NOLINT(google-explicit-constructor)
      : SourcePath(std::string_view(path)) {}

  /// The path text (empty for the empty path).
  [[nodiscard]] const std::string& str() const;
  operator const std::string&() const { return str(); }  // NOLINT
  [[nodiscard]] bool empty() const { return str().empty(); }
  /// Interned: equal texts are the same pointer.
  friend bool operator==(const SourcePath& a, const SourcePath& b) { return a.text_ == b.text_; }

 private:
  const std::string* text_ = nullptr;  ///< null: the empty path
};

/// Where an input node came from. `line` and `column` are 1-based (yaml-cpp
/// marks are 0-based: the front end adds 1). 0 means "unknown / whole file".
struct SourceLoc {
  SourcePath file;
  int line = 0;
  int column = 0;
};

/// Lower-case word used in every output format: "error", "warning", "note".
const char* severity_name(Severity severity);

/// One problem found in the input. `param` and `rule` are optional context
/// (an FQN, a rule's `match` text) that `--format json` reports as fields.
struct Diagnostic {
  Severity severity = Severity::Error;
  DiagCode code = DiagCode::EModel;  ///< its row in the code table; code_name() gives "E-HEADS"
  std::string message;               ///< one line, no trailing period needed
  std::string hint;                  ///< how to fix it; may be empty
  SourceLoc loc;
  std::string param;
  std::string rule;
  /// Extra structured data (e.g. W-EXPERTS expert ranges as [[start, stop), ...]).
  std::vector<std::pair<std::int64_t, std::int64_t>> ranges;
};

/// Collects diagnostics from every pass. Stores at most `limit` of them and
/// counts the rest (hostile input can produce millions); error and warning
/// counts stay exact.
class DiagnosticSink {
 public:
  explicit DiagnosticSink(std::size_t limit = limits::kMaxStoredDiagnostics) : limit_(limit) {}

  void report(Diagnostic diag);
  /// Reports an error / warning: code first, then where, what, how to fix
  /// (the one argument order every emitter uses).
  void error(DiagCode code, SourceLoc loc, std::string message, std::string hint = {});
  void warning(DiagCode code, SourceLoc loc, std::string message, std::string hint = {});

  [[nodiscard]] bool has_errors() const { return errors_ > 0; }
  [[nodiscard]] std::size_t error_count() const { return errors_; }
  [[nodiscard]] std::size_t warning_count() const { return warnings_; }
  /// Diagnostics dropped because `limit` was reached.
  [[nodiscard]] std::size_t dropped() const { return dropped_; }
  [[nodiscard]] const std::vector<Diagnostic>& items() const { return items_; }
  /// True when at least one stored or dropped diagnostic has this code.
  [[nodiscard]] bool has_code(DiagCode code) const;
  /// The exit class the stored and dropped errors call for: the largest of
  /// their codes' `exit` (Usage over Invalid); Ok when there is no error.
  [[nodiscard]] ExitCode error_exit() const;

 private:
  std::size_t limit_;
  std::size_t errors_ = 0;
  std::size_t warnings_ = 0;
  std::size_t dropped_ = 0;
  std::vector<Diagnostic> items_;
  std::vector<DiagCode> dropped_error_codes_;  ///< codes of dropped errors
  std::vector<DiagCode> dropped_codes_;
};

/// Prints "shardc: error[CODE]: <message>" for an I/O or usage problem that is not an
/// input diagnostic (support/print_error.hpp, with `code`'s stable name).
void print_error(std::ostream& err, DiagCode code, const std::string& message);

}  // namespace shardc
