// `shardc reshard PLAN_A PLAN_B`: loads two plans (OUTDIRs, plan.json files
// or MODEL RECIPE pairs), plans the transfers per shard class, prints a
// summary and/or writes the per-rank JSON listing.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <ostream>
#include "driver/reshard_inputs.hpp"

#include "backend/backend.hpp"
#include "driver/out_dir.hpp"
#include "driver/rank_option.hpp"
#include "driver/session.hpp"
#include "driver/text_format.hpp"
#include "outputs/readback.hpp"
#include "reshard/reshard.hpp"
#include "support/limits.hpp"
#include "verify/verify.hpp"

namespace shardc {
namespace driver {

/// Largest plan.json read (4 GiB, as `verify`).
using limits::kMaxPlanBytes;

std::optional<reshard::Layout> load_plan_input(const std::string& input, FileSystem& fs,
                                               driver::Session& rs, std::ostream& err) {
  const bool out_dir = fs.list_dir(input).has_value();
  const std::string path = out_dir ? driver::path_join(input, "plan.json") : input;
  // An OUTDIR must hold a complete compile (manifest.json) with plan.json unchanged. So must
  // the directory of a plan.json named directly when it is one (a manifest.json or a ranks/
  // folder beside it): the same compiled plan, named another way, is checked the same way.
  // A plan.json alone (copied out of its OUTDIR) is read as it is.
  std::string commit_dir = out_dir ? input : std::string();
  if (!out_dir) {
    const std::size_t slash = input.rfind('/');
    const std::string name = slash == std::string::npos ? input : input.substr(slash + 1);
    const std::string dir = slash == std::string::npos ? "."
                            : slash == 0               ? "/"
                                                       : input.substr(0, slash);
    if (name == "plan.json") {
      const auto entries = fs.list_dir(dir);
      const auto has = [&entries](const char* entry) {
        return entries && std::find(entries->begin(), entries->end(), entry) != entries->end();
      };
      if (has("manifest.json") || has("ranks")) commit_dir = dir;
    }
  }
  std::optional<readback::ManifestFile> manifest;
  if (!commit_dir.empty() && !(manifest = verify::load_commit(commit_dir, fs, err)))
    return std::nullopt;
  std::string error;
  auto text = fs.read(path, kMaxPlanBytes, error);
  if (!text) {
    print_error(err, DiagCode::EPlanFile, "cannot read '" + path + "': " + error);
    return std::nullopt;
  }
  if (manifest) {
    if (const std::string change = verify::digest_change(manifest->plan, *text); !change.empty()) {
      print_error(err, DiagCode::EPlanFile, "'" + input + "': " + change + "; rerun compile");
      return std::nullopt;
    }
  }
  const auto plan = readback::parse_plan_file(*text, error);
  if (!plan) {
    print_error(err, DiagCode::EPlanFile, "'" + path + "' is not a shardc plan: " + error);
    return std::nullopt;
  }
  auto layout = reshard::layout_from_plan_file(*plan, path, *text, rs.sink);
  rs.sources[path] = std::move(*text);
  return layout;
}

namespace {

// What planning an input pair reads and writes: the command's options, files, session and
// streams.
struct PairContext {
  const ReshardOptions& opt;
  FileSystem& fs;
  driver::Session& session;
  std::ostream& out;
  std::ostream& err;
};

// Plans MODEL RECIPE (`opt.inputs[at]`, `[at + 1]`) in memory; prints its diagnostics when it
// fails (`code` then says how).
std::optional<reshard::Layout> load_pair(const PairContext& cx, std::size_t at, ExitCode& code) {
  const ReshardOptions& opt = cx.opt;
  FileSystem& fs = cx.fs;
  driver::Session& session = cx.session;
  std::ostream& out = cx.out;
  std::ostream& err = cx.err;
  CommonOptions common;
  common.model_path = opt.inputs[at];
  common.recipe_path = opt.inputs[at + 1];
  common.diag_format = opt.diag_format;
  driver::Session pair_session;
  code = driver::plan_or_report(common, fs, pair_session,
                                opt.diag_format == DiagFormat::Text ? err : out);
  if (code != ExitCode::Ok) return std::nullopt;
  // for source excerpts of E-RESHARD-* at model entries
  session.sources.merge(pair_session.sources);
  return reshard::layout_from_plan(*pair_session.plan,
                                   common.model_path + " + " + common.recipe_path);
}

}  // namespace

PlannedReshard plan_reshard_inputs(const ReshardOptions& opt, const std::string& command,
                                   FileSystem& fs, Session& session, std::ostream& out,
                                   std::ostream& err) {
  PlannedReshard planned;
  if (opt.inputs.size() != 2 && opt.inputs.size() != 4) {
    print_error(err, DiagCode::EUsage,
                command +
                    " takes PLAN_A PLAN_B (OUTDIRs or plan.json files) or "
                    "MODEL_A RECIPE_A MODEL_B RECIPE_B; got " +
                    std::to_string(opt.inputs.size()) + " inputs");
    planned.code = ExitCode::Usage;
    return planned;
  }
  if (opt.inputs.size() == 2) {
    planned.from = load_plan_input(opt.inputs[0], fs, session, err);
    if (planned.from) planned.to = load_plan_input(opt.inputs[1], fs, session, err);
  } else {
    ExitCode code = ExitCode::Ok;
    const PairContext cx{opt, fs, session, out, err};
    planned.from = load_pair(cx, 0, code);
    if (planned.from) planned.to = load_pair(cx, 2, code);
    if (!planned.to) {
      planned.code = code;
      return planned;
    }
  }
  if (!planned.from || !planned.to) {
    planned.code = ExitCode::Usage;
    return planned;
  }
  CommonOptions diag;
  diag.diag_format = opt.diag_format;
  std::ostream& diag_out = opt.diag_format == DiagFormat::Text ? err : out;
  if (session.sink.has_errors()) {
    print_diagnostics(diag, session, diag_out);
    planned.code = ExitCode::Usage;
    return planned;
  }
  planned.result = reshard::plan_reshard(*planned.from, *planned.to,
                                         reshard::Options{opt.ranks_per_node}, session.sink);
  if (session.sink.has_errors()) {
    print_diagnostics(diag, session, diag_out);
    planned.result.reset();
    planned.code = ExitCode::Invalid;
  }
  return planned;
}

}  // namespace driver
namespace {

using driver::load_pair;
using driver::load_plan_input;
using driver::print_error;

// The B ranks the JSON lists: --ranks, else all.
std::optional<std::vector<std::int64_t>> listed_ranks(const ReshardOptions& opt, std::int64_t world,
                                                      std::ostream& err) {
  if (!opt.ranks) return driver::all_ranks(world);
  return driver::parse_ranks_option(*opt.ranks, world, opt.diag_format, err,
                                    " (plan B has " + std::to_string(world) + " ranks)");
}

std::string percent(std::int64_t part, std::int64_t whole) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f%%",
                whole == 0 ? 0.0 : 100.0 * static_cast<double>(part) / static_cast<double>(whole));
  return buf;
}

