// `shardc cost`: communication per training step per rank (src/comm/comm.hpp)
// as a table by group role, axes and collective (MiB, min / median / max over
// ranks) or JSON, the peak rank and its terms.
#include <array>
#include <cstdio>
#include <ostream>
#include <string_view>

#include "backend/backend.hpp"
#include "comm/comm.hpp"
#include "driver/rank_option.hpp"
#include "driver/session.hpp"
#include "driver/text_format.hpp"
#include "support/utf8.hpp"

namespace shardc {
namespace {

std::string mib(std::int64_t bytes) {
  std::array<char, 32> buf{};
  std::snprintf(buf.data(), buf.size(), "%.2f", static_cast<double>(bytes) / (1024.0 * 1024.0));
  return buf.data();
}

std::string gib(std::int64_t bytes) {
  std::array<char, 32> buf{};
  std::snprintf(buf.data(), buf.size(), "%.2f",
                static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0));
  return buf.data();
}

void print_header(const Plan& plan, const CommReport& report, std::ostream& out) {
  const TrainingShape& shape = plan.training.shape;
  const CommLayout& layout = report.layout;
  out << "communication per step per rank: " << printable(plan.model_name) << " on "
      << plan.world_size << " ranks (" << driver::mesh_text(plan.dense) << "), " << plan.num_stages
      << (plan.num_stages == 1 ? " stage\n" : " stages\n");
  out << "training shape: seq_len " << shape.seq_len.value_or(0) << ", micro_batch_size "
      << shape.micro_batch_size << ", " << layout.microbatches << " micro-batches per step, tp "
      << layout.degrees.tp << (layout.degrees.sequence_parallel ? " (sequence parallel)" : "")
      << ", cp " << layout.degrees.cp << ", ep " << layout.ep << ", pp " << layout.pp
      << (layout.virtual_stages > 1 ? " x " + std::to_string(layout.virtual_stages) + " virtual"
                                    : "")
      << ", " << driver::recompute_text(shape) << "\n";
  out << "assumptions: reshard_after_forward " << (layout.reshards() ? "true" : "false")
      << (!layout.reshard_after_forward ? " (torchtitan default: not pp)"
          : std::string_view(layout.reshard_after_forward_from) == "recipe" ? " (recipe)"
                                                                            : "")
      << ", tp inputs " << (layout.tp_per_linear ? "per linear" : "fused") << ", loss_parallel "
      << (layout.loss_parallel ? "true" : "false") << ", vocab-parallel embedding/lm_head "
      << (layout.vocab_parallel ? "yes" : "no") << "\n";
  out << "bytes moved = bytes each rank SENDS per step (ring: all-gather, reduce-scatter, "
         "all-to-all (n-1)/n B; all-reduce 2(n-1)/n B; send/recv B)\n";
  if (report.ranks_per_node > 0) {
    out << "nodes: " << report.ranks_per_node << " ranks per node (node = rank / "
        << report.ranks_per_node << ")\n";
  } else {
    out << "nodes: training.ranks_per_node not given: every group is taken as one node\n";
  }
}

void print_table(const CommReport& report, std::ostream& out) {
  driver::TextTable table(
      {"role", "axes", "group", "crosses nodes", "collective", "min MiB", "median MiB", "max MiB"},
      {false, false, true, false, false, true, true, true});
  for (const CommStats& role_stats : report.stats) {
    table.add_row({comm_role_name(role_stats.role), role_stats.axes.empty() ? "-" : role_stats.axes,
                   std::to_string(role_stats.group_size), role_stats.crosses_nodes ? "yes" : "no",
                   collective_name(role_stats.collective), mib(role_stats.min),
                   mib(role_stats.median), mib(role_stats.max)});
  }
  for (std::size_t c = 0; c < kCollectives; ++c) {
    const ByteStats& collective_stats = report.per_collective[c];
    if (collective_stats.max == 0) continue;
    table.add_row({"all", "", "", "", collective_name(static_cast<Collective>(c)),
                   mib(collective_stats.min), mib(collective_stats.median),
                   mib(collective_stats.max)});
  }
  table.add_row({"total", "", "", "", "", mib(report.total.min), mib(report.total.median),
                 mib(report.total.max)});
  out << table.render();
}

void print_terms(const StageComm& comm, bool explain, std::ostream& out) {
  for (const CommTerm& term : comm.terms) {
    out << "  " << term.name << " (" << comm_role_name(term.role) << ", "
        << collective_name(term.collective) << ", group " << term.group_size
        << (term.crosses_nodes ? ", crosses nodes" : "") << "): " << mib(term.bytes) << " MiB";
    if (explain)
      out << " = " << term.bytes << " bytes = " << term.formula << " (" << term.source << ")";
    out << "\n";
  }
}

const CommClass& class_of(const CommReport& report, std::int64_t rank) {
  for (const CommClass& comm_class : report.classes)
    if (comm_class.ranks.contains(rank)) return comm_class;
  return report.classes.front();
}

}  // namespace

