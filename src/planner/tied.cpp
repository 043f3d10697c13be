// Tied parameters (contract §5.5, §5.8): the second end of a tie is an alias of
// the first (same storage on the same rank). Ends must agree in shape,
// dtype, mesh, placements and split rule.
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "planner/passes.hpp"

namespace shardc::passes {
namespace {

struct Tie {
  std::string source;
  std::string alias;
  SourceLoc loc;
};

bool ends_with(const std::string& text, std::string_view suffix) {
  return text.size() >= suffix.size() &&
         text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// The ties in force: explicit list, or the model's plus the
// embed_tokens/lm_head pair when tie_word_embeddings is true.
std::vector<Tie> ties_in_force(const std::vector<PlannedParam>& params, const Model& model,
                               const Recipe& recipe) {
  std::vector<Tie> ties;
  if (recipe.tied.mode == TiedMode::None) return ties;
  if (recipe.tied.mode == TiedMode::Explicit) {
    for (const auto& [a, b] : recipe.tied.pairs) ties.push_back({a, b, recipe.tied.loc});
    return ties;
  }
  for (const TiePair& pair : model.tied) ties.push_back({pair.source, pair.alias, pair.loc});
  if (model.attributes.tie_word_embeddings.value_or(false)) {
    const PlannedParam* embed = nullptr;
    const PlannedParam* head = nullptr;
    for (const PlannedParam& param : params) {
      if (!embed && ends_with(param.name, "embed_tokens.weight")) embed = &param;
      if (!head && (param.name == "lm_head.weight" || ends_with(param.name, ".lm_head.weight")))
        head = &param;
    }
    bool listed = false;
    for (const Tie& tie : ties) listed = listed || (embed && head && tie.alias == head->name);
    if (embed && head && !listed) ties.push_back({embed->name, head->name, recipe.tied.loc});
  }
  return ties;
}

std::string placements_text(const PlannedParam& param) {
  std::string text = "(";
  for (std::size_t i = 0; i < param.placements.size(); ++i)
    text += (i ? ", " : "") + param.placements[i].label();
  return text + ")";
}

std::string rule_text(const PlannedParam& param, const Recipe& recipe) {
  return rule_label(recipe, param.rule.kind == RuleRef::Kind::Experts, param.rule.index) + " (" +
         param.rule.match + ")";
}

// Every way the two ends differ ("; "-joined), or empty.
std::string mismatch(const PlannedParam& first, const PlannedParam& second) {
  std::vector<std::string> why;
  if (first.global_shape != second.global_shape)
    why.push_back("shapes " + shape_text(first.global_shape) + " vs " +
                  shape_text(second.global_shape));
  if (first.dtype != second.dtype)
    why.push_back("dtypes " + std::string(dtype_name(first.dtype)) + " vs " +
                  std::string(dtype_name(second.dtype)));
  if (first.mesh != second.mesh)
    why.push_back(std::string("meshes ") + mesh_kind_name(first.mesh) + " vs " +
                  mesh_kind_name(second.mesh));
  else if (placements_text(first) != placements_text(second))
    why.push_back("placements " + placements_text(first) + " vs " + placements_text(second));
  if (first.uneven != second.uneven || first.pad_multiple != second.pad_multiple ||
      first.unit != second.unit)
    why.push_back(std::string("split rules ") + split_rule_name(first.uneven) + " vs " +
                  split_rule_name(second.uneven) + " (pad " + std::to_string(first.pad_multiple) +
                  " vs " + std::to_string(second.pad_multiple) + ", unit " +
                  std::to_string(first.unit) + " vs " + std::to_string(second.unit) + ")");
  if (first.geometry.parts != second.geometry.parts ||
      first.geometry.parts_dim != second.geometry.parts_dim)
    why.push_back("packed parts differ");
  std::string out;
  for (const std::string& reason : why) out += (out.empty() ? "" : "; ") + reason;
  return out;
}

void sync_groups(Plan& plan, const PlannedParam& src, const PlannedParam& alias) {
  // One group per position on the non-pipeline axes: the rank holding the
  // source's shard on its stage and the rank holding the alias's on its own.
  TieSyncGroups sync{src.name, alias.name, {}};
  const Mesh& mesh = plan.dense;
  std::int64_t stride = 1;
  for (std::size_t i = static_cast<std::size_t>(plan.pipeline_axis) + 1; i < mesh.axes.size(); ++i)
    stride *= mesh.axes[i].size;
  const std::int64_t per_stage = plan.world_size / plan.num_stages;
  for (std::int64_t x = 0; x < per_stage; ++x) {
    const std::int64_t outer = x / stride;
    const std::int64_t inner = x % stride;
    auto rank = [&](int stage) { return (outer * plan.num_stages + stage) * stride + inner; };
    sync.groups.push_back({rank(src.stage), rank(alias.stage)});
  }
  plan.tie_sync.push_back(std::move(sync));
}

}  // namespace

void resolve_ties(std::vector<PlannedParam>& params, Plan& plan, const Model& model,
                  const Recipe& recipe, DiagnosticSink& sink) {
  const std::vector<Tie> ties = ties_in_force(params, model, recipe);
  if (ties.empty()) return;  // most models: no name index (a hash of every name) needed
  std::unordered_map<std::string_view, std::size_t> index;
  index.reserve(params.size());
  for (std::size_t i = 0; i < params.size(); ++i) index.emplace(params[i].name, i);
  for (const Tie& tie : ties) {
    auto source = index.find(tie.source);
    auto alias_at = index.find(tie.alias);
    if (source == index.end() || alias_at == index.end()) {
      const std::string& missing = source == index.end() ? tie.source : tie.alias;
      sink.error(DiagCode::ETied, tie.loc, "tie end " + missing + " is not a parameter",
                 "tie existing FQNs (after expert stacking), or set tied: none");
      continue;
    }
    PlannedParam& src = params[source->second];
    PlannedParam& alias = params[alias_at->second];
    if (src.rule.index < 0 || alias.rule.index < 0) continue;  // already reported
    if (std::string why = mismatch(src, alias); !why.empty()) {
      Diagnostic diag = param_diagnostic(alias, DiagCode::ETied, rule_loc(alias, recipe));
      diag.message = "tied " + src.name + " [" + rule_text(src, recipe) + "] and " + alias.name +
                     " [" + rule_text(alias, recipe) + "]: " + why;
      diag.hint =
          "tied ends share one storage: give them the same shape and dtype in the model and "
          "the same placements and uneven rule (one rule matching both), or untie them "
          "(tied: none)";
      sink.report(std::move(diag));
      continue;
    }
    alias.alias_of = source->second;
    if (plan.pipeline_axis >= 0 && src.stage != alias.stage) sync_groups(plan, src, alias);
  }
}

}  // namespace shardc::passes
