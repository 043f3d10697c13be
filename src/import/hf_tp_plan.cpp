// Hugging Face tensor-parallel plans (transformers' `model.tp_plan`) as shardc
// recipes: `shardc recipe --from-hf-tp-plan PLAN MODEL --tp N`.
//
// Source of each style's placement: transformers/distributed/tensor_parallel.py
// (ColwiseParallel shards a Linear weight on dim -2 and its bias on dim -1,
// RowwiseParallel the weight on dim -1 and replicates the bias, EmbeddingParallel
// "rowwise" the vocab rows, the Packed* styles the same dims part by part).
//
// An entry may name a param instead of a module (transformers 5.24
// `apply_tensor_parallelism`: `if name in parameters: style.shard_param(...)`), as
// the MoE plans name the experts' 3-D params (`experts.gate_up_proj`): the param
// gets what the style's `shard_param` gives a tensor of its rank — colwise
// Shard(ndim - 2), rowwise Shard(-1) (a `bias` leaf Replicate), packed_colwise
// `_StridedShard(ndim - 2, split_factor=2)` (Shard(-1) for 1-D), packed_rowwise
// `_StridedShard(-1, split_factor=2)` (Replicate for 1-D): the same labels, which
// shardc states as DTensor reads them (docs/shard-order.md). Module-forward styles
// with no param of their own (moe_tp_experts, moe_identity_expert, local_params)
// add no rule. The experts of Mixtral, Qwen3-MoE and DeepSeek-V3 are stored per
// expert in the checkpoint and fused by transformers' loader: their entries match
// no checkpoint param and stay E-HF-TP-PLAN, naming the style and why.
#include <simdjson.h>

#include <algorithm>
#include <array>
#include <sstream>
#include <vector>

#include "import/import.hpp"
#include "support/pattern.hpp"

