// `shardc validate`: every diagnostic, no output files.
//
// Text diagnostics go to `err` (stdout gets a one-line verdict); JSON and
// GitHub diagnostics are the command's data, so they go to `out` where CI
// captures them (JSON always prints an array, `[]` when clean).
#include <ostream>

#include "driver/session.hpp"
#include "support/utf8.hpp"

namespace shardc {
namespace {

void print_verdict(const Plan& plan, const DiagnosticSink& sink, std::ostream& out) {
  const std::size_t warnings = sink.warning_count();
  out << "ok: " << printable(plan.model_name) << " on " << plan.world_size << " ranks, "
      << plan.params.size() << " params, " << plan.num_stages
      << (plan.num_stages == 1 ? " stage" : " stages");
  if (warnings > 0) out << " (" << warnings << (warnings == 1 ? " warning)" : " warnings)");
  out << "\n";
}

}  // namespace

ExitCode run_validate(const CommonOptions& opt, FileSystem& fs, std::ostream& out,
                      std::ostream& err) {
  const bool text = opt.diag_format == DiagFormat::Text;
  CommonOptions options = opt;
  options.input_digests = false;  // printed nowhere
  driver::SessionScope scope(options);
  driver::Session& session = *scope;
  const ExitCode code = driver::plan_or_report(options, fs, session, text ? err : out);
  const bool clean = session.sink.items().empty() && session.sink.dropped() == 0;
  if (opt.diag_format == DiagFormat::Json && clean) out << "[]\n";
  if (text && code == ExitCode::Ok) print_verdict(*session.plan, session.sink, out);
  return code;
}

}  // namespace shardc
