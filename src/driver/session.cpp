#include "driver/session.hpp"

#include <spdlog/spdlog.h>

#include <mutex>
#include <new>
#include <ostream>
#include <vector>

#include "frontend/frontend.hpp"
#include "import/import.hpp"
#include "planner/check_plan.hpp"
#include "planner/planner.hpp"
#include "support/assert.hpp"
#include "support/large_buffer.hpp"

namespace shardc::driver {
namespace {

// Reads one of compile's inputs; reports `code` when it cannot be read.
std::optional<SourceFile> read_logged(FileSystem& fs, const std::string& path, const char* what,
                                      DiagCode code, Session& session) {
  auto file =
      read_input(fs, path, what, code, "check the path; inputs are limited to 256 MiB", session);
  if (file) spdlog::debug("read {} {} ({} bytes)", what, path, file->text.size());
  return file;
}

// Base name without directories and extensions, the model name of last resort.
std::string stem_of(const std::string& path) {
  const auto slash = path.find_last_of('/');
  std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
  const auto dot = base.find('.');
  return dot == std::string::npos || dot == 0 ? base : base.substr(0, dot);
}

void parse_inputs(const CommonOptions& opt, FileSystem& fs, Session& session) {
  if (is_checkpoint_path(fs, opt.model_path)) {
    if (auto im = import_checkpoint(fs, opt.model_path, session.sink))
      session.model = std::move(im->model);
  } else if (auto file = read_logged(fs, opt.model_path, "model", DiagCode::EModel, session)) {
    session.model = parse_model(*file, session.sink, opt.input_digests);
    if (session.model) {
      if (opt.input_digests && session.model->sha256.empty())
        session.model->sha256 = sha256_hex(file->text);
      if (session.model->source_path.empty()) session.model->source_path = file->path;
      if (session.model->name.empty()) session.model->name = stem_of(file->path);
    }
    session.sources[file->path] = std::move(file->text);  // kept for source excerpts
  }
  if (auto file = read_logged(fs, opt.recipe_path, "recipe", DiagCode::ERecipe, session)) {
    session.recipe = parse_recipe(*file, session.sink, opt.input_digests);
    if (session.recipe) {
      if (opt.input_digests && session.recipe->sha256.empty())
        session.recipe->sha256 = sha256_hex(file->text);
      if (session.recipe->source_path.empty()) session.recipe->source_path = file->path;
    }
    session.sources[file->path] = std::move(file->text);
  }
}

// The budget check of validate / memory: --budget, else the recipe's.
void check_memory_budget(const CommonOptions& opt, Session& session) {
  const TrainingSpec& training = session.plan->training;
  // Only validate and memory check a budget; compile and inspect check the world's size.
  if (opt.check_budget)
    session.budget = opt.budget_bytes ? opt.budget_bytes : training.budget_bytes;
  if (!session.budget && !opt.memory_report) return;
  const SourceLoc loc = opt.budget_bytes ? SourceLoc{} : training.budget_loc;
  if (opt.per_rank_memory) {
    // compile / verify --against write (or re-render) a row per rank: refused above the limit,
    // computed by the command itself.
    if (!check_memory_world(*session.plan, loc,
                            "the per-rank memory table of plan.json and the rank files",
                            session.sink))
      return;
    // compile reports an exceeded budget as validate does (issue 29 item 6).
    if (session.budget) {
      session.memory = compute_memory(*session.plan);
      check_budget(*session.plan, *session.memory, *session.budget, loc, session.sink);
    }
    return;
  }
  // validate's budget, memory, inspect: classes of ranks, any legal world.
  std::string why;
  session.memory = memory_classes(*session.plan, &why);
  if (!session.memory) {
    refuse_memory_classes(*session.plan, loc, why, session.sink);
    return;
  }
  if (session.budget)
    check_budget(*session.plan, *session.memory, *session.budget, loc, session.sink);
}

}  // namespace

ExitCode print_or_write(const std::string& text, const std::string& output, FileSystem& fs,
                        std::ostream& out, std::ostream& err) {
  if (output.empty()) {
    out << text;
    return ExitCode::Ok;
  }
  std::string error;
  if (!fs.write_atomic(output, text, error)) {
    print_error(
        err, DiagCode::EOutput,
        "cannot write '" + output + "': " + error + " (omit -o to print to standard output)");
    return ExitCode::Usage;
  }
  return ExitCode::Ok;
}

std::optional<SourceFile> read_input(FileSystem& fs, const std::string& path, const char* what,
                                     DiagCode code, const char* hint, Session& session) {
  std::string error;
  auto text = fs.read(path, kMaxInputBytes, error);
  if (!text) {
    session.sink.error(code, SourceLoc{path, 0, 0},
                       std::string("cannot read ") + what + " file '" + path + "': " + error,
                       std::string(hint));
    return std::nullopt;
  }
  return SourceFile{path, std::move(*text)};
}

SessionScope::~SessionScope() {
  if (leave_) leave_to_exit(session_);  // else (or when the list cannot grow) freed as usual
}

void load_and_plan(const CommonOptions& opt, FileSystem& fs, Session& session) {
  parse_inputs(opt, fs, session);
  if (!session.model || !session.recipe || session.sink.has_errors()) return;
  spdlog::debug("parsed {} params, {} rules", session.model->params.size(),
                session.recipe->rules.size());
  // The plan takes the params (moved, not copied); nothing reads them from
  // s.model afterwards.
  session.plan = build_plan(std::move(*session.model), *session.recipe, session.sink);
  if (!session.plan) return;
  if (session.sink.has_errors()) {
    session.plan.reset();
    return;
  }
  if (opt.check_invariants && !invariants_checked_always()) assert_plan_invariants(*session.plan);
  if (session.plan->model_name.empty()) session.plan->model_name = session.model->name;
  if (session.plan->model_sha256.empty()) session.plan->model_sha256 = session.model->sha256;
  if (session.plan->recipe_sha256.empty()) session.plan->recipe_sha256 = session.recipe->sha256;
  spdlog::debug("planned {} params on {} ranks", session.plan->params.size(),
                session.plan->world_size);
  if (opt.check_budget || opt.memory_report) check_memory_budget(opt, session);
}

ExitCode diagnostics_exit_code(const CommonOptions& opt, const DiagnosticSink& sink) {
  if (sink.has_errors()) return sink.error_exit();
  if (opt.strict && sink.warning_count() > 0) return ExitCode::Invalid;
  return ExitCode::Ok;
}

void print_error(std::ostream& err, DiagFormat format, DiagCode code, const std::string& message,
                 const std::string& hint) {
  // Every format carries the hint; the text form is a whole diagnostic (the error line, the
  // hint, the summary line), as a refused command line prints it (trial A 3.5).
  CommonOptions common;
  common.diag_format = format;
  SessionScope scope(common);
  Session& session = *scope;
  session.sink.error(code, SourceLoc{}, message, hint);
  print_diagnostics(common, session, err);
}

void print_diagnostics(const CommonOptions& opt, const Session& session, std::ostream& os) {
  const DiagnosticSink& sink = session.sink;
  if (sink.items().empty() && sink.dropped() == 0) return;
  switch (opt.diag_format) {
    case DiagFormat::Text:
      os << render_diagnostics_text(sink, session.sources);
      break;
    case DiagFormat::Json:
      os << render_diagnostics_json(sink);
      break;
    case DiagFormat::Github:
      os << render_diagnostics_github(sink);
      break;
  }
  if (opt.strict && !sink.has_errors() && sink.warning_count() > 0 &&
      opt.diag_format == DiagFormat::Text) {
    os << "shardc: error: warnings are errors under --strict\n";
  }
}

ExitCode plan_or_report(const CommonOptions& opt, FileSystem& fs, Session& session,
                        std::ostream& diag_out) {
  load_and_plan(opt, fs, session);
  print_diagnostics(opt, session, diag_out);
  const ExitCode code = diagnostics_exit_code(opt, session.sink);
  // load_and_plan sets the plan unless it reported an error (a broken invariant: exit 3).
  SHARDC_ASSERT(code != ExitCode::Ok || session.plan, "no plan and no diagnostic");
  return code;
}

}  // namespace shardc::driver
