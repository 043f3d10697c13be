// shardc command line: parses arguments with CLI11, sets up logging and
// hands a typed options struct to one driver entry point per subcommand.
// The driver never reads argv or writes to std::cout itself.
#include <unistd.h>

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>
#include <exception>
#include <functional>
#include <iostream>
#include <string>
#include <string_view>
#include <vector>

#include "shardc/driver.hpp"
#include "support/assert.hpp"
#include "support/byte_size.hpp"

namespace {

using shardc::ExitCode;

// A whole number >= `minimum` (0 or 1) of at most 18 digits: CLI11's NonNegativeNumber and
// PositiveNumber print a floating-point range up to DBL_MAX instead.
CLI::Validator whole_number(int minimum) {
  return {[minimum](std::string& text) -> std::string {
            if (text.empty() || text.size() > 18 ||
                text.find_first_not_of("0123456789") != std::string::npos ||
                (minimum > 0 && text.find_first_not_of('0') == std::string::npos))
              return std::string("expected a ") + (minimum > 0 ? "positive" : "non-negative") +
                     " integer, got '" + text + "'";
            return {};
          },
          minimum > 0 ? "INT>=1" : "INT>=0"};
}
const CLI::Validator kNonNegativeInt = whole_number(0);
const CLI::Validator kPositiveInt = whole_number(1);

// "" when `text` is a positive byte size such as 80GiB, else why not.
std::string byte_size_error(const std::string& text) {
  const auto bytes = shardc::parse_byte_size(text);
  if (bytes && *bytes > 0) return {};
  // "80G": a bare letter could be either unit.
  const std::size_t last = text.find_last_not_of(' ');
  if (last != std::string::npos &&
      std::string_view("KMGTPkmgtp").find(text[last]) != std::string_view::npos) {
    const std::string number = text.substr(0, last);
    if (shardc::parse_byte_size(number))
      return "'" + text + "' names no unit: write " + number + text[last] +
             "B (powers of 1000) or " + number + text[last] + "iB (powers of 1024)";
  }
  const std::size_t digits = text.find_first_not_of("0123456789. ");
  if (!bytes && digits != std::string::npos && digits > 0 &&
      shardc::parse_byte_size("1" + text.substr(digits)))
    return "'" + text + "' is too large: a positive byte size is at most 2^62 bytes (4 EiB)";
  return "expected a positive byte size such as 80GiB, 512MB or 1000000, got '" + text + "'";
}

// A positive byte size such as 80GiB.
const CLI::Validator kByteSize([](std::string& text) { return byte_size_error(text); }, "SIZE");

// A per-rank budget: a byte size, and a bare number below 1 MiB is taken for a forgotten
// unit (`--budget 80` is 80 bytes).
const CLI::Validator kBudgetSize(
    [](std::string& text) -> std::string {
      if (std::string error = byte_size_error(text); !error.empty()) return error;
      if (text.find_first_not_of("0123456789") == std::string::npos &&
          *shardc::parse_byte_size(text) < (1 << 20))
        return "'" + text + "' is " + text + " bytes: write the unit (" + text + "GiB, " + text +
               "GB)";
      return {};
    },
    "SIZE");

// A value that may not be empty (`--emit-recipe ""` wrote nothing and exited 0).
const CLI::Validator kNonEmpty(
    [](std::string& text) -> std::string {
      return text.find_first_not_of(" \t") == std::string::npos ? "an empty value: give one"
                                                                : std::string();
    },
    "");

// Options every subcommand shares, and the command that ran.
struct Cli {
  bool quiet = false;
  int verbose = 0;
  shardc::CommonOptions common;
  std::string diag_format = "text";
  std::function<ExitCode()> run;