namespace shardc {
namespace {

struct StyleSpec {
  std::string_view style;
  std::string_view weight;  ///< placement of `.weight` ("" = replicated)
  std::string_view bias;    ///< placement of `.bias` ("" = replicated)
  bool packed = false;      ///< gate|up halves split part by part (`packed: {parts: 2}`)
};

constexpr std::array kStyles = {
    StyleSpec{"colwise", "Shard(-2)", "Shard(-1)"},
    StyleSpec{"colwise_rep", "Shard(-2)", "Shard(-1)"},
    StyleSpec{"colwise_gather_output", "Shard(-2)", "Shard(-1)"},
    StyleSpec{"rowwise", "Shard(-1)", ""},
    StyleSpec{"rowwise_rep", "Shard(-1)", ""},
    StyleSpec{"rowwise_split_input", "Shard(-1)", ""},
    StyleSpec{"embedding_rowwise", "Shard(0)", ""},
    StyleSpec{"embedding_colwise", "Shard(1)", ""},
    StyleSpec{"packed_colwise", "Shard(-2)", "Shard(-1)", true},
    StyleSpec{"packed_rowwise", "Shard(-1)", "", true},
    StyleSpec{"sequence_parallel", "", ""},
    StyleSpec{"replicated_with_grad_allreduce", "", ""},
    StyleSpec{"all_reduce", "", ""},
    StyleSpec{"replicate", "", ""},
    StyleSpec{"local_params", "", ""},
};

// Styles that only hook a module's forward: no param of their own to place
// (tensor_parallel.py MoeExpertsParallel, MoeIdentityParallel, LocalParamsParallel).
constexpr std::array<std::string_view, 3> kForwardOnly = {"moe_tp_experts", "moe_identity_expert",
                                                          "local_params"};

bool forward_only(std::string_view style) {
  for (std::string_view s : kForwardOnly)
    if (s == style) return true;
  return false;
}

// The placement a style's `shard_param` gives a param named by the entry itself ("" =
// replicated); nullopt when the style has no such rule (tensor_parallel.py, 5.24).
std::optional<std::string> direct_placement(std::string_view style, const Param& param) {
  const std::size_t ndim = param.shape.size();
  const bool bias = param.name.ends_with(".bias");
  if (style == "colwise" || style == "colwise_rep" || style == "colwise_gather_output")
    return ndim >= 2 ? "Shard(-2)" : "Shard(-1)";
  if (style == "rowwise" || style == "rowwise_rep" || style == "rowwise_split_input")
    return bias ? "" : "Shard(-1)";
  if (style == "packed_colwise") return ndim >= 2 ? "_StridedShard(-2, sf=2)" : "Shard(-1)";
  if (style == "packed_rowwise") return ndim >= 2 ? "_StridedShard(-1, sf=2)" : "";
  if (style == "replicate" || style == "replicated_with_grad_allreduce") return "";
  return std::nullopt;
}

const StyleSpec* find_style(std::string_view style) {
  for (const StyleSpec& spec : kStyles) {
    if (spec.style == style) return &spec;
  }
  return nullptr;
}

// A double-quoted YAML scalar (the patterns are FQN globs: no control characters).
std::string yaml_quoted(std::string_view text) {
  std::string out = "\"";
  for (const char ch : text) {
    if (ch == '"' || ch == '\\') out += '\\';
    out += ch;
  }
  return out + "\"";
}

// The packed dim of a placement `Shard(d)` as the recipe spells it.
std::string_view shard_dim_of(std::string_view placement) {
  return placement.substr(6, placement.size() - 7);
}

}  // namespace

std::optional<HfTpPlan> parse_hf_tp_plan(std::string_view json, const std::string& path,
                                         DiagnosticSink& sink) {
  const auto fail = [&](const std::string& what) {
    sink.error(DiagCode::EHfTpPlan, SourceLoc{path, 0, 0}, "'" + path + "': " + what,
               "write it with `tools/hf_tp_plan.py CHECKPOINT -o plan.json` (transformers' "
               "model.tp_plan)");
    return std::nullopt;
  };
  simdjson::dom::parser parser;
  const simdjson::padded_string padded(json);
  simdjson::dom::object root;
  if (parser.parse(padded).get(root) != simdjson::SUCCESS) return fail("not a JSON object");
  std::string_view format;
  if (root["format"].get(format) != simdjson::SUCCESS || format != "shardc.hf-tp-plan/v1") {
    return fail("`format` is not \"shardc.hf-tp-plan/v1\"");
  }
  HfTpPlan plan;
  std::string_view text;
  if (root["architecture"].get(text) == simdjson::SUCCESS) plan.architecture = text;
  if (root["transformers"].get(text) == simdjson::SUCCESS) plan.transformers_version = text;
  simdjson::dom::object entries;
  if (root["tp_plan"].get(entries) != simdjson::SUCCESS) {
    return fail("`tp_plan` is missing or not an object of module pattern -> style");
  }
  for (const auto field : entries) {
    std::string_view style;
    if (field.value.get(style) != simdjson::SUCCESS) {
      return fail("the style of '" + std::string(field.key) + "' is not a string");
    }
    plan.entries.emplace_back(std::string(field.key), std::string(style));
  }
  if (plan.entries.empty()) return fail("`tp_plan` is empty (the architecture has no plan)");
  return plan;
}

std::optional<std::string> hf_tp_plan_recipe(const HfTpPlan& plan, const Model& model,
                                             std::int64_t tp_size, const std::string& path,
                                             DiagnosticSink& sink) {
  const SourceLoc loc{path, 0, 0};
  std::ostringstream rules;
  bool ok = true;
  for (const auto& entry : plan.entries) {
    // named references, not a structured binding: the lambdas below capture them
    const std::string& module_pattern = entry.first;
    const std::string& style = entry.second;
    // An entry naming params itself (the MoE plans' 3-D expert params)
    std::string error;
    const std::optional<Pattern> direct = Pattern::compile(module_pattern, error);
    if (!direct) {
      sink.error(DiagCode::EHfTpPlan, loc,
                 "'" + module_pattern + "' is not a module pattern: " + error);
      ok = false;
      continue;
    }
    std::vector<const Param*> named;
    for (const Param& param : model.params)
      if (direct->match(param.name)) named.push_back(&param);
    if (!named.empty()) {
      std::vector<std::pair<std::string, std::string>> placed;  // param name -> placement
      for (const Param* param : named) {
        const std::optional<std::string> placement = direct_placement(style, *param);
        if (!placement) break;
        placed.emplace_back(param->name, *placement);
      }
      if (placed.size() != named.size()) {
        sink.error(DiagCode::EHfTpPlan, loc,
                   "'" + module_pattern + "' names params and style '" + style +
                       "' has no shardc translation for a param",
                   "write the rule for these params by hand");
        ok = false;
        continue;
      }
      const bool one_rule = std::all_of(placed.begin(), placed.end(), [&](const auto& x) {
        return x.second == placed.front().second;
      });
      const auto emit = [&](const std::string& match, const std::string& placement) {
        rules << "  - match: " << yaml_quoted(match) << "    # " << style << " (a param)\n";
        if (placement.empty()) {
          rules << "    placements: {}\n";
        } else {
          rules << "    placements: {tp: " << yaml_quoted(placement) << "}\n";
        }
      };
      if (one_rule) {
        emit(direct->text(), placed.front().second);
      } else {
        for (const auto& [name, placement] : placed) emit(name, placement);
      }
      continue;
    }
    if (forward_only(style)) {
      const std::string prefix = module_pattern + ".**";
      const std::optional<Pattern> inside = Pattern::compile(prefix, error);
      const bool exists =
          inside && std::any_of(model.params.begin(), model.params.end(),
                                [&](const Param& param) { return inside->match(param.name); });
      const bool twin = std::any_of(plan.entries.begin(), plan.entries.end(), [&](const auto& e) {
        return e.first == "model." + module_pattern && e.second == style;
      });
      if (exists || twin) {
        rules << "  # " << module_pattern << ": " << style
              << " hooks the module's forward (its params are placed by their own entries)\n";
        continue;
      }
    }
    const StyleSpec* spec = find_style(style);
    if (spec == nullptr) {
      sink.error(DiagCode::EHfTpPlan, loc,
                 "'" + module_pattern + "': style '" + style + "' has no shardc translation",
                 "write the rule for these params by hand (MoE experts: an `experts` entry "
                 "with `placements: {ep: Shard(0)}`)");
      ok = false;
      continue;
    }
    int matched_suffixes = 0;
    for (const auto& [suffix, placement] : {std::pair{std::string_view(".weight"), spec->weight},
                                            std::pair{std::string_view(".bias"), spec->bias}}) {
      error.clear();
      const std::optional<Pattern> pattern =
          Pattern::compile(module_pattern + std::string(suffix), error);
      if (!pattern) {
        sink.error(DiagCode::EHfTpPlan, loc,
                   "'" + module_pattern + "' is not a module pattern: " + error);
        ok = false;
        break;
      }
      bool any = false;
      for (const Param& param : model.params) {
        if (pattern->match(param.name)) {
          any = true;
          break;
        }
      }
      if (!any) continue;
      ++matched_suffixes;
      rules << "  - match: " << yaml_quoted(pattern->text()) << "    # " << style << "\n";
      if (placement.empty()) {
        rules << "    placements: {}\n";
        continue;
      }
      rules << "    placements: {tp: " << placement << "}\n";
      if (spec->packed) rules << "    packed: {parts: 2, dim: " << shard_dim_of(placement) << "}\n";
    }
    const auto twin = std::find_if(plan.entries.begin(), plan.entries.end(), [&](const auto& e) {
      return e.first == "model." + module_pattern && e.second == style;
    });
    if (matched_suffixes == 0 && ok && twin != plan.entries.end()) {
      // Llama-4's tp_plan lists the base plan twice, bare and with the base model's prefix:
      // transformers applies the bare copy to nothing (no module has that name)
      rules << "  # " << module_pattern << ": " << style << " (as 'model." << module_pattern
            << "')\n";
      continue;
    }
    const bool experts = module_pattern.find("experts") != std::string::npos;
    if (matched_suffixes == 0 && ok && !experts) {
      // a module this configuration does not build (Llama-4 Scout: every layer MoE, so no
      // dense `feed_forward.gate_proj`): transformers applies the entry to nothing too
      rules << "  # " << module_pattern << ": " << style
            << " matches no param of this model (transformers applies it to nothing)\n";
      continue;
    }
    if (matched_suffixes == 0 && ok) {
      sink.error(DiagCode::EHfTpPlan, loc,
                 "'" + module_pattern + "' (" + style + ") matches no param of the model" +
                     ": transformers 5 fuses the checkpoint's per-expert tensors into this "
                     "one 3-D param at load (its weight converter), and shardc plans the "
                     "checkpoint's own tensors",
                 "write an `experts` entry that stacks the per-expert tensors (placements "
                 "{tp: ...} on the stacked dims) instead of this entry");
      ok = false;
    }
  }
  if (!ok) return std::nullopt;
  std::ostringstream out;
  out << "# transformers' tensor-parallel plan of "
      << (plan.architecture.empty() ? "the model" : plan.architecture)
      << (plan.transformers_version.empty() ? ""
                                            : " (transformers " + plan.transformers_version + ")")
      << " as a shardc recipe\n# (shardc recipe --from-hf-tp-plan). Each rule names the style it "
         "comes from.\nformat: shardc.recipe/v1\nmesh:\n  - {name: tp, size: "
      << tp_size << "}\nrules:\n"
      << rules.str()
      << "  - match: \"**\"    # everything the plan does not name: replicated\n"
         "    placements: {}\ntied: auto\n";
  return out.str();
}

}  // namespace shardc
