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
  const std::size_t w = sink.warning_count();
  out << "ok: " << printable(plan.model_name) << " on " << plan.world_size << " ranks, "
      << plan.params.size() << " params, " << plan.num_stages
      << (plan.num_stages == 1 ? " stage" : " stages");
  if (w > 0) out << " (" << w << (w == 1 ? " warning)" : " warnings)");
  out << "\n";
}

}  // namespace

ExitCode run_validate(const CommonOptions& opt, FileSystem& fs, std::ostream& out,
                      std::ostream& err) {
  const bool text = opt.diag_format == DiagFormat::Text;
  CommonOptions o = opt;
  o.input_digests = false;  // printed nowhere
  driver::SessionScope scope(o);
  driver::Session& s = *scope;
  const ExitCode code = driver::plan_or_report(o, fs, s, text ? err : out);
  const bool clean = s.sink.items().empty() && s.sink.dropped() == 0;
  if (opt.diag_format == DiagFormat::Json && clean) out << "[]\n";
  if (text && code == ExitCode::Ok) print_verdict(*s.plan, s.sink, out);
  return code;
}

}  // namespace shardc