  // Options as the driver takes them, once parsing is done.
  [[nodiscard]] shardc::CommonOptions options() const {
    shardc::CommonOptions options = common;
    options.leave_to_exit = true;  // main returns right after the command
    if (diag_format == "json") options.diag_format = shardc::DiagFormat::Json;
    if (diag_format == "github") options.diag_format = shardc::DiagFormat::Github;
    return options;
  }
};

void add_inputs(CLI::App& cmd, Cli& cli) {
  cmd.add_option(
         "MODEL", cli.common.model_path,
         "Model: a model file (YAML or JSON), a Hugging Face checkpoint directory (config.json + "
         "safetensors) or a .safetensors file")
      ->required();
  cmd.add_option("RECIPE", cli.common.recipe_path, "Sharding recipe (YAML)")->required();
  cmd.add_flag("--check-invariants", cli.common.check_invariants,
               "Prove the plan's internal invariants after planning (a violation is a shardc "
               "bug: exit 3)");
}

void add_strict(CLI::App& cmd, Cli& cli) {
  cmd.add_flag("--strict", cli.common.strict, "Treat warnings as errors (exit 1)");
}

void add_diag_options(CLI::App& cmd, Cli& cli) {
  cmd.add_option("--format", cli.diag_format, "Diagnostics format: text (default), json, github")
      ->check(CLI::IsMember({"text", "json", "github"}));
  add_strict(cmd, cli);
}

void add_budget(CLI::App& cmd, Cli& cli);

// `--diag-format`: the diagnostics format of a command whose `--format` is its output's.
CLI::Option* add_diag_format(CLI::App& cmd, Cli& cli) {
  return cmd.add_option("--diag-format", cli.diag_format, "Diagnostics format: text, json, github")
      ->check(CLI::IsMember({"text", "json", "github"}));
}

// `--format` of a command's output, one of `choices`.
void add_output_format(CLI::App& cmd, std::string& format, const std::string& description,
                       const std::vector<std::string>& choices) {
  cmd.add_option("--format", format, description)->check(CLI::IsMember(choices));
}

// Runs one driver command on the real file system, writing to stdout and stderr.
template <typename Options>
ExitCode run_on_disk(ExitCode (*command)(const Options&, shardc::FileSystem&, std::ostream&,
                                         std::ostream&),
                     const Options& options) {
  shardc::RealFileSystem fs;
  return command(options, fs, std::cout, std::cerr);
}

void add_compile(CLI::App& app, Cli& cli, shardc::CompileOptions& opt, bool& no_rank_files) {
  auto* cmd = app.add_subcommand("compile", "Write plan.json and per-rank files into OUTDIR");
  add_inputs(*cmd, cli);
  cmd->add_option("-o,--out", opt.out_dir, "Output directory")->required();
  auto* ranks = cmd->add_option("--ranks", opt.ranks,
                                "Rank files to write, e.g. 0-7,16,20-23 (default: all)");
  cmd->add_flag("--with-groups", opt.with_groups,
                "Also write the rank files of every rank in the buffer groups of --ranks, so "
                "`verify --ranks` can check them")
      ->needs(ranks);
  cmd->add_flag("--no-rank-files", no_rank_files, "Write plan.json only (removes old rank files)")
      ->excludes(ranks);
  cmd->add_flag("--force", opt.force, "Write into a non-empty directory not made by shardc");
  cmd->add_option("-j,--jobs", opt.jobs, "Rank-file writer threads (0 = one per core)")
      ->check(kNonNegativeInt);
  add_diag_options(*cmd, cli);
  add_budget(*cmd, cli);
  cmd->footer(
      "Example:\n  shardc compile llama.yaml tp8_fsdp.yaml -o out/ --ranks 0-7\n"
      "Writes out/plan.json and out/ranks/rank-<r>.json (r zero-padded to the width of the\n"
      "largest rank); a directory shardc wrote is\n"
      "marked with .shardc-output and may be rewritten; stale rank files are removed.\n"
      "A rank over the budget (--budget or training.budget) is E-BUDGET, as in validate:\n"
      "exit 1, nothing written. With the global -q/--quiet a compile prints nothing but\n"
      "its diagnostics (no summary on stdout).");
  cmd->callback([&] {
    opt.common = cli.options();
    opt.common.check_budget = true;
    opt.rank_files = !no_rank_files;
    cli.run = [&] {
      opt.quiet = cli.quiet;
      return run_on_disk(shardc::run_compile, opt);
    };
  });
}

// `--budget 80GiB`: a byte size (shardc/byte_size.hpp).
void add_budget(CLI::App& cmd, Cli& cli) {
  cmd.add_option_function<std::string>(
         "--budget",
         [&cli](const std::string& text) {
           cli.common.budget_bytes = shardc::parse_byte_size(text);
         },
         "Per-rank memory budget, e.g. 80GiB (overrides the recipe's training.budget); "
         "exit 1 with E-BUDGET when a rank exceeds it")
      ->check(kBudgetSize);
}

void add_validate(CLI::App& app, Cli& cli) {
  auto* cmd = app.add_subcommand("validate", "Check a recipe against a model; print diagnostics");
  add_inputs(*cmd, cli);
  add_diag_options(*cmd, cli);
  add_budget(*cmd, cli);
  cmd->footer(
      "Example:\n  shardc validate llama.yaml recipe.yaml --format github --strict\n"
      "Exit codes: 0 valid, 1 invalid (or warnings under --strict), 2 unreadable input.\n"
      "Text diagnostics go to stderr; json/github diagnostics go to stdout.");
  cmd->callback([&] {
    cli.run = [&] {
      shardc::CommonOptions options = cli.options();
      options.check_budget = true;
      return run_on_disk(shardc::run_validate, options);
    };
  });
}

void add_inspect(CLI::App& app, Cli& cli, shardc::InspectOptions& opt, std::string& format) {
  auto* cmd = app.add_subcommand("inspect", "Show what one rank holds");
  add_inputs(*cmd, cli);
  cmd->add_option("--rank", opt.rank, "Global rank")->required()->check(kNonNegativeInt);
  cmd->add_option("--match", opt.match,
                  "Only params whose FQN (or, for stacked experts, a source expert's FQN) "
                  "matches this glob");
  cmd->add_flag(
      "--summary", opt.summary,
      "Totals only: param bytes per kind on the rank's stage, buffer bytes (FSDP2 gathered "
      "peak and sum); no table");
  add_output_format(*cmd, format,
                    "text (default: the table, text diagnostics), json (the rank file, JSON "
                    "diagnostics), github (the table, GitHub annotations); table = text",
                    {"text", "table", "json", "github"});
  // Old spelling of the diagnostics format, kept hidden for scripts.
  add_diag_format(*cmd, cli)->group("");
  add_strict(*cmd, cli);
  cmd->footer("Example:\n  shardc inspect llama.yaml recipe.yaml --rank 17 --match '**.q_proj.*'");
  cmd->callback([&, cmd] {
    if (cmd->count("--diag-format") == 0 && (format == "json" || format == "github"))
      cli.diag_format = format;
    opt.common = cli.options();
    opt.format = format == "json" ? shardc::InspectFormat::Json : shardc::InspectFormat::Table;
    cli.run = [&] { return run_on_disk(shardc::run_inspect, opt); };
  });
}

void add_memory(CLI::App& app, Cli& cli, shardc::MemoryOptions& opt, std::string& format) {
  auto* cmd = app.add_subcommand("memory", "Per-rank training memory: will it fit?");
  add_inputs(*cmd, cli);
  add_budget(*cmd, cli);
  add_output_format(*cmd, format, "Output: table (default) or json", {"table", "json"});
  cmd->add_option("--ranks", opt.ranks, "Also list these ranks' breakdowns, e.g. 0,17,100-103");
  cmd->add_flag("--explain", opt.explain,
                "With a training shape: every activation term, its formula and its source");
  add_diag_format(*cmd, cli);
  add_strict(*cmd, cli);
  cmd->footer(
      "Counts per rank: params (padded FSDP shards), grads, master weights and optimizer\n"
      "state (recipe `training:`), FSDP2 / muon all-gather buffers; activations when the\n"
      "recipe gives `training.seq_len` (docs/memory.md). Exit 1 with E-BUDGET when a rank exceeds "
      "--budget (or training.budget).\n"
      "Example:\n  shardc memory llama.yaml recipe.yaml --budget 80GiB");
  cmd->callback([&] {
    opt.common = cli.options();
    opt.format = format == "json" ? shardc::MemoryFormat::Json : shardc::MemoryFormat::Table;
    cli.run = [&] { return run_on_disk(shardc::run_memory, opt); };
  });
}

void add_cost(CLI::App& app, Cli& cli, shardc::CostOptions& opt, std::string& format,
              std::string& reshard, std::string& tp_inputs) {
  auto* cmd = app.add_subcommand("cost", "Communication per training step per rank, by axis");
  add_inputs(*cmd, cli);
  add_output_format(*cmd, format, "Output: table (default) or json", {"table", "json"});
  cmd->add_option("--reshard-after-forward", reshard,
                  "FSDP2 reshard_after_forward: true, false, or default (torchtitan: not pp)")
      ->check(CLI::IsMember({"true", "false", "default"}));
  cmd->add_option("--tp-inputs", tp_inputs,
                  "TP input-gradient reductions: fused (one per block: Megatron, torchtitan) or "
                  "per-linear (parallelize_module on unfused q/k/v, gate/up)")
      ->check(CLI::IsMember({"fused", "per-linear"}));
  cmd->add_flag("--no-loss-parallel{false}", opt.loss_parallel,
                "The lm_head's logits are all-gathered (no vocab-parallel loss)");
  cmd->add_option("--ranks", opt.ranks, "Also list these ranks' terms, e.g. 0,17,100-103");
  cmd->add_flag("--explain", opt.explain, "Every term's bytes, formula and source");
  add_diag_format(*cmd, cli);
  add_strict(*cmd, cli);
  cmd->footer(
      "Bytes each rank sends per step (ring algorithm) by group role, mesh axes and\n"
      "collective: FSDP2 all-gather / reduce-scatter, HSDP and DP all-reduce, ZeRO,\n"
      "TP per layer, CP, EP all-to-all, PP send/recv; min / median / max over ranks, the\n"
      "peak rank. Needs the recipe's `training.seq_len` (docs/communication.md).\n"
      "Example:\n  shardc cost llama.yaml recipe.yaml --format json");
  cmd->callback([&] {
    opt.common = cli.options();
    opt.format = format == "json" ? shardc::MemoryFormat::Json : shardc::MemoryFormat::Table;
    if (reshard != "default") opt.reshard_after_forward = reshard == "true";
    opt.tp_per_linear = tp_inputs == "per-linear";
    cli.run = [&] { return run_on_disk(shardc::run_cost, opt); };
  });
}

void add_search(CLI::App& app, Cli& cli, shardc::SearchOptions& opt, std::string& format) {
  auto* cmd = app.add_subcommand("search", "Rank every valid layout of a model on N GPUs");
  cmd->add_option("MODEL", opt.model_path, "Model file (shardc.model/v1 or inventory)")->required();
  cmd->add_option("--rules", opt.rules_path,
                  "Recipe whose rule set every layout uses (default: <model stem>-*.recipe.yaml "
                  "next to the model)")
      ->check(kNonEmpty);
  cmd->add_option("--world", opt.world, "Number of GPUs")->check(kPositiveInt);
  cmd->add_option("--nodes", opt.nodes, "Nodes (with --gpus-per-node)")->check(kPositiveInt);
  cmd->add_option("--gpus-per-node", opt.gpus_per_node,
                  "GPUs per node, 1-1024 (default: the hardware's)")
      ->check(kPositiveInt)
      ->check(CLI::Range(1, 1024));
  cmd->add_option("--seq-len", opt.seq_len, "Tokens per sequence (default 4096)")
      ->check(CLI::Range(1, 1 << 24));
  cmd->add_option("--micro-batch", opt.micro_batch, "Sequences per micro-batch (default 1)")
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--global-batch-tokens", opt.global_batch_tokens,
                  "Tokens per optimizer step, a multiple of --seq-len (required, unless a "
                  "--training file gives global_batch_size)")
      ->check(kPositiveInt);
  cmd->add_option("--training", opt.training_path,
                  "A recipe (or a file of one `training:` section): optimizer, dtypes, shape")
      ->check(kNonEmpty);
  cmd->add_option("--budget", opt.budget,
                  "Per-rank memory budget, e.g. 80GiB or 80GB (default: the --training file's "
                  "`budget`, else the GPU's HBM)")
      ->check(kBudgetSize);
  cmd->add_option("--top", opt.top, "Layouts to rank (default 5)")->check(CLI::Range(1, 100));
  cmd->add_option("--max-planned", opt.max_exact, "Layouts planned exactly at most (default 24)")
      ->check(CLI::Range(1, 10000));
  add_output_format(*cmd, format, "Output: text (default) or json", {"text", "json"});
  cmd->add_option("--hardware", opt.hardware,
                  "a100, h100 (default), h800, h200, b200, mi300x, or a hardware file")
      ->check(kNonEmpty);
  cmd->add_option("--emit-recipe", opt.emit_recipe,
                  "Write the chosen layout as a recipe (not over an existing file without "
                  "--force, never over the model or the rules)")
      ->check(kNonEmpty);
  cmd->add_flag("--force", opt.force, "--emit-recipe and --report may replace an existing file");
  cmd->add_option("--pick", opt.pick, "Which ranked layout --emit-recipe writes (default 1)")
      ->check(CLI::Range(1, 100));
  cmd->add_flag("--explain-pruned", opt.explain_pruned, "Count the pruned layouts by reason");
  cmd->add_option("--report", opt.report,
                  "Also write the results as one self-contained HTML page (docs/report.md)")
      ->check(kNonEmpty);
  cmd->add_option("--fix", opt.fix,
                  "Hold degrees fixed, e.g. pp=16,tp=8,cp=1 (axes pp, dp_replicate, dp_shard, "
                  "cp, tp, ep: each once, each dividing the world)")
      ->check(kNonEmpty);
  cmd->add_flag("--fp8", opt.fp8_gemm,
                "The linear layers' GEMMs run in FP8 (2x the BF16 peak; attention stays BF16)");
  cmd->add_option("--moe-node-limit", opt.moe_node_limit,
                  "Node-limited routing (MoE): each token to experts on at most M nodes, sent once "
                  "per node and forwarded over NVLink (DeepSeek-V3 / DeepEP)")
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--kernels", opt.kernels,
                  "Activation model: eager (transformers' modules, default) or fused "
                  "(Megatron-Core + Transformer Engine)")
      ->check(CLI::IsMember({"eager", "fused"}));
  cmd->add_option("--schedules", opt.schedules,
                  "Pipeline schedules your framework runs, e.g. 1f1b,interleaved, of 1f1b, "
                  "interleaved, gpipe, zero_bubble, zbv, dualpipev (default: 1f1b, "
                  "interleaved, zbv, dualpipev: torch's schedules but gpipe, which 1f1b "
                  "dominates)")
      ->check(kNonEmpty);
  add_diag_format(*cmd, cli);
  cmd->footer(
      "Enumerates pp x dp_replicate x dp_shard x cp x tp (x ep for MoE) with recompute, sequence\n"
      "parallel, schedule and ZeRO-1, estimates each step (docs/search.md) and plans the best\n"
      "exactly (the planner and the memory model of `validate` and `memory`).\n"
      "Example:\n  shardc search plans/llama-3.1-405b.model.yaml --world 16384 --hardware h100 \\\n"
      "    --seq-len 8192 --global-batch-tokens 16777216 --budget 80GB");
  cmd->callback([&] {
    opt.diag_format = cli.options().diag_format;
    opt.format = format == "json" ? shardc::SearchFormat::Json : shardc::SearchFormat::Text;
    cli.run = [&] { return run_on_disk(shardc::run_search, opt); };
  });
}