ExitCode run_cost(const CostOptions& opt, FileSystem& fs, std::ostream& out, std::ostream& err) {
  driver::SessionScope scope(opt.common);
  driver::Session& session = *scope;
  const ExitCode code = driver::plan_or_report(opt.common, fs, session, err);
  if (!session.plan || code == ExitCode::Usage) return code;
  const Plan& plan = *session.plan;
  std::vector<std::int64_t> ranks;
  if (opt.ranks) {
    const auto parsed =
        driver::parse_ranks_option(*opt.ranks, plan.world_size, opt.common.diag_format, err);
    if (!parsed) return ExitCode::Usage;
    ranks = *parsed;
  }
  CommOptions options;
  options.reshard_after_forward = opt.reshard_after_forward;
  options.tp_inputs =
      opt.tp_per_linear ? CommOptions::TpInputs::PerLinear : CommOptions::TpInputs::Fused;
  options.loss_parallel = opt.loss_parallel;
  const CommReport report = plan_communication(plan, options);
  if (!report.counted) {
    // The command cannot answer without the training shape: an input error, exit 2.
    session.sink = DiagnosticSink{};
    const TrainingLayout& tl = plan.training_layout;
    if (tl.active && !tl.arch) {
      // The model lacks a size: its `attributes:` is where the fix goes.
      session.sink.error(DiagCode::ETraining, tl.arch_missing_loc,
                         "`shardc cost` cannot count communication: " + report.note,
                         "add `" + tl.arch_missing +
                             ": N` to the model's `attributes:` (the value of config.json or "
                             "of the model's own config); docs/communication.md");
    } else {
      session.sink.error(DiagCode::ETraining, plan.training.loc,
                         "`shardc cost` cannot count communication: " + report.note,
                         tl.active ? "docs/limits.md lists the per-rank report limit"
                                   : "give the recipe a `training:` section with `seq_len`; "
                                     "docs/communication.md");
    }
    driver::print_diagnostics(opt.common, session, err);
    return ExitCode::Usage;
  }
  if (opt.format == MemoryFormat::Json) {
    out << render_cost_json(plan, report);
    return code;
  }
  print_header(plan, report, out);
  out << "\n";
  print_table(report, out);
  out << "\n";
  const std::int64_t first = report.peak_ranks.first();
  out << "peak: " << gib(report.peak) << " GiB sent per step on rank(s) "
      << report.peak_ranks.to_string() << "; rank " << first << ": stage "
      << plan.stage_of_rank(first) << ", " << rank_coords_text(plan, first) << "\n";
  print_terms(class_of(report, first).comm, opt.explain, out);
  for (std::int64_t rank : ranks) {
    const CommClass& comm_class = class_of(report, rank);
    out << "rank " << rank << " (stage " << comm_class.comm.stage << ", "
        << rank_coords_text(plan, rank) << "): " << gib(comm_class.comm.bytes) << " GiB ("
        << comm_class.comm.bytes << " bytes)\n";
    print_terms(comm_class.comm, opt.explain, out);
  }
  out << "not counted: the optimizer's gradient-norm all-reduce, MoE token-count exchanges, "
         "the loss's data-parallel mean, NCCL protocol overhead\n";
  return code;
}

}  // namespace shardc