std::string min_median_max(std::vector<std::int64_t> per_rank) {
  if (per_rank.empty()) return "-";
  std::sort(per_rank.begin(), per_rank.end());
  return "min " + binary_bytes_text(per_rank.front()) + ", median " +
         binary_bytes_text(per_rank[(per_rank.size() - 1) / 2]) + ", max " +
         binary_bytes_text(per_rank.back());
}

void print_summary(const reshard::Layout& from, const reshard::Layout& to,
                   const reshard::Result& result, const ReshardOptions& opt, double seconds,
                   std::ostream& out) {
  const reshard::Totals& totals = result.totals;
  char time[32];
  std::snprintf(time, sizeof time, "%.2f", seconds);
  out << "reshard " << from.label << " (" << from.world_size << " ranks) -> " << to.label << " ("
      << to.world_size << " ranks)";
  if (opt.ranks_per_node) out << ", " << *opt.ranks_per_node << " ranks per node";
  out << "\n";
  out << "params: " << totals.params << " transferred";
  if (totals.shared_aliases == 1) out << ", 1 tied alias shares storage";
  if (totals.shared_aliases > 1)
    out << ", " << totals.shared_aliases << " tied aliases share storage";
  out << "; " << totals.pieces << " pieces (A shard class x B shard class), read and planned in "
      << time << " s\n";
  out << "destination bytes: " << binary_bytes_text(totals.dest_bytes) << " total; per rank "
      << min_median_max(result.dest_bytes) << "\n";
  out << "moved bytes:       " << binary_bytes_text(totals.moved_bytes) << " total; per rank "
      << min_median_max(result.moved_bytes) << "\n";
  out << "already in place:  " << binary_bytes_text(totals.in_place_bytes) << " ("
      << percent(totals.in_place_bytes, totals.dest_bytes) << " of destination bytes)\n";
}

}  // namespace

ExitCode run_reshard(const ReshardOptions& opt, FileSystem& fs, std::ostream& out,
                     std::ostream& err) {
  const auto t0 = std::chrono::steady_clock::now();
  driver::Session session;
  const driver::PlannedReshard planned =
      driver::plan_reshard_inputs(opt, "reshard", fs, session, out, err);
  if (planned.code != ExitCode::Ok) return planned.code;
  const reshard::Layout& from = *planned.from;
  const reshard::Layout& to = *planned.to;
  const reshard::Result& result = *planned.result;
  const reshard::Options ro{opt.ranks_per_node};
  const std::chrono::duration<double> dt = std::chrono::steady_clock::now() - t0;
  if (opt.ranks && !opt.json && !opt.out_file) {
    // Trial A 3.5: `--ranks 99` on 64 ranks was ignored (it selects the listing's ranks).
    print_error(opt.diag_format == DiagFormat::Text ? err : out, opt.diag_format, DiagCode::EUsage,
                "--ranks selects the plan-B ranks of the JSON listing; the summary covers every "
                "rank",
                "add -o FILE or --format json to write the listing of those ranks");
    return ExitCode::Usage;
  }
  if (opt.json || opt.out_file) {
    const auto ranks =
        listed_ranks(opt, to.world_size, opt.diag_format == DiagFormat::Text ? err : out);
    if (!ranks) return ExitCode::Usage;
    const std::string text = render_reshard_json(from, to, result, ro, *ranks);
    if (opt.out_file) {
      std::string error;
      if (!fs.write_atomic(*opt.out_file, text, error)) {
        print_error(err, DiagCode::EOutput,
                    "cannot write '" + *opt.out_file + "': " + error +
                        " (--format json prints the listing to standard output)");
        return ExitCode::Usage;
      }
    }
    if (opt.json) {
      out << text;
      return ExitCode::Ok;
    }
  }
  print_summary(from, to, result, opt, dt.count(), out);
  return ExitCode::Ok;
}

}  // namespace shardc