void add_explain(CLI::App& app, Cli& cli, shardc::ExplainOptions& opt) {
  auto* cmd = app.add_subcommand("explain", "Explain one parameter: rule, placements, shards");
  add_inputs(*cmd, cli);
  cmd->add_option("PARAM_FQN", opt.fqn, "Parameter name (or a stacked expert's source name)")
      ->required();
  add_diag_options(*cmd, cli);
  cmd->footer(
      "Example:\n  shardc explain llama.yaml recipe.yaml model.layers.0.self_attn.q_proj.weight");
  cmd->callback([&] {
    opt.common = cli.options();
    cli.run = [&] { return run_on_disk(shardc::run_explain, opt); };
  });
}

void add_verify(CLI::App& app, Cli& cli, shardc::VerifyOptions& opt) {
  auto* cmd = app.add_subcommand("verify", "Check the invariants of a compiled OUTDIR");
  cmd->add_option("OUTDIR", opt.out_dir, "Directory written by shardc compile")->required();
  cmd->add_option("--ranks", opt.ranks,
                  "Ranks whose buffers to check (default: every rank file present); the files "
                  "of every rank in their groups must be present too");
  cmd->add_option("--max-elements", opt.max_elements,
                  "Params with more global elements are box-checked, not simulated")
      ->check(CLI::Range(std::int64_t{0}, std::int64_t{1} << 30));
  cmd->add_flag("--strict", opt.strict,
                "Files in OUTDIR/ranks that are not part of the compile fail the run");
  cmd->add_option("--against", opt.against,
                  "MODEL RECIPE: plan them again; plan.json must be exactly their plan")
      ->expected(2);
  cmd->footer(
      "Simulates every buffer layout in the rank files (pack, all-gather, unpack with\n"
      "element value = global flat index) and checks it rebuilds the right tensor.\n"
      "Refuses a directory without manifest.json (an interrupted compile) and checks\n"
      "every file it reads against the size and sha256 manifest.json recorded.\n"
      "Exit codes: 0 all layouts round-trip, 1 mismatches (listed), a file changed after\n"
      "the compile or a group not verifiable, 2 unreadable input or incomplete compile.\n"
      "Example:\n  shardc compile m.yaml r.yaml -o out/ && shardc verify out/ --ranks 0-63");
  cmd->callback([&] { cli.run = [&] { return run_on_disk(shardc::run_verify, opt); }; });
}

