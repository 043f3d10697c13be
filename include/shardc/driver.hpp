// Driver: runs one shardc command end to end in-process.
//
// Never reads argv, the environment or the cwd, and never writes to
// std::cout/std::cerr itself: input and output go through a FileSystem and
// the two streams it is handed, so unit tests, end-to-end tests and the
// fuzzer run the whole pipeline without a process.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "shardc/exit_code.hpp"
#include "shardc/file_system.hpp"

namespace shardc {

/// The disk (src/driver/real_file_system*.cpp).
class RealFileSystem final : public FileSystem {
 public:
  std::optional<std::string> read(const std::string& path, std::int64_t max_bytes,
                                  std::string& error) override;
  std::optional<std::string> read_regular(const std::string& path, std::int64_t max_bytes,
                                          std::string& error) override;
  std::optional<std::string> read_range(const std::string& path, std::int64_t offset,
                                        std::int64_t max_bytes, std::int64_t& file_size,
                                        std::string& error) override;
  bool write_atomic(const std::string& path, std::string_view bytes, std::string& error) override;
  bool remove_file(const std::string& path, std::string& error) override;
  bool make_dirs(const std::string& path, std::string& error) override;
  std::optional<std::vector<std::string>> list_dir(const std::string& path) override;
  bool is_symlink(const std::string& path) override;
  bool sync_dir(const std::string& dir, std::string& error) override;
  std::optional<std::string> make_temp_sibling(const std::string& target,
                                               std::string& error) override;
  bool replace_dir(const std::string& from, const std::string& to, std::string& error) override;
  bool remove_tree(const std::string& dir, std::string& error) override;
  std::unique_ptr<FileLock> try_lock(const std::string& path, std::string& error) override;
  void remove_dead_temp_siblings(const std::string& target) override;
};

enum class DiagFormat { Text, Json, Github };
enum class InspectFormat { Table, Json };

struct CommonOptions {
  std::string model_path;
  std::string recipe_path;
  DiagFormat diag_format = DiagFormat::Text;
  bool strict = false;    ///< warnings fail the run (exit 1)
  bool progress = false;  ///< stderr is a terminal: show progress on long runs
  /// Run the memory budget check (validate, memory): E-BUDGET when a rank's
  /// total exceeds `budget_bytes`, else the recipe's `training.budget`.
  bool check_budget = false;
  /// The command reports memory (memory, inspect, compile, verify --against): the session
  /// computes its classes (`memory_classes`, any legal world; E-MEMORY-WORLD only when they
  /// cannot be formed) ...
  bool memory_report = false;
  /// ... or, for the commands that write a row per rank (compile, verify --against), checks
  /// only that the world is at most limits::kMaxMemoryReportWorld (E-MEMORY-WORLD above).
  bool per_rank_memory = false;
  std::optional<std::int64_t> budget_bytes;  ///< `--budget`, overrides the recipe
  /// Run check_plan after planning (always on in builds with
  /// SHARDC_CHECK_INVARIANTS); a violation exits 3 (ExitCode::Internal).
  bool check_invariants = false;
  /// The process exits right after the command returns (the CLI sets it):
  /// the driver then leaves its state (model, recipe, plan, source texts:
  /// tens of MB of small objects for a large model) to the process exit
  /// instead of freeing it. In-process callers (tests, fuzzers) leave it false.
  bool leave_to_exit = false;
  /// Compute the inputs' sha256 (plan.json, rank files, manifest.json print
  /// them); `validate` prints neither and turns it off.
  bool input_digests = true;
};

struct CompileOptions {
  CommonOptions common;
  std::string out_dir;
  std::optional<std::string> ranks;  ///< rank set text; all ranks when absent
  bool rank_files = true;
  /// Also write the files of every rank in the buffer groups of the
  /// selected ranks, so `verify --ranks SET` can check them.
  bool with_groups = false;
  bool force = false;  ///< overwrite a non-empty OUTDIR not written by shardc
  int jobs = 0;        ///< rank-file workers; 0 = one per core
  bool quiet = false;  ///< `--quiet`: no summary on stdout (diagnostics still on stderr)
};

struct InspectOptions {
  CommonOptions common;
  std::int64_t rank = 0;
  std::optional<std::string> match;  ///< glob over FQNs (stacked: also source expert FQNs)
  bool summary = false;              ///< totals per kind and stage only, no table
  InspectFormat format = InspectFormat::Table;
};

enum class MemoryFormat { Table, Json };

struct MemoryOptions {
  CommonOptions common;
  MemoryFormat format = MemoryFormat::Table;
  std::optional<std::string> ranks;  ///< also list these ranks' breakdowns
  /// `--explain`: every activation term with its formula and source.
  bool explain = false;
};

/// `shardc cost`: communication per step per rank (include/shardc/comm.hpp).
struct CostOptions {
  CommonOptions common;
  MemoryFormat format = MemoryFormat::Table;
  std::optional<bool> reshard_after_forward;  ///< nullopt: torchtitan's default
  bool tp_per_linear = false;                 ///< `--tp-inputs per-linear`
  bool loss_parallel = true;                  ///< false: `--no-loss-parallel`
  bool explain = false;                       ///< every term of the peak rank, with formulas
  std::optional<std::string> ranks;           ///< also list these ranks' terms
};

struct ExplainOptions {
  CommonOptions common;
  std::string fqn;
};

struct VerifyOptions {
  std::string out_dir;
  std::optional<std::string> ranks;  ///< sample of ranks to verify; all files present when absent
  /// Params with more global elements than this are checked with box
  /// arithmetic instead of simulated element by element.
  std::int64_t max_elements = std::int64_t{1} << 24;
  int max_mismatches = 20;  ///< mismatches listed before "... and N more"
  /// Files in OUTDIR/ranks that are not part of the compile (extra, duplicate,
  /// beyond the world size, foreign, symlinks) fail the run (else warnings).
  bool strict = false;
  /// `--against MODEL RECIPE`: plan the inputs again and require plan.json to be byte for byte
  /// what compile writes for them (placements, meshes, requires_grad, ties, experts: every
  /// field, including those the outputs cannot re-derive). Empty: not checked.
  std::vector<std::string> against;
};

/// `shardc reshard`: plan A -> plan B transfers (include/shardc/reshard.hpp).
struct ReshardOptions {
  /// Two plans (each an OUTDIR of `compile` or a plan.json file), or four
  /// paths MODEL_A RECIPE_A MODEL_B RECIPE_B planned in memory.
  std::vector<std::string> inputs;
  std::optional<std::string> ranks;     ///< B ranks listed in the JSON; all when absent
  std::optional<std::string> out_file;  ///< write the JSON listing here (atomically)
  bool json = false;                    ///< print the JSON listing on stdout, not the summary
  std::optional<std::int64_t> ranks_per_node;  ///< node = rank / N for the source choice
  DiagFormat diag_format = DiagFormat::Text;
};

/// `shardc report`: one self-contained HTML page (include/shardc/report.hpp, docs/report.md).
struct ReportOptions {
  /// MODEL RECIPE (`common` carries the budget, the diagnostics format and --strict), a
  /// compiled OUTDIR (one input, a directory), or with `reshard` PLAN_A PLAN_B (OUTDIRs or
  /// plan.json files) or MODEL_A RECIPE_A MODEL_B RECIPE_B, as `shardc reshard` takes them.
  CommonOptions common;
  std::vector<std::string> inputs;
  bool reshard = false;
  std::string out_file;                        ///< the page, written atomically
  std::optional<std::string> ranks;            ///< ranks whose params tables the page embeds
  std::optional<std::int64_t> ranks_per_node;  ///< reshard: source choice and heatmap groups
};

enum class ImportFormat { Yaml, Json };

struct ImportOptions {
  std::string path;    ///< checkpoint directory, .safetensors file, or model file
  std::string output;  ///< file to write (atomically); empty = `out`
  ImportFormat format = ImportFormat::Yaml;
  DiagFormat diag_format = DiagFormat::Text;
  /// The transformers major version (4 or 5) whose modules' registration order
  /// the params follow (they differ for Qwen3-MoE only; docs/import.md).
  int transformers_major = 4;
};

struct RecipeOptions {
  std::string hf_tp_plan_path;  ///< tools/hf_tp_plan.py output (transformers' model.tp_plan)
  std::string model_path;       ///< checkpoint directory, .safetensors file, or model file
  std::int64_t tp_size = 0;     ///< ranks on the `tp` axis (>= 1)
  /// ranks on the `ep` axis of the expert mesh (1: no expert parallelism; else the plan
  /// dump's `ep_plan` is translated, and transformers needs ep_size == tp_size without FSDP)
  std::int64_t ep_size = 1;
  std::string output;  ///< file to write (atomically); empty = `out`
  DiagFormat diag_format = DiagFormat::Text;
};

enum class SearchFormat { Text, Json };

/// `shardc search` (include/shardc/search.hpp, docs/search.md).
struct SearchOptions {
  std::string model_path;
  /// A recipe whose rule set (rules, experts, tied, uneven, fp8) every layout uses; empty =
  /// the first `<model stem>-*.recipe.yaml` next to the model (plans/).
  std::string rules_path;
  std::int64_t world = 0;  ///< `--world`, or nodes x gpus_per_node
  std::int64_t nodes = 0;
  std::int64_t gpus_per_node = 0;  ///< 0 = the hardware's
  std::optional<std::int64_t> seq_len;
  std::optional<std::int64_t> micro_batch;
  std::optional<std::int64_t> global_batch_tokens;
  std::string training_path;  ///< a recipe (or a file with a `training:` section)
  std::string budget;         ///< byte size text; empty = the hardware's HBM
  int top = 5;
  int max_exact = 24;
  SearchFormat format = SearchFormat::Text;
  std::string hardware = "h100";  ///< preset name or file
  std::string emit_recipe;        ///< write the best layout's recipe here
  int pick = 1;                   ///< which ranked layout `emit_recipe` writes (1-based)
  bool force = false;             ///< `emit_recipe` may replace an existing file
  bool explain_pruned = false;
  std::string fix;                  ///< `--fix pp=16,tp=8`: degrees held fixed
  bool fp8_gemm = false;            ///< `--fp8`: FP8 GEMMs in the cost model
  std::int64_t moe_node_limit = 0;  ///< `--moe-node-limit M` (0 = unlimited)
  /// `--kernels eager|fused`: training.kernels for every layout (empty: the --training
  /// file's, else eager).
  std::string kernels;
  /// `--schedules 1f1b,interleaved,zero_bubble`: the pipeline schedules enumerated (empty: all).
  std::string schedules;
  /// `--report PAGE`: also write the results as one HTML page (docs/report.md), also when
  /// nothing is ranked (E-SEARCH); the line saying so goes to `err`.
  std::string report;
  DiagFormat diag_format = DiagFormat::Text;
};

/// Each returns the process exit code. `out` receives data (tables, JSON),
/// `err` receives diagnostics. Logs go through spdlog (set up by main).
ExitCode run_compile(const CompileOptions& opt, FileSystem& fs, std::ostream& out,
                     std::ostream& err);
ExitCode run_validate(const CommonOptions& opt, FileSystem& fs, std::ostream& out,
                      std::ostream& err);
ExitCode run_inspect(const InspectOptions& opt, FileSystem& fs, std::ostream& out,
                     std::ostream& err);
/// `shardc memory`: per-rank training memory by stage and kind (table or
/// JSON), the peak rank, and the budget check (exit 1 with E-BUDGET when a
/// rank exceeds it; the report is printed either way).
ExitCode run_memory(const MemoryOptions& opt, FileSystem& fs, std::ostream& out, std::ostream& err);
ExitCode run_cost(const CostOptions& opt, FileSystem& fs, std::ostream& out, std::ostream& err);
ExitCode run_explain(const ExplainOptions& opt, FileSystem& fs, std::ostream& out,
                     std::ostream& err);
ExitCode run_verify(const VerifyOptions& opt, FileSystem& fs, std::ostream& out, std::ostream& err);
/// Exit 0 planned (summary and/or JSON written), 1 the plans are
/// incompatible (E-RESHARD-* diagnostics) or a MODEL RECIPE pair is invalid,
/// 2 usage, unreadable or malformed input.
ExitCode run_reshard(const ReshardOptions& opt, FileSystem& fs, std::ostream& out,
                     std::ostream& err);
/// `shardc report`: writes the page to `opt.out_file`. Exit 0 written, 1 the plan has
/// errors (E-BUDGET, E-RESHARD-*: the page of a plan is still written, with them), 2 usage,
/// unreadable input, an OUTDIR that is not a complete unchanged compile (E-REPORT-INPUT, no
/// page) or an unwritable file.
ExitCode run_report(const ReportOptions& opt, FileSystem& fs, std::ostream& out, std::ostream& err);
/// `shardc import`: reads a checkpoint (or model file) and writes the
/// compact model YAML or the plain inventory JSON (include/shardc/import.hpp).
ExitCode run_import(const ImportOptions& opt, FileSystem& fs, std::ostream& out, std::ostream& err);
ExitCode run_recipe(const RecipeOptions& opt, FileSystem& fs, std::ostream& out, std::ostream& err);
/// `shardc search`: exit 0 with the ranked layouts, 1 (E-SEARCH) when no layout is valid or
/// none fits the budget (the closest printed), 2 for unreadable input or an unknown hardware
/// preset (E-HARDWARE).
ExitCode run_search(const SearchOptions& opt, FileSystem& fs, std::ostream& out, std::ostream& err);
/// Prints the JSON Schema named `name` (model, recipe, plan, rank, reshard, manifest).
ExitCode run_schema(const std::string& name, std::ostream& out, std::ostream& err);

/// A command line the parser refused (an unknown option, a malformed or missing
/// value): reports E-USAGE ("COMMAND: MESSAGE", the hint naming `--help`) in
/// `format` to `err`; returns ExitCode::Usage. `command` is "" before a subcommand.
ExitCode report_usage_error(const std::string& command, const std::string& message,
                            DiagFormat format, std::ostream& err);

/// The version string, e.g. "0.1.0".
const char* version();

}  // namespace shardc
