// `shardc search`: reads the model, the rule set, the training shape and the
// hardware, runs the layout search (src/search/search.hpp) and prints
// the ranked table or JSON (schemas/search.schema.json); `--emit-recipe`
// writes the chosen layout's recipe.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <ostream>
#include <sstream>

#include "driver/session.hpp"
#include "driver/text_format.hpp"
#include "frontend/frontend.hpp"
#include "report/report.hpp"
#include "search/search.hpp"
#include "support/byte_size.hpp"

namespace shardc {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

std::string fixed(double value, int digits) {
  std::array<char, 64> buf{};
  std::snprintf(buf.data(), buf.size(), "%.*f", digits, value);
  return buf.data();
}

std::string gib(double bytes) { return fixed(bytes / kGiB, 2); }

std::string json_string(std::string_view text) {
  std::string out = "\"";
  for (const char ch : text) {
    const auto byte = static_cast<unsigned char>(ch);
    if (ch == '"' || ch == '\\') {
      out += '\\';
      out += ch;
    } else if (byte < 0x20) {
      std::array<char, 8> buf{};
      std::snprintf(buf.data(), buf.size(), "\\u%04x", byte);
      out += buf.data();
    } else {
      out += ch;
    }
  }
  return out + "\"";
}

std::string json_number(double value) {
  std::array<char, 64> buf{};
  std::snprintf(buf.data(), buf.size(), "%.6g", value);
  return buf.data();
}

std::optional<SourceFile> read_file(FileSystem& fs, const std::string& path, const char* what,
                                    DiagCode code, driver::Session& session) {
  std::optional<SourceFile> file = driver::read_input(
      fs, path, what, code, "check the path; inputs are limited to 256 MiB", session);
  if (file) session.sources[path] = file->text;
  return file;
}

// The default rule set: the first `<stem>-*.recipe.yaml` next to the model.
std::string default_rules_path(FileSystem& fs, const std::string& model_path) {
  const std::size_t slash = model_path.find_last_of('/');
  const std::string dir = slash == std::string::npos ? "." : model_path.substr(0, slash);
  std::string base = slash == std::string::npos ? model_path : model_path.substr(slash + 1);
  const std::size_t dot = base.find(".model.");
  if (dot == std::string::npos) return {};
  const std::string stem = base.substr(0, dot) + "-";
  auto entries = fs.list_dir(dir);
  if (!entries) return {};
  std::sort(entries->begin(), entries->end());
  for (const std::string& name : *entries) {
    if (name.starts_with(stem) && name.ends_with(".recipe.yaml")) return dir + "/" + name;
  }
  return {};
}

void print_terms(const CheckedLayout& checked, int rank, std::ostream& out) {
  const StepCost& cost = checked.cost;
  out << "#" << rank << " " << layout_name(checked.layout) << ": step " << fixed(cost.step, 3)
      << " s = compute " << fixed(cost.compute, 3) << " + recompute " << fixed(cost.recompute, 3)
      << " + imbalance " << fixed(cost.imbalance, 3) << " + bubble " << fixed(cost.bubble, 3)
      << " + exposed comm " << fixed(cost.exposed_comm, 3) << " + optimizer "
      << fixed(cost.optimizer, 3) << "\n";
  for (const AxisCommTime& term : cost.comm) {
    out << "    comm " << term.axis << " (" << term.collective << ", "
        << (term.inter_node ? "inter-node" : "intra-node") << "): " << fixed(term.bytes / 1e9, 2)
        << " GB per rank, " << fixed(term.seconds, 3) << " s, exposed " << fixed(term.exposed, 3)
        << " s; overlap: " << term.overlap << "\n";
  }
  out << "    memory: peak " << gib(static_cast<double>(checked.peak)) << " GiB on rank "
      << checked.peak_rank << " (stage " << checked.peak_stage << "; activations "
      << gib(static_cast<double>(checked.activations)) << " GiB; phase-1 estimate "
      << gib(checked.estimated_memory) << " GiB)\n";
}

std::string layout_json(const CheckedLayout& checked, std::int64_t budget) {
  const Layout& layout = checked.layout;
  std::ostringstream json;
  json << "{\"layout\": " << json_string(layout_name(layout)) << ", \"pp\": " << layout.pp
       << ", \"dp_replicate\": " << layout.dp_replicate << ", \"dp_shard\": " << layout.dp_shard
       << ", \"cp\": " << layout.cp << ", \"tp\": " << layout.tp << ", \"ep\": " << layout.ep
       << ", \"efsdp\": " << layout.efsdp
       << ", \"recompute\": " << json_string(recompute_name(layout.recompute))
       << ", \"recompute_block\": " << layout.recompute_block
       << ", \"sequence_parallel\": " << (layout.sequence_parallel ? "true" : "false")
       << ", \"schedule\": " << json_string(pipeline_schedule_name(layout.schedule))
       << ", \"virtual_stages\": " << layout.virtual_stages
       << ", \"zero1\": " << (layout.zero1 ? "true" : "false")
       << ", \"reshard_after_forward\": " << (layout.reshard_after_forward ? "true" : "false")
       << ", \"vocab_padding\": " << (layout.vocab_padding ? "true" : "false")
       << ", \"valid\": " << (checked.valid ? "true" : "false");
  if (!checked.valid) {
    json << ", \"first_code\": " << json_string(checked.first_code)
         << ", \"first_message\": " << json_string(checked.first_message) << "}";
    return json.str();
  }
  const StepCost& cost = checked.cost;
  json << ", \"peak_bytes\": " << checked.peak << ", \"peak_rank\": " << checked.peak_rank
       << ", \"peak_stage\": " << checked.peak_stage
       << ", \"activation_bytes\": " << checked.activations
       << ", \"headroom_bytes\": " << (budget - checked.peak)
       << ", \"fits\": " << (checked.fits ? "true" : "false")
       << ", \"estimated_memory_bytes\": " << std::llround(checked.estimated_memory)
       << ", \"step_seconds\": " << json_number(cost.step)
       << ", \"compute_seconds\": " << json_number(cost.compute)
       << ", \"recompute_seconds\": " << json_number(cost.recompute)
       << ", \"imbalance_seconds\": " << json_number(cost.imbalance)
       << ", \"bubble_seconds\": " << json_number(cost.bubble)
       << ", \"exposed_comm_seconds\": " << json_number(cost.exposed_comm)
       << ", \"optimizer_seconds\": " << json_number(cost.optimizer)
       << ", \"tokens_per_second_per_gpu\": " << json_number(cost.tokens_per_second_per_gpu)
       << ", \"mfu\": " << json_number(cost.mfu)
       << ", \"flops_per_token\": " << json_number(cost.flops_per_token)
       << ", \"dominant\": " << json_string(cost.dominant) << ", \"comm\": [";
  for (std::size_t i = 0; i < cost.comm.size(); ++i) {
    const AxisCommTime& term = cost.comm[i];
    json << (i > 0 ? ", " : "") << "{\"axis\": " << json_string(term.axis)
         << ", \"collective\": " << json_string(term.collective)
         << ", \"bytes\": " << std::llround(term.bytes)
         << ", \"inter_node\": " << (term.inter_node ? "true" : "false")
         << ", \"seconds\": " << json_number(term.seconds)
         << ", \"exposed_seconds\": " << json_number(term.exposed)
         << ", \"overlap\": " << json_string(term.overlap) << "}";
  }
  json << "]}";
  return json.str();
}

// "1, 2, 4, 8" (every divisor of `value`; the first and last 6 of a longer list).
std::string divisor_list(std::int64_t value) {
  const std::vector<std::int64_t> all = divisors(value);
  std::string out;
  for (std::size_t i = 0; i < all.size(); ++i) {
    if (all.size() > 12 && i >= 6 && i < all.size() - 6) {
      if (i == 6) out += ", ...";
      continue;
    }
    out += (out.empty() ? "" : ", ") + std::to_string(all[i]);
  }
  return out;
}

// "master weights float32, grads bfloat16": the training line's dtypes (text and page).
std::string training_dtypes_text(const TrainingSpec& training) {
  return "master weights " +
         (training.master_weights ? std::string(dtype_name(*training.master_weights))
                                  : std::string("none")) +
         (training.grad_dtype ? ", grads " + std::string(dtype_name(*training.grad_dtype))
                              : std::string());
}

ExitCode finish(const SearchOptions& opt, driver::Session& session, std::ostream& err,
                ExitCode code) {
  CommonOptions common;
  common.diag_format = opt.diag_format;
  driver::print_diagnostics(common, session, err);
  return code;
}

}  // namespace