void add_reshard(CLI::App& app, Cli& cli, shardc::ReshardOptions& opt, std::string& format) {
  auto* cmd = app.add_subcommand("reshard", "List the transfers from plan A's shards to plan B's");
  cmd->add_option("PLANS", opt.inputs,
                  "2 or 4 paths: PLAN_A PLAN_B (OUTDIRs of compile or plan.json files), or "
                  "MODEL_A RECIPE_A MODEL_B RECIPE_B")
      ->required()
      ->expected(2, 4)
      ->type_name("PATH...");
  cmd->add_option("--ranks", opt.ranks, "Plan-B ranks listed in the JSON (default: all)");
  cmd->add_option("-o,--out", opt.out_file, "Write the JSON listing to this file");
  add_output_format(*cmd, format, "Output: summary (default) or json (listing on stdout)",
                    {"summary", "json"});
  cmd->add_option("--ranks-per-node", opt.ranks_per_node,
                  "Ranks per node (node = rank / N): read from a replica on the same node first")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 31));
  add_diag_format(*cmd, cli);
  cmd->footer(
      "Each plan-B rank's shard of every param is cut into boxes, each read from one\n"
      "plan-A rank: itself when it already holds the box, else the lowest holder on its\n"
      "node (--ranks-per-node), else the lowest holder. Prints a summary; -o FILE or\n"
      "--format json writes the per-rank listing (schema: shardc schema reshard).\n"
      "Exit codes: 0 planned, 1 the plans differ (E-RESHARD-*), 2 unreadable input.\n"
      "Example:\n  shardc reshard out/tp8/ out/tp4/ -o reshard.json --ranks 0-7");
  cmd->callback([&] {
    opt.json = format == "json";
    cli.run = [&] {
      opt.diag_format = cli.options().diag_format;
      return run_on_disk(shardc::run_reshard, opt);
    };
  });
}

