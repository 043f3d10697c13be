// The shared front half of every command (internal to src/driver): read the
// model and recipe, parse them, build the plan, print the diagnostics and
// pick the exit code.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>

#include "backend/backend.hpp"
#include "core/diagnostics.hpp"
#include "core/model.hpp"
#include "core/plan.hpp"
#include "core/recipe.hpp"
#include "frontend/frontend.hpp"
#include "memory/memory.hpp"
#include "shardc/driver.hpp"
#include "support/limits.hpp"
#include "support/print_error.hpp"

namespace shardc::driver {

/// Largest model or recipe file read (docs/limits.md).
inline constexpr std::int64_t kMaxInputBytes = limits::kMaxInputBytes;

struct Session {
  DiagnosticSink sink;
  SourceMap sources;           ///< input texts by path, for source excerpts
  std::optional<Model> model;  ///< its params move into `plan` when it is planned
  std::optional<Recipe> recipe;
  std::optional<Plan> plan;
  /// Set when the budget check ran (CommonOptions::check_budget with a budget).
  std::optional<MemoryReport> memory;
  std::optional<std::int64_t> budget;  ///< the budget that applied, if any
};

/// Owns a command's Session: frees it when the scope ends, unless
/// `opt.leave_to_exit`. Then the Session is left to the process exit
/// (support/large_buffer.hpp `leave_to_exit`: never freed, still reachable).
class SessionScope {
 public:
  explicit SessionScope(const CommonOptions& opt)
      : session_(std::make_unique<Session>()), leave_(opt.leave_to_exit) {}
  ~SessionScope();
  SessionScope(const SessionScope&) = delete;
  SessionScope& operator=(const SessionScope&) = delete;

  [[nodiscard]] Session& operator*() const { return *session_; }

 private:
  std::unique_ptr<Session> session_;
  bool leave_;
};

/// Reads, parses and plans. A MODEL that is a directory or a .safetensors
/// file is imported as a checkpoint (import_checkpoint). Every problem goes to `session.sink`;
/// `session.plan` is set only when no error was reported.
void load_and_plan(const CommonOptions& opt, FileSystem& fs, Session& session);

/// `text` to `out` when `output` is empty, else written atomically to the
/// file `output` (exit 2 after an error line when that fails).
ExitCode print_or_write(const std::string& text, const std::string& output, FileSystem& fs,
                        std::ostream& out, std::ostream& err);

/// Reads one input whole (at most kMaxInputBytes); nullopt after reporting
/// `code` ("cannot read <what> file 'PATH': <why>", `hint`) when it cannot be.
std::optional<SourceFile> read_input(FileSystem& fs, const std::string& path, const char* what,
                                     DiagCode code, const char* hint, Session& session);

/// The exit code the diagnostics call for: the largest exit class of the
/// errors (kDiagCodes: 2 for an input that cannot be read, parsed or used, e.g.
/// E-MODEL, E-RECIPE, E-TRAINING), 1 for warnings under --strict, else 0.
ExitCode diagnostics_exit_code(const CommonOptions& opt, const DiagnosticSink& sink);

/// Renders the sink in `opt.diag_format` to `os` (nothing when empty), plus
/// a line saying warnings failed the run under --strict.
void print_diagnostics(const CommonOptions& opt, const Session& session, std::ostream& os);

/// "shardc: error[CODE]: <message>" (core/diagnostics.hpp: by DiagCode; support/print_error.hpp).
using shardc::print_error;

/// One error that is not about an input file (a usage or I/O problem), in the diagnostics
/// format the command was asked for: the text line above for DiagFormat::Text, else a
/// one-diagnostic JSON array / GitHub command with `hint`, so a --diag-format json reader
/// never gets a bare text line.
void print_error(std::ostream& err, DiagFormat format, DiagCode code, const std::string& message,
                 const std::string& hint);

/// Runs `load_and_plan`, prints the diagnostics to `diag_out` and returns
/// the exit code; Ok means `session.plan` is set and the command may proceed.
ExitCode plan_or_report(const CommonOptions& opt, FileSystem& fs, Session& session,
                        std::ostream& diag_out);

}  // namespace shardc::driver
