// `shardc verify OUTDIR [--ranks SET]`: loads plan.json, re-plans the inputs under
// --against, runs the verify engine (verify/verify.hpp) and prints a summary.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ostream>

#include "backend/backend.hpp"
#include "core/plan.hpp"
#include "driver/out_dir.hpp"
#include "driver/rank_option.hpp"
#include "driver/session.hpp"
#include "memory/memory.hpp"
#include "planner/buffers.hpp"
#include "planner/planner.hpp"
#include "support/utf8.hpp"
#include "verify/verify.hpp"

namespace shardc {
namespace {

using driver::path_join;
using driver::print_error;
using namespace verify;

// --against MODEL RECIPE: the inputs planned again must render exactly plan.json's bytes, so
// every field a runtime acts on (placements, meshes, requires_grad, alias_of, stacked_from) is
// checked, not only those the outputs repeat. The first differing param (or byte) is named.
// false (exit 2) when the inputs do not plan.
// `replanned` keeps the plan of the inputs for the rank files' checks.
struct WrittenPlan {
  const std::string& text;  ///< plan.json's bytes
  const PlanFile& plan;     ///< as read
};

bool same_as_inputs(const VerifyOptions& opt, const WrittenPlan& written, Report& report,
                    FileSystem& fs, std::ostream& err, std::optional<Plan>& replanned) {
  const std::string& text = written.text;
  const PlanFile& plan = written.plan;
  CommonOptions common;
  common.model_path = opt.against[0];
  common.recipe_path = opt.against[1];
  common.memory_report = true;  // as compile: plan.json carries per-rank memory
  common.per_rank_memory = true;
  driver::SessionScope scope(common);
  driver::Session& session = *scope;
  if (driver::plan_or_report(common, fs, session, err) != ExitCode::Ok || !session.plan)
    return false;
  const Plan& planned = *session.plan;
  const std::vector<BufferRankBytes> buffer_bytes =
      buffer_rank_bytes(planned, plan_buffers(planned));
  const MemoryReport memory = compute_memory(planned, buffer_bytes);
  const std::string want = render_plan_json(planned, rank_bytes(planned), buffer_bytes, &memory);
  replanned = std::move(session.plan);
  if (want == text) return true;
  std::string error;
  const auto theirs = readback::parse_plan_file(want, error);
  std::string where;
  if (const auto field = readback::param_field_difference(text, want)) {
    where = "param " + field->param + ": `" + field->key + "`: plan.json has " + field->first +
            ", the inputs plan " + field->second;
  } else if (theirs) {
    for (std::size_t i = 0; i < plan.params.size() && i < theirs->params.size() && where.empty();
         ++i)
      if (!(plan.params[i] == theirs->params[i])) where = "param " + plan.params[i].name;
  }
  if (where.empty()) {
    std::size_t at = 0;
    while (at < want.size() && at < text.size() && want[at] == text[at]) ++at;
    const std::size_t line_start = text.rfind('\n', at == 0 ? 0 : at - 1);
    const std::size_t begin = line_start == std::string::npos ? 0 : line_start + 1;
    where = "byte " + std::to_string(at) + " (plan.json: '" +
            printable(text.substr(begin, std::min<std::size_t>(120, text.size() - begin))) + "')";
  }
  report.mismatch("plan.json is not the plan of " + opt.against[0] + " " + opt.against[1] +
                  ": first difference at " + where);
  return true;
}

// plan.json, checked against the manifest's digest (a change is a mismatch).
std::optional<PlanFile> load_plan(const VerifyOptions& opt, const readback::ManifestFile& manifest,
                                  Report& report, FileSystem& fs, std::ostream& err,
                                  std::optional<Plan>& replanned) {
  const std::string path = path_join(opt.out_dir, "plan.json");
  std::string error;
  const auto text = fs.read_regular(path, read_limit(manifest.plan.bytes), error);
  if (!text) {
    print_error(err, DiagCode::EPlanFile, "cannot read '" + path + "': " + error);
    return std::nullopt;
  }
  if (const std::string change = digest_change(manifest.plan, *text); !change.empty())
    report.mismatch(change);
  auto plan = readback::parse_plan_file(*text, error);
  if (!plan) print_error(err, DiagCode::EPlanFile, "'" + path + "' is not a shardc plan: " + error);
  if (plan && !opt.against.empty() &&
      !same_as_inputs(opt, {*text, *plan}, report, fs, err, replanned))
    return std::nullopt;
  return plan;
}

// --against: each sampled rank file's `local_attributes` (contract §6.7) must be
// byte for byte what compile writes for the inputs (as plan.json must: plan.json does
// not repeat them, so only re-planning checks them). A difference names the rank and
// both texts from the first differing byte.
void check_local_attributes(const VerifyOptions& opt, const Plan& replanned,
                            const readback::ManifestFile& manifest,
                            const std::vector<std::int64_t>& sample, Report& report,
                            FileSystem& fs) {
  for (const auto& entry : manifest.rank_files) {
    if (!std::binary_search(sample.begin(), sample.end(), entry.rank)) continue;
    std::string error;
    const auto text =
        fs.read_regular(path_join(opt.out_dir, entry.path), read_limit(entry.bytes), error);
    if (!text) continue;  // unreadable: already a mismatch of the sample
    const std::string want = render_local_attributes_json(replanned, entry.rank);
    const std::string marker = "\"local_attributes\":";
    const std::size_t at = text->find(marker);
    const std::string got =
        at == std::string::npos ? std::string() : text->substr(at + marker.size(), want.size());
    if (got == want) continue;
    std::string where = "the file has no local_attributes";
    if (at != std::string::npos) {
      std::size_t i = 0;
      while (i < want.size() && i < got.size() && want[i] == got[i]) ++i;
      const std::size_t from = i < 40 ? 0 : i - 40;
      const auto excerpt = [&](const std::string& section) {
        return printable(section.substr(std::min(from, section.size()), 100));
      };
      where = "from byte " + std::to_string(from) + " of the section the file has '" +
              excerpt(got) + "', the plan '" + excerpt(want) + "'";
    }
    report.mismatch(entry.path + " (rank " + std::to_string(entry.rank) +
                    "): local_attributes are not those of " + opt.against[0] + " " +
                    opt.against[1] + ": " + where);
  }
}

// --ranks, or every rank file the manifest lists.
std::optional<std::vector<std::int64_t>> sample_ranks(const VerifyOptions& opt,
                                                      const readback::ManifestFile& manifest,
                                                      std::ostream& err) {
  if (opt.ranks)
    return driver::parse_ranks_option(*opt.ranks, manifest.world_size, DiagFormat::Text, err);
  std::vector<std::int64_t> out;
  for (const auto& entry : manifest.rank_files) out.push_back(entry.rank);
  if (out.empty())
    print_error(err, DiagCode::EPlanFile,
                "no rank files in '" + path_join(opt.out_dir, "ranks") +
                    "' (manifest.json lists none: compiled with --no-rank-files)");
  if (out.empty()) return std::nullopt;
  return out;
}

void print_list(const std::vector<std::string>& items, std::int64_t total, std::ostream& out) {
  for (const auto& item : items) out << "  " << item << "\n";
  if (total > static_cast<std::int64_t>(items.size()))
    out << "  ... and " << total - static_cast<std::int64_t>(items.size()) << " more\n";
}

void print_summary(const Report& rep, std::size_t sampled, std::size_t loaded, double seconds,
                   std::ostream& out) {
  char time[32];
  std::snprintf(time, sizeof time, "%.2f", seconds);
  out << "verified " << rep.buffers << (rep.buffers == 1 ? " buffer" : " buffers") << ", "
      << rep.groups << " groups/units, " << rep.element_params + rep.box_params
      << " param gathers (" << rep.element_params << " element-simulated, " << rep.box_params
      << " box-checked"
      << (rep.packed_skipped > 0
              ? ", " + std::to_string(rep.packed_skipped) + " packed not simulated"
              : std::string())
      << "; " << rep.memo_hits << " stage simulations reused from an identical layout), "
      << rep.slice_checks << " slice-backs, " << sampled << " sampled ranks (" << loaded
      << " rank files read) in " << time << " s\n";
  if (rep.num_warnings > 0) {
    out << rep.num_warnings << (rep.num_warnings == 1 ? " warning" : " warnings")
        << " (not part of the compile):\n";
    for (const auto& warning : rep.warnings) out << "  warning: " << warning << "\n";
    if (rep.num_warnings > static_cast<std::int64_t>(rep.warnings.size()))
      out << "  ... and " << rep.num_warnings - static_cast<std::int64_t>(rep.warnings.size())
          << " more\n";
  }
  if (rep.num_mismatches == 0 && rep.unverifiable == 0) {
    out << (rep.buffers == 0 ? "no buffer layouts to simulate (the recipe has no `buffers:`); "
                               "the rank files' params agree with plan.json\n"
                             : "all buffer layouts round-trip\n");
    return;
  }
  if (rep.num_mismatches == 0) out << "no mismatches among the layouts checked\n";
  if (rep.num_mismatches > 0) {
    out << rep.num_mismatches << " mismatch(es):\n";
    print_list(rep.mismatches, rep.num_mismatches, out);
  }
}

// "not verifiable" (missing files, not a mismatch) and the rank set that fixes it.
void print_unverifiable(const Report& rep, const std::vector<std::int64_t>& sample,
                        const RankSet& need, std::int64_t world, std::ostream& out) {
  if (rep.unverifiable == 0) return;
  out << rep.unverifiable
      << " group(s)/unit(s) not verifiable: the rank files of some members are absent (not a "
         "mismatch):\n";
  const std::size_t shown = std::min<std::size_t>(rep.unverifiable_list.size(), 5);
  print_list({rep.unverifiable_list.begin(), rep.unverifiable_list.begin() + shown},
             rep.unverifiable, out);
  const std::string asked = RankSet::from_sorted(sample).to_string();
  out << "to verify ranks " << asked << ", compile (at least) --ranks " << need.to_string() << " ("
      << need.size() << " of " << world << " ranks; `shardc compile ... --ranks " << asked
      << " --with-groups` adds them), then run verify --ranks " << asked << "\n";
}

}  // namespace

ExitCode run_verify(const VerifyOptions& opt, FileSystem& fs, std::ostream& out,
                    std::ostream& err) {
  const auto t0 = std::chrono::steady_clock::now();
  const auto manifest = load_commit(opt.out_dir, fs, err);
  if (!manifest) return ExitCode::Usage;
  Report report;
  report.max_listed = opt.max_mismatches;
  std::optional<Plan> replanned;
  const auto plan = load_plan(opt, *manifest, report, fs, err, replanned);
  if (!plan) return ExitCode::Usage;
  auto sample = sample_ranks(opt, *manifest, err);
  if (!sample) return ExitCode::Usage;
  Request request{opt.out_dir, std::move(*sample), opt.max_elements, {}};
  if (replanned)
    request.after_load = [&](const std::vector<std::int64_t>& sorted) {
      check_local_attributes(opt, *replanned, *manifest, sorted, report, fs);
    };
  const Outcome outcome = verify_outputs(*plan, *manifest, request, report, fs, err);
  if (outcome.status == Outcome::Status::PlanUnusable) {
    print_summary(report, 0, 0, 0.0, out);
    return ExitCode::Invalid;
  }
  if (outcome.status == Outcome::Status::OutputsUnusable) return ExitCode::Usage;
  const std::chrono::duration<double> dt = std::chrono::steady_clock::now() - t0;
  print_summary(report, outcome.sample.size(), outcome.files_read, dt.count(), out);
  print_unverifiable(report, outcome.sample, outcome.needed, plan->world_size, out);
  if (report.num_mismatches == 0 && report.num_warnings > 0 && opt.strict)
    out << "warnings fail the run under --strict\n";
  const bool failed = report.num_mismatches > 0 || report.unverifiable > 0 ||
                      (opt.strict && report.num_warnings > 0);
  return failed ? ExitCode::Invalid : ExitCode::Ok;
}

}  // namespace shardc