void add_report(CLI::App& app, Cli& cli, shardc::ReportOptions& opt) {
  auto* cmd = app.add_subcommand("report", "Write one self-contained HTML page of a plan");
  cmd->add_option("INPUTS", opt.inputs,
                  "MODEL RECIPE, or a compiled OUTDIR; with --reshard PLAN_A PLAN_B (OUTDIRs or "
                  "plan.json files) or MODEL_A RECIPE_A MODEL_B RECIPE_B")
      ->required()
      ->expected(1, 4);
  cmd->add_option("-o,--out", opt.out_file, "The HTML file to write")->required();
  cmd->add_flag("--reshard", opt.reshard, "The page of a reshard from plan A to plan B");
  cmd->add_option("--ranks", opt.ranks,
                  "Ranks whose params tables and buffers the page embeds (default: the peak "
                  "rank and each stage's first rank; at most 64)");
  cmd->add_option("--ranks-per-node", opt.ranks_per_node,
                  "--reshard: ranks per node (source choice, heatmap groups)")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 31));
  add_budget(*cmd, cli);
  add_diag_format(*cmd, cli);
  add_strict(*cmd, cli);
  cmd->footer(
      "One HTML file, inline SVG and CSS and a small script, no network: memory per stage and\n"
      "kind, the meshes as grids, a rank's params and buffers, the largest params, the\n"
      "diagnostics with their source lines; an OUTDIR's page is read from its files (plan.json,\n"
      "every rank file's memory); --reshard: bytes moved between rank groups (docs/report.md).\n"
      "Exit 1 when the plan has errors (the page is still written); 2 for an OUTDIR that is\n"
      "not a complete, unchanged compile (E-REPORT-INPUT, no page).\n"
      "Example:\n  shardc report llama.yaml recipe.yaml -o report.html\n"
      "  shardc report out/ -o report.html");
  cmd->callback([&] {
    cli.run = [&] {
      opt.common = cli.options();
      return run_on_disk(shardc::run_report, opt);
    };
  });
}

