// Hugging Face tensor-parallel plans (transformers' `model.tp_plan`) as shardc
// recipes: `shardc recipe --from-hf-tp-plan PLAN MODEL --tp N`.
//
// Source of each style's placement: transformers/distributed/tensor_parallel.py
// (ColwiseParallel shards a Linear weight on dim -2 and its bias on dim -1,
// RowwiseParallel the weight on dim -1 and replicates the bias, EmbeddingParallel
// "rowwise" the vocab rows, the Packed* styles the same dims part by part).
#include <simdjson.h>

#include <array>
#include <sstream>

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
  for (const auto& [module_pattern, style] : plan.entries) {
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
      std::string error;
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
    if (matched_suffixes == 0 && ok) {
      sink.error(DiagCode::EHfTpPlan, loc,
                 "'" + module_pattern + "' (" + style + ") matches no param of the model",
                 "transformers' module names differ from the checkpoint's here (fused MoE "
                 "experts are one 3-D param in transformers 5): write these rules by hand");
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
