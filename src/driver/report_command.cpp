// `shardc report`: plans MODEL RECIPE (or loads and plans a reshard, as `shardc reshard`
// does) and writes one self-contained HTML page (src/report/report.hpp) from the same
// plan, memory classes, buffers and reshard result the JSON outputs are rendered from.
#include <algorithm>
#include <ostream>
#include <sstream>

#include "driver/inspect_buffers.hpp"
#include "driver/rank_option.hpp"
#include "driver/reshard_inputs.hpp"
#include "driver/session.hpp"
#include "driver/text_format.hpp"
#include "report/report.hpp"

namespace shardc {
namespace {

using driver::print_error;

ExitCode write_page(const std::string& path, const std::string& page, FileSystem& fs,
                    std::ostream& out, std::ostream& err) {
  std::string error;
  if (!fs.write_atomic(path, page, error)) {
    print_error(err, "cannot write '" + path + "': " + error);
    return ExitCode::Usage;
  }
  out << "report: wrote " << path << " ("
      << binary_bytes_text(static_cast<std::int64_t>(page.size())) << ")\n";
  return ExitCode::Ok;
}

// The ranks whose details the page embeds: --ranks, else the peak rank and each stage's
// first rank (rank 0 without memory classes).
std::optional<std::vector<std::int64_t>> detail_ranks(const ReportOptions& opt, const Plan& plan,
                                                      const MemoryReport* memory,
                                                      std::ostream& err) {
  if (opt.ranks) {
    auto ranks = driver::parse_ranks_option(*opt.ranks, plan.world_size, err);
    if (ranks && ranks->size() > kMaxDetailRanks) {
      print_error(err, "--ranks '" + *opt.ranks + "': " + std::to_string(ranks->size()) +
                           " ranks; a page embeds the params tables of at most " +
                           std::to_string(kMaxDetailRanks) +
                           " (the memory of every rank is in it)");
      return std::nullopt;
    }
    return ranks;
  }
  if (!memory) return std::vector<std::int64_t>{0};
  std::vector<std::int64_t> ranks{memory->peak_ranks.first()};
  std::vector<std::int64_t> first(static_cast<std::size_t>(plan.num_stages), -1);
  for (const MemoryClass& c : memory->classes) {
    std::int64_t& f = first[static_cast<std::size_t>(c.stage)];
    if (f < 0 || c.ranks.first() < f) f = c.ranks.first();
  }
  for (std::int64_t f : first) {
    if (f >= 0 && std::find(ranks.begin(), ranks.end(), f) == ranks.end()) ranks.push_back(f);
  }
  if (ranks.size() > kMaxDetailRanks) ranks.resize(kMaxDetailRanks);
  return ranks;
}

ExitCode run_reshard_report(const ReportOptions& opt, FileSystem& fs, std::ostream& out,
                            std::ostream& err) {
  ReshardOptions ro;
  ro.inputs = opt.inputs;
  ro.ranks_per_node = opt.ranks_per_node;
  ro.diag_format = opt.common.diag_format;
  driver::Session session;
  const driver::PlannedReshard planned =
      driver::plan_reshard_inputs(ro, "report --reshard", fs, session, out, err);
  if (planned.code != ExitCode::Ok) return planned.code;
  ReshardReportInput in;
  in.a = &*planned.from;
  in.b = &*planned.to;
  in.result = &*planned.result;
  in.options = reshard::Options{opt.ranks_per_node};
  return write_page(opt.out_file, render_reshard_report_html(in), fs, out, err);
}

}  // namespace

ExitCode run_report(const ReportOptions& opt, FileSystem& fs, std::ostream& out,
                    std::ostream& err) {
  if (opt.reshard) return run_reshard_report(opt, fs, out, err);
  if (opt.inputs.size() != 2) {
    print_error(err, "report takes MODEL RECIPE (or --reshard PLAN_A PLAN_B); got " +
                         std::to_string(opt.inputs.size()) + " inputs");
    return ExitCode::Usage;
  }
  CommonOptions common = opt.common;
  common.model_path = opt.inputs[0];
  common.recipe_path = opt.inputs[1];
  common.check_budget = true;
  common.memory_report = true;
  driver::SessionScope scope(common);
  driver::Session& s = *scope;
  const ExitCode code =
      driver::plan_or_report(common, fs, s, common.diag_format == DiagFormat::Text ? err : out);
  PlanReportInput in;
  in.title = common.model_path + " + " + common.recipe_path;
  in.diagnostics = &s.sink;
  in.sources = &s.sources;
  if (s.plan) {
    in.plan = &*s.plan;
    in.memory = s.memory ? &*s.memory : nullptr;
    in.budget = s.budget;
    const auto ranks = detail_ranks(opt, *s.plan, in.memory, err);
    if (!ranks) return ExitCode::Usage;
    for (std::int64_t r : *ranks) {
      std::ostringstream buffers;
      driver::print_rank_buffers(*s.plan, r, buffers);
      std::string text = buffers.str();
      constexpr std::string_view kHeading = "\nbuffers:\n";  // the page has its own heading
      if (text.starts_with(kHeading)) text.erase(0, kHeading.size());
      in.ranks.push_back({r, std::move(text)});
    }
  } else if (s.sink.items().empty()) {
    return code;  // nothing to show (an unreadable input: its error is printed)
  }
  const ExitCode written = write_page(opt.out_file, render_plan_report_html(in), fs, out, err);
  return written != ExitCode::Ok ? written : code;
}

}  // namespace shardc