void add_import(CLI::App& app, Cli& cli, shardc::ImportOptions& opt, std::string& format) {
  auto* cmd = app.add_subcommand(
      "import", "Read a checkpoint (config.json + safetensors headers) and write a model file");
  cmd->add_option("PATH", opt.path,
                  "Checkpoint directory, .safetensors file, or model file / inventory JSON")
      ->required();
  cmd->add_option("-o,--out", opt.output, "Output file, written atomically (default: stdout)");
  add_output_format(*cmd, format, "yaml (compact model, default) or json (plain inventory)",
                    {"yaml", "json"});
  cmd->add_option("--transformers", opt.transformers_major,
                  "Module order of this transformers major version: 4 (default) or 5; they "
                  "differ for Qwen3-MoE (5 registers experts before the router)")
      ->check(CLI::IsMember({4, 5}));
  add_diag_format(*cmd, cli);
  cmd->footer(
      "Reads only the safetensors headers, never the weights. Params come out in module\n"
      "(named_parameters) order for known architectures; others get natural order and a\n"
      "W-MODULE-ORDER warning. FSDP2 and muon offsets follow that order: give the\n"
      "transformers major version your runtime uses with --transformers.\n"
      "Example:\n  shardc import ~/ckpt/Llama-3.1-8B -o llama-3.1-8b.model.yaml");
  cmd->callback([&] {
    opt.format = format == "json" ? shardc::ImportFormat::Json : shardc::ImportFormat::Yaml;
    opt.diag_format = cli.options().diag_format;
    cli.run = [&] { return run_on_disk(shardc::run_import, opt); };
  });
}

