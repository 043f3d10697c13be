// `shardc report`: plans MODEL RECIPE, reads a compiled OUTDIR (src/outputs readers: the
// memory every rank file carries, plan.json's params and summary), or loads and plans a
// reshard, as `shardc reshard` does, and writes one self-contained HTML page
// (src/report/report.hpp) from the same plan, memory figures, buffers and reshard result
// the JSON outputs are rendered from.
#include <algorithm>
#include <ostream>
#include <sstream>

#include "driver/inspect_buffers.hpp"
#include "driver/out_dir.hpp"
#include "driver/rank_option.hpp"
#include "driver/reshard_inputs.hpp"
#include "driver/session.hpp"
#include "driver/text_format.hpp"
#include "outputs/readback.hpp"
#include "report/report.hpp"
#include "verify/verify.hpp"

namespace shardc {
namespace {

using driver::print_error;

ExitCode write_page(const std::string& path, const std::string& page, FileSystem& fs,
                    std::ostream& out, std::ostream& err) {
  std::string error;
  if (!fs.write_atomic(path, page, error)) {
    print_error(err, DiagCode::EOutput, "cannot write '" + path + "': " + error);
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
    auto ranks =
        driver::parse_ranks_option(*opt.ranks, plan.world_size, opt.common.diag_format, err);
    if (ranks && ranks->size() > kMaxDetailRanks) {
      print_error(err, opt.common.diag_format, DiagCode::EUsage,
                  "--ranks '" + *opt.ranks + "': " + std::to_string(ranks->size()) +
                      " ranks; a page embeds the params tables of at most " +
                      std::to_string(kMaxDetailRanks) + " (the memory of every rank is in it)",
                  "name at most " + std::to_string(kMaxDetailRanks) + " ranks");
      return std::nullopt;
    }
    return ranks;
  }
  if (!memory) return std::vector<std::int64_t>{0};
  std::vector<std::int64_t> ranks{memory->peak_ranks.first()};
  std::vector<std::int64_t> first(static_cast<std::size_t>(plan.num_stages), -1);
  for (const MemoryClass& memory_class : memory->classes) {
    std::int64_t& stage_first = first[static_cast<std::size_t>(memory_class.stage)];
    if (stage_first < 0 || memory_class.ranks.first() < stage_first)
      stage_first = memory_class.ranks.first();
  }
  for (std::int64_t stage_first : first) {
    if (stage_first >= 0 && std::find(ranks.begin(), ranks.end(), stage_first) == ranks.end())
      ranks.push_back(stage_first);
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

// The files of a compiled OUTDIR, read and checked (every problem an E-REPORT-INPUT naming
// the file): the manifest, plan.json unchanged since compile and well formed, and the
// memory of every rank file the manifest lists (each unchanged, of its rank and stage).
struct OutdirFiles {
  readback::ManifestFile manifest;
  readback::PlanFile plan;
  Plan outline;
  std::vector<readback::RankMemoryFile> memory;  ///< as the manifest lists them
};

constexpr const char* kOutdirHint =
    "recompile the OUTDIR with `shardc compile` (never edit its files), or give the MODEL "
    "RECIPE it was compiled from";

class OutdirReader {
 public:
  OutdirReader(const std::string& dir, FileSystem& fs, driver::Session& session)
      : dir_(dir), fs_(fs), s_(session) {}

  // The text of `entry`'s file when it has the size and digest the manifest records.
  std::optional<std::string> read_entry(const readback::ManifestEntry& entry) {
    const std::string path = driver::path_join(dir_, entry.path);
    std::string error;
    auto text = fs_.read(path, verify::read_limit(entry.bytes), error);
    if (!text) return fail(path, "cannot read '" + path + "': " + error);
    if (const std::string change = verify::digest_change(entry, *text); !change.empty())
      return fail(path, "'" + path + "' changed since compile: " + change);
    return text;
  }

  std::optional<OutdirFiles> read() {
    OutdirFiles files;
    const std::string manifest_path = driver::path_join(dir_, "manifest.json");
    std::string error;
    auto text = fs_.read(manifest_path, limits::kMaxManifestBytes, error);
    if (!text) {
      return fail(manifest_path, "'" + dir_ + "' is not a complete compile: cannot read '" +
                                     manifest_path + "' (" + error +
                                     "; compile writes it last, after every other file)");
    }
    auto manifest = readback::parse_manifest_file(*text, error);
    if (!manifest) return fail(manifest_path, "'" + manifest_path + "' is malformed: " + error);
    files.manifest = std::move(*manifest);
    const std::string plan_path = driver::path_join(dir_, "plan.json");
    auto plan_text = read_entry(files.manifest.plan);
    if (!plan_text) return std::nullopt;
    auto plan = readback::parse_plan_file(*plan_text, error);
    if (!plan) return fail(plan_path, "'" + plan_path + "' is not a shardc plan: " + error);
    files.plan = std::move(*plan);
    if (!check_plan(files.plan, files.manifest, plan_path)) return std::nullopt;
    files.outline = plan_outline(files.plan);
    files.memory.reserve(files.manifest.rank_files.size());
    for (const readback::ManifestEntry& entry : files.manifest.rank_files) {
      const std::string path = driver::path_join(dir_, entry.path);
      auto rank_text = read_entry(entry);
      if (!rank_text) return std::nullopt;
      auto memory = readback::parse_rank_memory_file(*rank_text, error);
      if (!memory) return fail(path, "'" + path + "' is not a shardc rank file: " + error);
      if (memory->rank != entry.rank || memory->world_size != files.plan.world_size ||
          memory->stage != files.outline.stage_of_rank(entry.rank)) {
        return fail(path, "'" + path + "' is rank " + std::to_string(memory->rank) + " of " +
                              std::to_string(memory->world_size) + " on stage " +
                              std::to_string(memory->stage) + "; the manifest and plan.json say " +
                              "rank " + std::to_string(entry.rank) + " of " +
                              std::to_string(files.plan.world_size) + " on stage " +
                              std::to_string(files.outline.stage_of_rank(entry.rank)));
      }
      files.memory.push_back(*memory);
    }
    return files;
  }

  // The full rank file of `rank` (listed in the manifest).
  std::optional<readback::RankFile> read_rank(const readback::ManifestFile& manifest,
                                              std::int64_t rank) {
    const auto it =
        std::find_if(manifest.rank_files.begin(), manifest.rank_files.end(),
                     [rank](const readback::ManifestEntry& entry) { return entry.rank == rank; });
    if (it == manifest.rank_files.end()) return std::nullopt;
    const std::string path = driver::path_join(dir_, it->path);
    auto text = read_entry(*it);
    if (!text) return std::nullopt;
    std::string error;
    auto file = readback::parse_rank_file(*text, error);
    if (!file) return fail(path, "'" + path + "' is not a shardc rank file: " + error);
    return file;
  }

 private:
  std::nullopt_t fail(const std::string& path, std::string message) {
    s_.sink.error(DiagCode::EReportInput, SourceLoc{path, 0, 0}, std::move(message), kOutdirHint);
    return std::nullopt;
  }

  // plan.json against the manifest and itself: what the page relies on.
  bool check_plan(const readback::PlanFile& plan, const readback::ManifestFile& manifest,
                  const std::string& path) {
    auto product = [](const std::vector<readback::PlanMeshAxis>& axes) {
      std::int64_t ranks_product = 1;
      for (const readback::PlanMeshAxis& axis : axes) {
        if (ranks_product > limits::kMaxWorld / axis.size) return limits::kMaxWorld + 1;
        ranks_product *= axis.size;
      }
      return ranks_product;
    };
    std::string problem;
    if (plan.world_size != manifest.world_size) {
      problem = "world_size " + std::to_string(plan.world_size) + ", the manifest says " +
                std::to_string(manifest.world_size);
    } else if (product(plan.dense) != plan.world_size ||
               (!plan.expert.empty() && product(plan.expert) != plan.world_size)) {
      problem = "its meshes do not hold world_size " + std::to_string(plan.world_size) + " ranks";
    } else if (plan.pipeline_axis && !std::any_of(plan.dense.begin(), plan.dense.end(),
                                                  [&](const readback::PlanMeshAxis& axis) {
                                                    return axis.name == *plan.pipeline_axis;
                                                  })) {
      problem = "pipeline axis '" + *plan.pipeline_axis + "' is not a dense mesh axis";
    } else if (plan.pipeline_axis &&
               std::find_if(plan.dense.begin(), plan.dense.end(), [&](const auto& axis) {
                 return axis.name == *plan.pipeline_axis;
               })->size != plan.num_stages) {
      problem = "num_stages " + std::to_string(plan.num_stages) + " is not the pipeline axis size";
    } else if (!plan.pipeline_axis && plan.num_stages != 1) {
      problem = "num_stages " + std::to_string(plan.num_stages) + " without a pipeline";
    } else {
      for (const readback::PlanParam& param : plan.params) {
        const bool expert = param.mesh == "expert";
        if ((param.mesh != "dense" && !expert) || (expert && plan.expert.empty()) ||
            param.placements.size() != (expert ? plan.expert : plan.dense).size() ||
            param.stage < 0 || param.stage >= plan.num_stages) {
          problem = "param '" + param.name + "': mesh '" + param.mesh + "', " +
                    std::to_string(param.placements.size()) + " placements, stage " +
                    std::to_string(param.stage) + " do not fit the plan's meshes and stages";
          break;
        }
      }
    }
    if (problem.empty()) return true;
    fail(path, "'" + path + "' is inconsistent: " + problem);
    return false;
  }

  const std::string& dir_;
  FileSystem& fs_;
  driver::Session& s_;
};

// The embedded ranks of an OUTDIR page: --ranks (each with a rank file), else the peak rank
// and each stage's first rank among the ranks with files.
std::optional<std::vector<std::int64_t>> outdir_detail_ranks(const ReportOptions& opt,
                                                             const OutdirFiles& files,
                                                             const MemoryReport* memory,
                                                             std::ostream& err) {
  auto has_file = [&files](std::int64_t rank) {
    return std::any_of(files.manifest.rank_files.begin(), files.manifest.rank_files.end(),
                       [rank](const readback::ManifestEntry& entry) { return entry.rank == rank; });
  };
  if (opt.ranks) {
    auto ranks = detail_ranks(opt, files.outline, memory, err);
    if (!ranks) return std::nullopt;
    for (std::int64_t rank_index : *ranks) {
      if (!has_file(rank_index)) {
        print_error(
            err, opt.common.diag_format, DiagCode::EUsage,
            "--ranks '" + *opt.ranks + "': the OUTDIR holds no rank file of rank " +
                std::to_string(rank_index) + " (its rank files: " +
                (files.manifest.ranks.empty() ? std::string("none") : files.manifest.ranks) + ")",
            "name ranks the OUTDIR has files of, or compile them (`compile --ranks`)");
        return std::nullopt;
      }
    }
    return ranks;
  }
  if (memory) return detail_ranks(opt, files.outline, memory, err);
  std::vector<std::int64_t> ranks;
  std::vector<bool> seen(static_cast<std::size_t>(files.outline.num_stages), false);
  for (const readback::RankMemoryFile& rank_memory : files.memory) {
    if (ranks.size() >= kMaxDetailRanks) break;
    if (seen[static_cast<std::size_t>(rank_memory.stage)]) continue;
    seen[static_cast<std::size_t>(rank_memory.stage)] = true;
    ranks.push_back(rank_memory.rank);
  }
  return ranks;
}

ExitCode run_outdir_report(const ReportOptions& opt, FileSystem& fs, std::ostream& out,
                           std::ostream& err) {
  const std::string& dir = opt.inputs[0];
  CommonOptions common = opt.common;
  driver::SessionScope scope(common);
  driver::Session& session = *scope;
  std::ostream& diag_out = common.diag_format == DiagFormat::Text ? err : out;
  OutdirReader reader(dir, fs, session);
  const std::optional<OutdirFiles> read_files = reader.read();
  if (!read_files) {
    driver::print_diagnostics(common, session, diag_out);
    return ExitCode::Usage;
  }
  const OutdirFiles& files = *read_files;
  PlanReportInput in;
  in.title = dir;
  in.plan = &files.outline;
  in.num_params = static_cast<std::int64_t>(files.plan.params.size());
  in.largest = largest_params(files.plan);
  in.plan_memory = files.plan.per_rank_memory ? &*files.plan.per_rank_memory : nullptr;
  in.budget = common.budget_bytes;
  std::optional<MemoryReport> memory;
  const auto world = static_cast<std::size_t>(files.plan.world_size);
  if (files.memory.size() == world) {
    memory = memory_of_rank_files(
        files.memory, files.plan.per_rank_memory ? files.plan.per_rank_memory->activations
                                                 : std::vector<readback::PlanStageActivations>{});
    in.memory = &*memory;
  } else {
    in.notes.push_back("The OUTDIR holds " + std::to_string(files.memory.size()) + " of " +
                       std::to_string(world) +
                       " rank files (compiled with --ranks or --no-rank-files): the memory per "
                       "stage and the rank selection need every rank's file; the memory over all "
                       "ranks is plan.json's summary.");
  }
  if (!files.plan.per_rank_memory) in.notes.push_back("plan.json has no summary.per_rank_memory.");
  in.notes.push_back(
      "Read from a compiled OUTDIR: its files hold no source lines of the inputs, so the "
      "diagnostics (the warnings compile kept in plan.json) show file:line:col without an "
      "excerpt.");
  if (!in.budget) {
    in.notes.push_back(
        "The OUTDIR records no memory budget: give --budget to draw one and check it.");
  }
  const auto ranks = outdir_detail_ranks(opt, files, in.memory, diag_out);
  if (!ranks) return ExitCode::Usage;
  for (std::int64_t rank_index : *ranks) {
    auto rank_file = reader.read_rank(files.manifest, rank_index);
    if (!rank_file) {
      driver::print_diagnostics(common, session, diag_out);
      return ExitCode::Usage;
    }
    in.ranks.push_back(report_rank(*rank_file));
  }
  // The page's diagnostics: plan.json's, as compile kept them.
  DiagnosticSink page_diagnostics;
  for (const readback::PlanDiagnostic& diagnostic : files.plan.diagnostics) {
    const std::optional<DiagCode> code = find_diag_code(diagnostic.code);
    const std::string path = driver::path_join(dir, "plan.json");
    if (!code) {
      session.sink.error(
          DiagCode::EReportInput, SourceLoc{path, 0, 0},
          "'" + path + "' lists a diagnostic of unknown code '" + diagnostic.code + "'",
          kOutdirHint);
      driver::print_diagnostics(common, session, diag_out);
      return ExitCode::Usage;
    }
    const SourceLoc loc{diagnostic.file, static_cast<int>(diagnostic.line),
                        static_cast<int>(diagnostic.column)};
    if (diagnostic.severity == "error")
      page_diagnostics.error(*code, loc, diagnostic.message, diagnostic.hint);
    else
      page_diagnostics.warning(*code, loc, diagnostic.message, diagnostic.hint);
  }
  const SourceMap no_sources;
  in.diagnostics = &page_diagnostics;
  in.sources = &no_sources;
  const ExitCode written = write_page(opt.out_file, render_plan_report_html(in), fs, out, err);
  // plan.json's warnings fail the run under --strict, as they fail `compile --strict`.
  return written != ExitCode::Ok ? written
                                 : driver::diagnostics_exit_code(common, page_diagnostics);
}

}  // namespace

ExitCode run_report(const ReportOptions& opt, FileSystem& fs, std::ostream& out,
                    std::ostream& err) {
  if (opt.reshard) return run_reshard_report(opt, fs, out, err);
  if (opt.inputs.size() == 1 && fs.list_dir(opt.inputs[0])) {
    return run_outdir_report(opt, fs, out, err);
  }
  if (opt.inputs.size() != 2) {
    print_error(err, DiagCode::EUsage,
                "report takes MODEL RECIPE, a compiled OUTDIR (or --reshard PLAN_A PLAN_B); got " +
                    (opt.inputs.size() == 1 ? "'" + opt.inputs[0] + "', not a directory"
                                            : std::to_string(opt.inputs.size()) + " inputs"));
    return ExitCode::Usage;
  }
  CommonOptions common = opt.common;
  common.model_path = opt.inputs[0];
  common.recipe_path = opt.inputs[1];
  common.check_budget = true;
  common.memory_report = true;
  driver::SessionScope scope(common);
  driver::Session& session = *scope;
  const ExitCode code = driver::plan_or_report(common, fs, session,
                                               common.diag_format == DiagFormat::Text ? err : out);
  PlanReportInput in;
  in.title = common.model_path + " + " + common.recipe_path;
  in.diagnostics = &session.sink;
  in.sources = &session.sources;
  if (session.plan) {
    in.plan = &*session.plan;
    in.num_params = static_cast<std::int64_t>(session.plan->params.size());
    in.largest = largest_params(*session.plan);
    in.memory = session.memory ? &*session.memory : nullptr;
    in.budget = session.budget;
    const auto ranks = detail_ranks(opt, *session.plan, in.memory,
                                    common.diag_format == DiagFormat::Text ? err : out);
    if (!ranks) return ExitCode::Usage;
    for (std::int64_t rank : *ranks) {
      std::ostringstream buffers;
      driver::print_rank_buffers(*session.plan, rank, buffers);
      std::string text = buffers.str();
      constexpr std::string_view kHeading = "\nbuffers:\n";  // the page has its own heading
      if (text.starts_with(kHeading)) text.erase(0, kHeading.size());
      in.ranks.push_back({rank, rank_params(*session.plan, rank), std::move(text)});
    }
  } else if (session.sink.items().empty()) {
    return code;  // nothing to show (an unreadable input: its error is printed)
  }
  const ExitCode written = write_page(opt.out_file, render_plan_report_html(in), fs, out, err);
  return written != ExitCode::Ok ? written : code;
}

}  // namespace shardc