ExitCode run_search(const SearchOptions& opt, FileSystem& fs, std::ostream& out,
                    std::ostream& err) {
  CommonOptions common;
  driver::SessionScope scope(common);
  driver::Session& session = *scope;
  const SourceLoc cli{};
  // A refused option: E-SEARCH-OPTION (exit 2) with the value it takes as the hint.
  const auto option_error = [&](const std::string& message, const std::string& hint) {
    session.sink.error(DiagCode::ESearchOption, cli, message, hint);
    return finish(opt, session, err, ExitCode::Usage);
  };
  // Hardware: a preset or a file.
  std::optional<Hardware> hw = hardware_preset(opt.hardware);
  if (!hw) {
    std::string error;
    auto text = fs.read(opt.hardware, driver::kMaxInputBytes, error);
    if (!text) {
      std::string names;
      for (const std::string& preset : hardware_preset_names())
        names += (names.empty() ? "" : ", ") + preset;
      session.sink.error(
          DiagCode::EHardware, cli,
          "unknown hardware preset `" + opt.hardware + "` (and no such file: " + error + ")",
          "presets: " + names + "; or a file of `key: value` lines (docs/search.md)");
      return finish(opt, session, err, ExitCode::Usage);
    }
    std::string hint;
    hw = parse_hardware_text(*text, error, &hint);
    if (!hw) {
      session.sink.error(DiagCode::EHardware, SourceLoc{opt.hardware, 0, 0}, error, hint);
      return finish(opt, session, err, ExitCode::Usage);
    }
  }
  if (opt.gpus_per_node > 0) hw->gpus_per_node = opt.gpus_per_node;
  if (opt.world > 0 && opt.nodes > 0 && opt.world != opt.nodes * hw->gpus_per_node) {
    return option_error("--world " + std::to_string(opt.world) + " is not --nodes " +
                            std::to_string(opt.nodes) + " x " + std::to_string(hw->gpus_per_node) +
                            " GPUs per node",
                        "give one of them (--gpus-per-node sets the node size)");
  }
  const std::int64_t world = opt.world > 0 ? opt.world : opt.nodes * hw->gpus_per_node;
  if (world < 1 || world > limits::kMaxWorld) {
    return option_error("no world size: give --world N or --nodes K [--gpus-per-node G]",
                        "1 <= N <= " + std::to_string(limits::kMaxWorld));
  }
  // Model and rule set.
  auto model_file = read_file(fs, opt.model_path, "model", DiagCode::EModel, session);
  if (!model_file) return finish(opt, session, err, ExitCode::Usage);
  std::optional<Model> model = parse_model(*model_file, session.sink, false);
  if (!model) return finish(opt, session, err, ExitCode::Usage);
  const std::string rules_path =
      opt.rules_path.empty() ? default_rules_path(fs, opt.model_path) : opt.rules_path;
  if (rules_path.empty()) {
    return option_error(
        "no rule set: none named `<model stem>-*.recipe.yaml` lies next to the "
        "model",
        "give --rules RECIPE, a recipe for this architecture (e.g. one of "
        "plans/): its rules, experts, tied and uneven sections are used");
  }
  auto rules_file = read_file(fs, rules_path, "rules recipe", DiagCode::ERecipe, session);
  if (!rules_file) return finish(opt, session, err, ExitCode::Usage);
  std::optional<Recipe> rules = parse_recipe(*rules_file, session.sink, false);
  if (!rules) return finish(opt, session, err, ExitCode::Usage);
  if (opt.pick > opt.top)
    return option_error("--pick " + std::to_string(opt.pick) + " is past the " +
                            std::to_string(opt.top) + " layouts --top ranks",
                        "give --pick 1 to " + std::to_string(opt.top) + ", or raise --top");
  if (opt.pick != 1 && opt.emit_recipe.empty()) {
    return option_error(
        "--pick chooses the layout --emit-recipe writes, and no --emit-recipe "
        "is given",
        "give --emit-recipe FILE, or leave --pick out");
  }
  // --emit-recipe and --report: never over the inputs or each other, over an existing
  // file only with --force, into an existing directory (checked before the search runs).
  const auto same_path = [](const std::string& lhs, const std::string& rhs) {
    return std::filesystem::absolute(lhs).lexically_normal() ==
           std::filesystem::absolute(rhs).lexically_normal();
  };
  for (const auto& [option, path] :
       {std::pair<std::string, std::string>{"--emit-recipe", opt.emit_recipe},
        {"--report", opt.report}}) {
    if (path.empty()) continue;
    const std::string named = option + " '" + path + "'";
    if (same_path(path, opt.model_path) || same_path(path, rules_path) ||
        (!opt.training_path.empty() && same_path(path, opt.training_path)) ||
        (!opt.hardware.empty() && same_path(path, opt.hardware)))
      return option_error(named + " is an input search reads", "give another path");
    if (option == "--report" && !opt.emit_recipe.empty() && same_path(path, opt.emit_recipe))
      return option_error(named + " is also --emit-recipe's path",
                          "give the page and the recipe two paths");
    std::error_code code;
    if (std::filesystem::is_directory(path, code))
      return option_error(
          named + " is a directory",
          "give a file path, e.g. " + (std::filesystem::path(path) /
                                       (option == "--report" ? "search.html" : "best.recipe.yaml"))
                                          .string());
    const std::filesystem::path parent = std::filesystem::path(path).parent_path();
    if (!parent.empty() && !std::filesystem::is_directory(parent, code))
      return option_error(named + ": no directory '" + parent.string() + "'",
                          "create it first, or give a path in an existing directory");
    std::int64_t existing_size = 0;
    std::string exists_error;
    if (!opt.force && fs.read_range(path, 0, 0, existing_size, exists_error).has_value())
      return option_error(named + " exists", "give --force to replace it, or another path");
  }
  // Training: the file's section, then the flags.
  TrainingSpec training;
  training.master_weights = DType::Float32;
  if (!opt.training_path.empty()) {
    auto tf = read_file(fs, opt.training_path, "training", DiagCode::ERecipe, session);
    if (!tf) return finish(opt, session, err, ExitCode::Usage);
    SourceFile wrapped = *tf;
    if (wrapped.text.find("format:") == std::string::npos) {
      // A bare `training:` section: the rest of a minimal recipe goes AFTER it, so
      // every line and column a diagnostic names is the file's own.
      if (!wrapped.text.empty() && wrapped.text.back() != '\n') wrapped.text += '\n';
      wrapped.text += "format: shardc.recipe/v1\nmesh: [{name: dp, size: 1}]\nrules: []\n";
    }
    auto parsed = parse_recipe(wrapped, session.sink, false);
    if (!parsed) return finish(opt, session, err, ExitCode::Usage);
    training = parsed->training;
    // The flags' defaults where the file is silent (master weights in float32, flash
    // attention), so a file and flags describing one shape give one answer.
    if (training.master_weights_loc.line == 0) training.master_weights = DType::Float32;
    if (training.shape.attention_loc.line == 0) training.shape.attention = AttentionImpl::Flash;
    // The layout's own choices: search enumerates them (a schedule through --schedules,
    // the node size through --hardware / --gpus-per-node); a file that sets one is refused,
    // never silently overridden.
    const TrainingShape& written = training.shape;
    struct LayoutKey {
      const SourceLoc* loc;
      const char* key;
      const char* hint;
    };
    const std::array<LayoutKey, 4> layout_keys = {{
        {&written.pipeline_schedule.loc, "pipeline_schedule",
         "leave it out; --schedules names the schedules your framework runs (e.g. "
         "--schedules gpipe)"},
        {&written.context_parallel_loc, "context_parallel",
         "leave it out; search enumerates cp per layout (--fix cp=N holds a degree)"},
        {&written.sequence_parallel_loc, "sequence_parallel",
         "leave it out; search enumerates sequence parallel per layout with tp > 1"},
        {&written.ranks_per_node_loc, "ranks_per_node",
         "leave it out; --gpus-per-node (or the --hardware preset) sets the node size"},
    }};
    for (const LayoutKey& key : layout_keys) {
      if (key.loc->line == 0) continue;
      session.sink.error(
          DiagCode::ETraining, *key.loc,
          std::string("search chooses the layout: the training file may not set `") + key.key + "`",
          key.hint);
      return finish(opt, session, err, ExitCode::Usage);
    }
    if (training.shape.recompute_loc.line > 0 || training.shape.offload.optimizer ||
        training.shape.offload.params || training.shape.offload.grads || training.zero.stage > 0) {
      session.sink.error(
          DiagCode::ETraining,
          training.shape.recompute_loc.line > 0 ? training.shape.recompute_loc : training.loc,
          "search chooses recompute, ZeRO and the layout itself: the training file may "
          "not set recompute, offload or zero",
          "leave them out; search prints the recompute mode and ZeRO-1 of each layout");
      return finish(opt, session, err, ExitCode::Usage);
    }
  }
  TrainingShape& shape = training.shape;
  if (opt.seq_len) shape.seq_len = *opt.seq_len;
  if (opt.micro_batch) shape.micro_batch_size = *opt.micro_batch;
  if (!shape.seq_len) shape.seq_len = 4096;
  if (opt.global_batch_tokens) {
    if (*opt.global_batch_tokens % *shape.seq_len != 0) {
      return option_error(
          "--global-batch-tokens " + std::to_string(*opt.global_batch_tokens) +
              " is not a multiple of the sequence length " + std::to_string(*shape.seq_len),
          "give a multiple of " + std::to_string(*shape.seq_len) + " (e.g. " +
              std::to_string(std::max<std::int64_t>(1, *opt.global_batch_tokens / *shape.seq_len) *
                             *shape.seq_len) +
              "), or set --seq-len");
    }
    shape.global_batch_size = *opt.global_batch_tokens / *shape.seq_len;
  }
  if (!shape.global_batch_size) {
    return option_error("no global batch: --global-batch-tokens is required",
                        "give --global-batch-tokens N (tokens per optimizer step, a multiple of "
                        "--seq-len), or `global_batch_size` in a --training file");
  }
  if (opt.training_path.empty()) shape.attention = AttentionImpl::Flash;
  if (!opt.kernels.empty())
    shape.kernels = opt.kernels == "fused" ? ActivationKernels::Fused : ActivationKernels::Eager;
  // --budget, else the --training file's `budget`, else the GPU's memory.
  std::int64_t budget = training.budget_bytes.value_or(static_cast<std::int64_t>(hw->hbm_bytes));
  if (!opt.budget.empty()) {
    const auto parsed = parse_byte_size(opt.budget);
    if (!parsed || *parsed <= 0) {
      return option_error("--budget: not a byte size: '" + opt.budget + "'",
                          "a number and a unit, e.g. 80GiB, 80GB, 79.6GiB");
    }
    budget = *parsed;
  }
  SearchRequest req;
  req.model = &*model;
  req.rules = &*rules;
  req.rules_text = rule_set_text(rules_file->text);
  req.world = world;
  req.training = training;
  req.budget = budget;
  req.top = std::max(1, opt.top);
  req.max_exact = std::max(req.top, opt.max_exact);
  req.hardware = *hw;
  req.fp8_gemm = opt.fp8_gemm;
  req.moe_node_limit = opt.moe_node_limit;
  if (!opt.schedules.empty()) {
    std::string_view rest = opt.schedules;
    while (!rest.empty()) {
      const std::size_t comma = rest.find(',');
      std::string_view name = rest.substr(0, comma);
      while (!name.empty() && name.front() == ' ') name.remove_prefix(1);
      while (!name.empty() && name.back() == ' ') name.remove_suffix(1);
      rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
      bool known = false;
      for (const PipelineScheduleKind kind : kPipelineScheduleKinds) {
        if (name != pipeline_schedule_name(kind)) continue;
        known = true;
        if (std::find(req.schedules.begin(), req.schedules.end(), kind) == req.schedules.end())
          req.schedules.push_back(kind);
      }
      if (!known) {
        return option_error("--schedules: unknown schedule '" + std::string(name) + "'",
                            "a comma-separated list of 1f1b, interleaved, gpipe, zero_bubble, "
                            "zbv, dualpipev");
      }
    }
  }
  if (!opt.fix.empty()) {
    static constexpr std::array<std::string_view, 6> kAxes = {"pp", "dp_replicate", "dp_shard",
                                                              "cp", "tp",           "ep"};
    std::string_view rest = opt.fix;
    bool more = true;
    while (more) {
      const std::size_t comma = rest.find(',');
      std::string_view item = rest.substr(0, comma);
      more = comma != std::string_view::npos;
      rest = more ? rest.substr(comma + 1) : std::string_view{};
      // Blanks around an item are not part of it ('ep=8, tp=1'); an empty item
      // ('ep=8,' or 'ep=8,,tp=1') is refused below, not skipped.
      while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
      while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
      const std::size_t eq = item.find('=');
      const auto axis =
          std::find(kAxes.begin(), kAxes.end(), item.substr(0, std::min(eq, item.size())));
      std::int64_t value = 0;
      if (eq != std::string_view::npos) {
        for (const char ch : item.substr(eq + 1)) {
          if (ch < '0' || ch > '9' || value > limits::kMaxWorld) {
            value = 0;
            break;
          }
          value = value * 10 + (ch - '0');
        }
      }
      if (axis == kAxes.end() || value < 1) {
        return option_error("--fix: '" + std::string(item) + "' is not AXIS=N with N >= 1",
                            "AXIS=N[,AXIS=N...], AXIS one of pp, dp_replicate, dp_shard, cp, "
                            "tp, ep (lower case), e.g. --fix pp=16,tp=8");
      }
      const auto index = static_cast<std::size_t>(axis - kAxes.begin());
      if (req.fixed[index] > 0)
        return option_error("--fix: " + std::string(*axis) + " is given twice",
                            "give each axis once");
      if (world % value != 0)
        return option_error(
            "--fix: " + std::string(item) + " does not divide the world (" + std::to_string(world) +
                " ranks)",
            "a degree divides the world size: " + std::string(*axis) + " = " + divisor_list(world));
      req.fixed[index] = value;
    }
    // The dense mesh pp x dp_replicate x dp_shard x cp x tp is the world: the fixed
    // degrees together divide it (ep is carved out of dp_shard x cp x tp).
    std::int64_t product = 1;
    std::string named;
    for (std::size_t i = 0; i + 1 < kAxes.size(); ++i) {
      if (req.fixed[i] == 0) continue;
      // Saturates at 2^62 (five degrees of up to 2^20 each would overflow).
      constexpr std::int64_t kSaturated = std::int64_t{1} << 62;
      product = product > kSaturated / req.fixed[i] ? kSaturated : product * req.fixed[i];
      named +=
          (named.empty() ? "" : " x ") + std::string(kAxes[i]) + " " + std::to_string(req.fixed[i]);
    }
    if (world % product != 0)
      return option_error(
          "--fix: " + named + " = " +
              (product == std::int64_t{1} << 62 ? "2^62 or more" : std::to_string(product)) +
              " ranks, which does not divide the world (" + std::to_string(world) + " ranks)",
          "the fixed degrees of pp, dp_replicate, dp_shard, cp and tp multiply "
          "to a divisor of the world: " +
              divisor_list(world));
  }
  if (req.fixed[4] > 1 && !rules_shard_over(&*rules, "tp"))
    return option_error("--fix tp=" + std::to_string(req.fixed[4]) + ": the rule set " +
                            rules_path + " shards nothing over tp, so every layout has tp 1",
                        "give --rules RECIPE whose rules shard over tp (a plan of plans/ for "
                        "this architecture), or leave tp out of --fix");
  if (req.moe_node_limit > 0 && model->attributes.num_experts.value_or(0) == 0)
    return option_error("--moe-node-limit " + std::to_string(req.moe_node_limit) + ": " +
                            model->name + " has no routed experts (no `num_experts` attribute)",
                        "node-limited routing applies to MoE models: leave it out");
  if (req.fixed[5] > 1 && model->attributes.num_experts.value_or(0) == 0) {
    return option_error("--fix ep=" + std::to_string(req.fixed[5]) + ": " + model->name +
                            " has no routed experts (no `num_experts` attribute)",
                        "expert parallelism applies to MoE models: leave ep out");
  }
  const SearchResult result = run_search(req);
  if (!result.arch_missing.empty()) {
    // The peak of every layout would leave the activations out: refuse, at the model's
    // `attributes:` where the fix goes (as `shardc cost` does).
    const SourceLoc loc = model->attributes.loc.file.empty() ? SourceLoc{model->source_path, 0, 0}
                                                             : model->attributes.loc;
    session.sink.error(DiagCode::ETraining, loc,
                       "`shardc search` cannot size activations: the model has no `" +
                           result.arch_missing + "` attribute",
                       "add `" + result.arch_missing +
                           ": N` to the model's `attributes:` (the value of config.json or of "
                           "the model's own config); docs/search.md");
    return finish(opt, session, err, ExitCode::Usage);
  }
  if (!result.error.empty())
    return option_error(result.error,
                        "--seq-len N and --global-batch-tokens N, or a --training file with both");
  const std::int64_t tokens = *shape.global_batch_size * *shape.seq_len;
  if (!opt.report.empty()) {
    SearchReportInput page;
    page.model = model->name;
    page.rules = rules_path;
    page.world = world;
    page.budget = budget;
    page.hardware = &*hw;
    page.seq_len = *shape.seq_len;
    page.micro_batch_size = shape.micro_batch_size;
    page.global_batch_size = *shape.global_batch_size;
    page.optimizer = optimizer_name(training.optimizer);
    page.dtypes = training_dtypes_text(training);
    page.result = &result;
    const std::string html = render_search_report_html(page);
    std::string error;
    if (!fs.write_atomic(opt.report, html, error)) {
      driver::print_error(err, DiagCode::EOutput, "cannot write '" + opt.report + "': " + error);
      return ExitCode::Usage;
    }
    err << "search: wrote " << opt.report << " ("
        << binary_bytes_text(static_cast<std::int64_t>(html.size())) << ")\n";
  }
  if (opt.format == SearchFormat::Json) {
    out << "{\"format\": \"shardc.search/v1\", \"model\": " << json_string(model->name)
        << ", \"rules\": " << json_string(rules_path) << ", \"world\": " << world
        << ", \"gpus_per_node\": " << hw->gpus_per_node << ", \"budget_bytes\": " << budget
        << ",\n \"hardware\": {\"name\": " << json_string(hw->name)
        << ", \"peak_flops\": " << json_number(hw->peak_flops)
        << ", \"gemm_efficiency\": " << json_number(hw->gemm_efficiency)
        << ", \"hbm_bytes\": " << json_number(hw->hbm_bytes)
        << ", \"hbm_bandwidth\": " << json_number(hw->hbm_bandwidth)
        << ", \"intra_bandwidth\": " << json_number(hw->intra_bandwidth)
        << ", \"inter_bandwidth\": " << json_number(hw->inter_bandwidth)
        << ", \"intra_latency\": " << json_number(hw->intra_latency)
        << ", \"inter_latency\": " << json_number(hw->inter_latency)
        << ", \"source\": " << json_string(hw->source)
        << "},\n \"training\": {\"seq_len\": " << *shape.seq_len
        << ", \"micro_batch_size\": " << shape.micro_batch_size
        << ", \"global_batch_size\": " << *shape.global_batch_size
        << ", \"global_batch_tokens\": " << tokens
        << ", \"optimizer\": " << json_string(optimizer_name(training.optimizer))
        << ", \"fp8_gemm\": " << (req.fp8_gemm ? "true" : "false")
        << ", \"moe_node_limit\": " << req.moe_node_limit
        << ", \"kernels\": " << json_string(activation_kernels_name(shape.kernels))
        << ", \"schedules\": [";
    bool first_schedule = true;
    for (const PipelineScheduleKind kind : kPipelineScheduleKinds) {
      if (!schedule_enumerated(req.schedules, kind)) continue;
      out << (first_schedule ? "" : ", ") << json_string(pipeline_schedule_name(kind));
      first_schedule = false;
    }
    out << "]},\n"
        << " \"enumerated\": " << result.enumerated << ", \"screened\": " << result.screened
        << ", \"checked\": " << result.checked.size() << ",\n \"pruned\": {";
    for (int i = 0; i < kScreenReasons; ++i) {
      out << (i > 0 ? ", " : "") << json_string(screen_reason_text(static_cast<ScreenReason>(i)))
          << ": " << result.pruned[static_cast<std::size_t>(i)];
    }
    out << "},\n \"ranked\": [";
    for (std::size_t i = 0; i < result.ranked.size(); ++i)
      out << (i > 0 ? ",\n  " : "\n  ") << layout_json(result.ranked[i], budget);
    out << "],\n \"checked_layouts\": [";
    for (std::size_t i = 0; i < result.checked.size(); ++i)
      out << (i > 0 ? ",\n  " : "\n  ") << layout_json(result.checked[i], budget);
    out << "]}\n";
  } else {
    // A world that is no whole number of nodes: the last node is partial (its ranks' groups
    // cross nodes where a whole node's would not), said so.
    const std::int64_t last_node = world % hw->gpus_per_node;
    out << "search: " << model->name << " on " << world << (world == 1 ? " rank (" : " ranks (")
        << hw->gpus_per_node << " per node"
        << (last_node != 0 && world > hw->gpus_per_node
                ? ", the last of " + std::to_string(world / hw->gpus_per_node + 1) +
                      " nodes holds " + std::to_string(last_node)
                : std::string())
        << "), rules " << rules_path << ", budget " << gib(static_cast<double>(budget)) << " GiB\n";
    if (!rules_shard_over(&*rules, "tp"))
      out << "note: the rule set shards nothing over tp, so every layout has tp 1\n";
    out << "hardware " << hw->name << ": " << fixed(hw->peak_flops / 1e12, 1)
        << " TFLOP/s BF16 dense x GEMM efficiency " << fixed(hw->gemm_efficiency, 2) << ", HBM "
        << fixed(hw->hbm_bytes / 1e9, 0) << " GB at " << fixed(hw->hbm_bandwidth / 1e12, 2)
        << " TB/s, intra-node " << fixed(hw->intra_bandwidth / 1e9, 0) << " GB/s, inter-node "
        << fixed(hw->inter_bandwidth / 1e9, 0) << " GB/s per GPU, latency "
        << fixed(hw->intra_latency * 1e6, 1) << " / " << fixed(hw->inter_latency * 1e6, 1)
        << " us (" << hw->source << ")\n";
    out << "training: seq_len " << *shape.seq_len << ", micro_batch_size " << shape.micro_batch_size
        << ", global batch " << *shape.global_batch_size << " sequences (" << tokens
        << " tokens), optimizer " << optimizer_name(training.optimizer) << ", "
        << training_dtypes_text(training) << ", attention " << attention_impl_name(shape.attention)
        << (shape.kernels == ActivationKernels::Fused ? ", fused kernels" : "")
        << (req.fp8_gemm ? ", FP8 GEMMs" : "")
        << (req.moe_node_limit > 0
                ? ", node-limited routing (M = " + std::to_string(req.moe_node_limit) + ")"
                : std::string())
        << "\n";
    out << "layouts: " << result.enumerated << " enumerated, " << result.screened << " screened, "
        << result.checked.size() << " planned exactly (in order of estimated step time"
        << (result.closest_planned
                ? "; the last for the closest answer: the layout of the smallest memory estimate"
                : "")
        << ")\n\n";
    // Column widths from the cells, so any layout name keeps the columns aligned.
    driver::TextTable table(
        {"rank", "layout", "peak GiB", "headroom", "step s", "tok/s/GPU", "MFU", "dominant"},
        {false, false, true, true, true, true, true, false});
    int rank = 0;
    for (const CheckedLayout& checked : result.ranked) {
      table.add_row({std::to_string(++rank), layout_name(checked.layout),
                     gib(static_cast<double>(checked.peak)),
                     gib(static_cast<double>(budget - checked.peak)), fixed(checked.cost.step, 2),
                     fixed(checked.cost.tokens_per_second_per_gpu, 0),
                     fixed(100 * checked.cost.mfu, 1) + "%", checked.cost.dominant});
    }
    if (!result.ranked.empty()) {
      out << table.render();
      out << "\nterms:\n";
      rank = 0;
      for (const CheckedLayout& checked : result.ranked) print_terms(checked, ++rank, out);
    } else {
      out << "no layout ranked\n";
    }
    int invalid = 0;
    int over = 0;
    for (const CheckedLayout& checked : result.checked) {
      if (!checked.valid) ++invalid;
      if (checked.valid && !checked.fits) ++over;
    }
    if (invalid + over > 0) {
      out << "\nplanned but not ranked: " << invalid << " invalid, " << over
          << " over the budget\n";
      for (const CheckedLayout& checked : result.checked) {
        if (!checked.valid)
          out << "  " << layout_name(checked.layout) << ": " << checked.first_code << " "
              << checked.first_message << "\n";
        else if (!checked.fits)
          out << "  " << layout_name(checked.layout) << ": peak "
              << gib(static_cast<double>(checked.peak)) << " GiB over the budget\n";
      }
    }
    if (opt.explain_pruned) {
      out << "\npruned before planning (by the model's sizes, the batch and the estimate):\n";
      for (int i = 0; i < kScreenReasons; ++i) {
        out << "  " << result.pruned[static_cast<std::size_t>(i)] << "  "
            << screen_reason_text(static_cast<ScreenReason>(i)) << "\n";
      }
    }
  }
  if (result.ranked.empty()) {
    std::string near;
    // One GPU and a node more or less, and the whole numbers of nodes around a partial one
    // (97 on 8-GPU nodes: 96 and 104); each with the layouts estimated to fit the budget.
    const std::int64_t gpn = hw->gpus_per_node;
    std::vector<std::int64_t> neighbours = {world - gpn,       world - 1,
                                            world / gpn * gpn, (world + gpn - 1) / gpn * gpn,
                                            world + 1,         world + gpn};
    std::sort(neighbours.begin(), neighbours.end());
    neighbours.erase(std::unique(neighbours.begin(), neighbours.end()), neighbours.end());
    for (const std::int64_t neighbour : neighbours) {
      if (neighbour < 1 || neighbour == world) continue;
      const std::int64_t count = fitting_layouts(req, neighbour);
      if (count > 0)
        near += (near.empty() ? "" : ", ") + std::to_string(neighbour) +
                (neighbour == 1 ? " rank: " : " ranks: ") + std::to_string(count) +
                (count == 1 ? " layout" : " layouts");
    }
    std::string away =
        "near it, layouts estimated to fit (valid degrees, memory within the "
        "budget): " +
        near;
    if (near.empty()) {
      // None a GPU or a node away: the first doubling of the world that has some (the
      // memory a rank holds falls as the world grows).
      away = "no world size a GPU or a node away has a layout estimated to fit";
      for (std::int64_t larger = world * 2; larger <= std::min(world * 64, limits::kMaxWorld);
           larger *= 2) {
        const std::int64_t count = fitting_layouts(req, larger);
        if (count == 0) continue;
        away += "; doubling the world, " + std::to_string(larger) + " ranks has " +
                std::to_string(count) + (count == 1 ? " layout" : " layouts") + " estimated to fit";
        break;
      }
    }
    const std::string smaller_micro_batch =
        shape.micro_batch_size > 1 ? ", give a smaller --micro-batch" : "";
    std::string message;
    std::string hint;
    if (result.smallest) {
      // Valid layouts exist; none fits the budget.
      message = "no valid layout of " + model->name + " on " + std::to_string(world) +
                (world == 1 ? " rank fits " : " ranks fits ") + gib(static_cast<double>(budget)) +
                " GiB: the smallest memory found is " +
                gib(static_cast<double>(result.smallest->peak)) + " GiB per rank (" +
                layout_name(result.smallest->layout) + ")";
      hint = away + "; raise --budget" + smaller_micro_batch + " or give a larger world";
      if (result.unplanned > 0)
        hint += "; " + std::to_string(result.unplanned) +
                " screened layouts were not planned: raise --max-planned (now " +
                std::to_string(req.max_exact) + ") to check them";
    } else if (!result.checked.empty()) {
      // Layouts were planned and the planner refused every one: not a memory question.
      message = "no layout of " + model->name + " on " + std::to_string(world) +
                (world == 1 ? " rank is valid: the best planned, "
                            : " ranks is valid: the best planned, ") +
                layout_name(result.checked.front().layout) + ", is " +
                result.checked.front().first_code + ": " + result.checked.front().first_message;
      hint = "the rule set may not suit this model (--rules " + rules_path + "); " + away;
    } else {
      // Nothing passed the screen: name the reasons that pruned the most.
      std::vector<std::pair<std::int64_t, int>> reasons;
      for (int i = 0; i < kScreenReasons; ++i)
        if (result.pruned[static_cast<std::size_t>(i)] > 0)
          reasons.emplace_back(result.pruned[static_cast<std::size_t>(i)], i);
      std::sort(reasons.begin(), reasons.end(), std::greater<>());
      std::string why;
      for (std::size_t i = 0; i < reasons.size() && i < 3; ++i)
        why += (i > 0 ? "; " : "") + std::to_string(reasons[i].first) + " by " +
               screen_reason_text(static_cast<ScreenReason>(reasons[i].second));
      message = "no layout of " + model->name + " on " + std::to_string(world) +
                (world == 1 ? " rank passes the screen (" : " ranks passes the screen (") +
                std::to_string(result.enumerated) +
                " enumerated: " + (why.empty() ? std::string("none") : why) + ")";
      hint = away + "; --explain-pruned counts every reason";
    }
    session.sink.error(DiagCode::ESearch, cli, message, hint);
    return finish(opt, session, err, ExitCode::Invalid);
  }
  if (!opt.emit_recipe.empty()) {
    const std::size_t pick = static_cast<std::size_t>(std::max(1, opt.pick));

    if (pick > result.ranked.size()) {
      return option_error(
          "--pick " + std::to_string(pick) + ": only " + std::to_string(result.ranked.size()) +
              " layouts ranked",
          "give --pick 1 to " + std::to_string(result.ranked.size()) + ", or raise --top");
    }
    std::string error;
    if (!fs.write_atomic(opt.emit_recipe, layout_recipe_text(req, result.ranked[pick - 1].layout),
                         error)) {
      driver::print_error(err, DiagCode::EOutput,
                          "cannot write '" + opt.emit_recipe + "': " + error);
      return ExitCode::Usage;
    }
    err << "search: wrote " << opt.emit_recipe << ": #" << pick << " "
        << layout_name(result.ranked[pick - 1].layout) << "\n";
  }
  return finish(opt, session, err, ExitCode::Ok);
}

}  // namespace shardc