void add_recipe(CLI::App& app, Cli& cli, shardc::RecipeOptions& opt) {
  auto* cmd = app.add_subcommand(
      "recipe", "Write a recipe from another framework's plan (transformers' tp_plan)");
  cmd->add_option("--from-hf-tp-plan", opt.hf_tp_plan_path,
                  "transformers' tensor-parallel plan, as tools/hf_tp_plan.py writes it")
      ->required();
  cmd->add_option("MODEL", opt.model_path, "Checkpoint directory, .safetensors file or model file")
      ->required();
  cmd->add_option("--tp", opt.tp_size, "Ranks on the tp axis")
      ->required()
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{2147483647}));
  cmd->add_option("--ep", opt.ep_size,
                  "Ranks on the ep axis: translate the dump's ep_plan (grouped_gemm) into experts "
                  "entries (transformers needs --ep = --tp without FSDP)")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{2147483647}));
  cmd->add_option("-o,--out", opt.output, "Output file, written atomically (default: stdout)");
  add_diag_format(*cmd, cli);
  cmd->footer(
      "Each style of the plan becomes the placement transformers gives it (colwise: weight\n"
      "Shard(-2), bias Shard(-1); rowwise: weight Shard(-1); embedding_rowwise: Shard(0);\n"
      "packed_*: the same with packed parts); params the plan does not name are replicated.\n"
      "MoE plans: docs/hf-moe-tp-plans.md; with --ep the ep_plan's grouped_gemm params\n"
      "become experts entries (Shard(0) of the stacked experts on ep), overriding the\n"
      "tp_plan's entries for those modules as transformers does.\n"
      "Example:\n  tools/hf_tp_plan.py ~/ckpt/Llama-3.1-8B -o tp_plan.json\n"
      "  shardc recipe --from-hf-tp-plan tp_plan.json ~/ckpt/Llama-3.1-8B --tp 8 -o "
      "tp8.recipe.yaml");
  cmd->callback([&] {
    opt.diag_format = cli.options().diag_format;
    cli.run = [&] { return run_on_disk(shardc::run_recipe, opt); };
  });
}

void add_schema(CLI::App& app, Cli& cli, std::string& name) {
  auto* cmd = app.add_subcommand(
      "schema",
      "Print a JSON Schema: model, recipe, plan, rank, reshard, manifest, memory or cost");
  cmd->add_option("NAME", name, "Schema name")->required();
  cmd->footer("Example:\n  shardc schema plan > plan.schema.json");
  cmd->callback([&] { cli.run = [&] { return shardc::run_schema(name, std::cout, std::cerr); }; });
}

void setup_logging(const Cli& cli) {
  auto logger = spdlog::stderr_color_mt("shardc");
  logger->set_pattern("[%^%l%$] %v");
  spdlog::set_default_logger(logger);
  spdlog::level::level_enum level = spdlog::level::warn;
  if (cli.verbose == 1) level = spdlog::level::info;
  if (cli.verbose >= 2) level = spdlog::level::debug;
  if (cli.quiet) level = spdlog::level::err;
  spdlog::set_level(level);
}

