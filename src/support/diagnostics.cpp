// DiagnosticSink: collects diagnostics with a storage cap (SPEC §5.7).
#include "shardc/diagnostics.hpp"

#include <algorithm>
#include <utility>

namespace shardc {

const char* severity_name(Severity s) {
  switch (s) {
    case Severity::Error:
      return "error";
    case Severity::Warning:
      return "warning";
    case Severity::Note:
      return "note";
  }
  return "error";
}

void DiagnosticSink::report(Diagnostic d) {
  // Every diagnostic has a hint (README "Diagnostics"): a pass that has no
  // better advice points at the table that explains the code.
  if (d.hint.empty()) d.hint = "see " + d.code + " in the Diagnostics table of README.md";
  if (d.severity == Severity::Error) ++errors_;
  if (d.severity == Severity::Warning) ++warnings_;
  if (items_.size() < limit_) {
    items_.push_back(std::move(d));
    return;
  }
  ++dropped_;
  if (std::find(dropped_codes_.begin(), dropped_codes_.end(), d.code) == dropped_codes_.end()) {
    dropped_codes_.push_back(std::move(d.code));
  }
}

void DiagnosticSink::error(std::string code, SourceLoc loc, std::string message, std::string hint) {
  Diagnostic d;
  d.severity = Severity::Error;
  d.code = std::move(code);
  d.loc = std::move(loc);
  d.message = std::move(message);
  d.hint = std::move(hint);
  report(std::move(d));
}

void DiagnosticSink::warning(std::string code, SourceLoc loc, std::string message,
                             std::string hint) {
  Diagnostic d;
  d.severity = Severity::Warning;
  d.code = std::move(code);
  d.loc = std::move(loc);
  d.message = std::move(message);
  d.hint = std::move(hint);
  report(std::move(d));
}

bool DiagnosticSink::has_code(const std::string& code) const {
  auto same = [&](const Diagnostic& d) { return d.code == code; };
  if (std::any_of(items_.begin(), items_.end(), same)) return true;
  return std::find(dropped_codes_.begin(), dropped_codes_.end(), code) != dropped_codes_.end();
}

}  // namespace shardc
