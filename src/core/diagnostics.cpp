// DiagnosticSink: collects diagnostics with a storage cap (contract §5.7).
#include "core/diagnostics.hpp"

#include "support/print_error.hpp"

#include <algorithm>
#include <string>
#include <utility>

namespace shardc {

const char* severity_name(Severity severity) {
  switch (severity) {
    case Severity::Error:
      return "error";
    case Severity::Warning:
      return "warning";
    case Severity::Note:
      return "note";
  }
  return "error";
}

void DiagnosticSink::report(Diagnostic diag) {
  // Every diagnostic has a hint (docs/diagnostics.md): a pass that has no
  // better advice points at the table that explains the code.
  if (diag.hint.empty()) {
    diag.hint = "see " + std::string(code_name(diag.code)) + " in docs/diagnostics.md";
  }
  if (diag.severity == Severity::Error) ++errors_;
  if (diag.severity == Severity::Warning) ++warnings_;
  if (items_.size() < limit_) {
    items_.push_back(std::move(diag));
    return;
  }
  ++dropped_;
  auto remember = [&](std::vector<DiagCode>& codes) {
    if (std::find(codes.begin(), codes.end(), diag.code) == codes.end()) codes.push_back(diag.code);
  };
  remember(dropped_codes_);
  if (diag.severity == Severity::Error) remember(dropped_error_codes_);
}

namespace {

Diagnostic diagnostic(Severity severity, DiagCode code, SourceLoc loc, std::string message,
                      std::string hint) {
  Diagnostic made;
  made.severity = severity;
  made.code = code;
  made.loc = std::move(loc);
  made.message = std::move(message);
  made.hint = std::move(hint);
  return made;
}

}  // namespace

void DiagnosticSink::error(DiagCode code, SourceLoc loc, std::string message, std::string hint) {
  report(diagnostic(Severity::Error, code, std::move(loc), std::move(message), std::move(hint)));
}

void DiagnosticSink::warning(DiagCode code, SourceLoc loc, std::string message, std::string hint) {
  report(diagnostic(Severity::Warning, code, std::move(loc), std::move(message), std::move(hint)));
}

bool DiagnosticSink::has_code(DiagCode code) const {
  auto same = [&](const Diagnostic& diag) { return diag.code == code; };
  if (std::any_of(items_.begin(), items_.end(), same)) return true;
  return std::find(dropped_codes_.begin(), dropped_codes_.end(), code) != dropped_codes_.end();
}

ExitCode DiagnosticSink::error_exit() const {
  if (errors_ == 0) return ExitCode::Ok;
  ExitCode worst = ExitCode::Invalid;
  auto consider = [&](DiagCode code) {
    const ExitCode exit_code = diag_code_info(code).exit;
    if (static_cast<int>(exit_code) > static_cast<int>(worst)) worst = exit_code;
  };
  for (const Diagnostic& diag : items_) {
    if (diag.severity == Severity::Error) consider(diag.code);
  }
  for (DiagCode code : dropped_error_codes_) consider(code);
  return worst;
}

void print_error(std::ostream& err, DiagCode code, const std::string& message) {
  print_error(err, code_name(code), message);
}

}  // namespace shardc