// The diagnostics format a refused command line asked for (the parse did not get to
// set it): its last spelling, "--diag-format json" or "--diag-format=json"; for the
// commands whose --format is the diagnostics' (validate, compile, explain), --format too.
shardc::DiagFormat requested_diag_format(const std::string& command, int argc, char** argv) {
  shardc::DiagFormat format = shardc::DiagFormat::Text;
  const bool format_is_diagnostics =
      command == "validate" || command == "compile" || command == "explain";
  const std::string_view flag = format_is_diagnostics ? "--format" : "--diag-format";
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    std::string_view value;
    if (arg == flag && i + 1 < argc) {
      value = argv[i + 1];
    } else if (arg.size() > flag.size() && arg.substr(0, flag.size()) == flag &&
               arg[flag.size()] == '=') {
      value = arg.substr(flag.size() + 1);
    }
    if (value == "json") format = shardc::DiagFormat::Json;
    if (value == "github") format = shardc::DiagFormat::Github;
    if (value == "text") format = shardc::DiagFormat::Text;
  }
  return format;
}

int run(int argc, char** argv) {
  CLI::App app{"shardc: compile a sharding recipe and a model into per-rank plans"};
  app.require_subcommand(1);
  app.fallthrough();  // global flags also work after the subcommand
  app.set_version_flag("--version", shardc::version());
  Cli cli;
  cli.common.progress = ::isatty(2) != 0;
  app.add_flag("-q,--quiet", cli.quiet, "Only log errors");
  app.add_flag("-v,--verbose", cli.verbose, "More logging (-v info, -vv debug)");
  shardc::CompileOptions compile;
  bool no_rank_files = false;
  shardc::InspectOptions inspect;
  std::string inspect_format = "table";
  shardc::ExplainOptions explain;
  shardc::MemoryOptions memory;
  std::string memory_format = "table";
  shardc::SearchOptions search;
  std::string search_format = "text";
  shardc::VerifyOptions verify;
  std::string schema;
  shardc::ReshardOptions reshard;
  std::string reshard_format = "summary";
  shardc::ImportOptions import_opt;
  std::string import_format = "yaml";
  add_compile(app, cli, compile, no_rank_files);
  add_validate(app, cli);
  add_inspect(app, cli, inspect, inspect_format);
  add_memory(app, cli, memory, memory_format);
  shardc::CostOptions cost;
  std::string cost_format = "table";
  std::string cost_reshard = "default";
  std::string cost_tp_inputs = "fused";
  add_cost(app, cli, cost, cost_format, cost_reshard, cost_tp_inputs);
  add_search(app, cli, search, search_format);
  add_explain(app, cli, explain);
  add_verify(app, cli, verify);
  add_reshard(app, cli, reshard, reshard_format);
  add_import(app, cli, import_opt, import_format);
  shardc::ReportOptions report_opt;
  add_report(app, cli, report_opt);
  shardc::RecipeOptions recipe_opt;
  add_recipe(app, cli, recipe_opt);
  add_schema(app, cli, schema);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version are ParseErrors that exit 0: CLI11 prints them.
    if (e.get_exit_code() == 0) return app.exit(e);
    std::string command;
    for (const CLI::App* sub : app.get_subcommands()) command = sub->get_name();
    // Where the command prints its own json / github diagnostics: stdout for the commands
    // whose stdout holds nothing else then (validate, import, recipe, reshard, report).
    const shardc::DiagFormat format = requested_diag_format(command, argc, argv);
    const bool on_stdout = format != shardc::DiagFormat::Text &&
                           (command == "validate" || command == "import" || command == "recipe" ||
                            command == "reshard" || command == "report");
    return static_cast<int>(
        shardc::report_usage_error(command, e.what(), format, on_stdout ? std::cout : std::cerr));
  }
  setup_logging(cli);
  return static_cast<int>(cli.run());
}

}  // namespace

// The one exception boundary: a broken invariant (SHARDC_ASSERT, check_plan)
// or any other escaped exception is a shardc bug, exit 3 (ExitCode::Internal).
int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const shardc::InternalError& e) {
    std::cerr << "shardc: internal error: " << e.what() << "\n";
  } catch (const std::bad_alloc&) {
    std::cerr << "shardc: internal error: out of memory\n";
  } catch (const std::exception& e) {
    std::cerr << "shardc: internal error: " << e.what() << "\n";
  } catch (...) {
    std::cerr << "shardc: internal error\n";
  }
  std::cerr << "shardc: this is a bug in shardc; please report it with the command and inputs\n";
  return static_cast<int>(ExitCode::Internal);
}
