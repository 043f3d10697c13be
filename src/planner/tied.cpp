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

bool ends_with(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
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
  for (const TiePair& t : model.tied) ties.push_back({t.source, t.alias, t.loc});
  if (model.attributes.tie_word_embeddings.value_or(false)) {
    const PlannedParam* embed = nullptr;
    const PlannedParam* head = nullptr;
    for (const PlannedParam& p : params) {
      if (!embed && ends_with(p.name, "embed_tokens.weight")) embed = &p;
      if (!head && (p.name == "lm_head.weight" || ends_with(p.name, ".lm_head.weight"))) head = &p;
    }
    bool listed = false;
    for (const Tie& t : ties) listed = listed || (embed && head && t.alias == head->name);
    if (embed && head && !listed) ties.push_back({embed->name, head->name, recipe.tied.loc});
  }
  return ties;
}

std::string placements_text(const PlannedParam& p) {
  std::string s = "(";
  for (std::size_t i = 0; i < p.placements.size(); ++i)
    s += (i ? ", " : "") + p.placements[i].label();
  return s + ")";
}

std::string rule_text(const PlannedParam& p, const Recipe& recipe) {
  return rule_label(recipe, p.rule.kind == RuleRef::Kind::Experts, p.rule.index) + " (" +
         p.rule.match + ")";
}

// Every way the two ends differ ("; "-joined), or empty.
std::string mismatch(const PlannedParam& a, const PlannedParam& b) {
  std::vector<std::string> why;
  if (a.global_shape != b.global_shape)
    why.push_back("shapes " + shape_text(a.global_shape) + " vs " + shape_text(b.global_shape));
  if (a.dtype != b.dtype)
    why.push_back("dtypes " + std::string(dtype_name(a.dtype)) + " vs " +
                  std::string(dtype_name(b.dtype)));
  if (a.mesh != b.mesh)
    why.push_back(std::string("meshes ") + mesh_kind_name(a.mesh) + " vs " +
                  mesh_kind_name(b.mesh));
  else if (placements_text(a) != placements_text(b))
    why.push_back("placements " + placements_text(a) + " vs " + placements_text(b));
  if (a.uneven != b.uneven || a.pad_multiple != b.pad_multiple || a.unit != b.unit)
    why.push_back(std::string("split rules ") + split_rule_name(a.uneven) + " vs " +
                  split_rule_name(b.uneven) + " (pad " + std::to_string(a.pad_multiple) + " vs " +
                  std::to_string(b.pad_multiple) + ", unit " + std::to_string(a.unit) + " vs " +
                  std::to_string(b.unit) + ")");
  if (a.geometry.parts != b.geometry.parts || a.geometry.parts_dim != b.geometry.parts_dim)
    why.push_back("packed parts differ");
  std::string out;
  for (const std::string& w : why) out += (out.empty() ? "" : "; ") + w;
  return out;
}

void sync_groups(Plan& plan, const PlannedParam& src, const PlannedParam& alias) {
  // One group per position on the non-pipeline axes: the rank holding the
  // source's shard on its stage and the rank holding the alias's on its own.
  TieSyncGroups t{src.name, alias.name, {}};
  const Mesh& m = plan.dense;
  std::int64_t stride = 1;
  for (std::size_t i = static_cast<std::size_t>(plan.pipeline_axis) + 1; i < m.axes.size(); ++i)
    stride *= m.axes[i].size;
  const std::int64_t per_stage = plan.world_size / plan.num_stages;
  for (std::int64_t x = 0; x < per_stage; ++x) {
    const std::int64_t outer = x / stride;
    const std::int64_t inner = x % stride;
    auto rank = [&](int stage) { return (outer * plan.num_stages + stage) * stride + inner; };
    t.groups.push_back({rank(src.stage), rank(alias.stage)});
  }
  plan.tie_sync.push_back(std::move(t));
}

}  // namespace

void resolve_ties(std::vector<PlannedParam>& params, Plan& plan, const Model& model,
                  const Recipe& recipe, DiagnosticSink& sink) {
  const std::vector<Tie> ties = ties_in_force(params, model, recipe);
  if (ties.empty()) return;  // most models: no name index (a hash of every name) needed
  std::unordered_map<std::string_view, std::size_t> index;
  index.reserve(params.size());
  for (std::size_t i = 0; i < params.size(); ++i) index.emplace(params[i].name, i);
  for (const Tie& t : ties) {
    auto s = index.find(t.source);
    auto a = index.find(t.alias);
    if (s == index.end() || a == index.end()) {
      const std::string& missing = s == index.end() ? t.source : t.alias;
      sink.error(DiagCode::ETied, t.loc, "tie end " + missing + " is not a parameter",
                 "tie existing FQNs (after expert stacking), or set tied: none");
      continue;
    }
    PlannedParam& src = params[s->second];
    PlannedParam& alias = params[a->second];
    if (src.rule.index < 0 || alias.rule.index < 0) continue;  // already reported
    if (std::string why = mismatch(src, alias); !why.empty()) {
      Diagnostic d = param_diagnostic(alias, DiagCode::ETied, rule_loc(alias, recipe));
      d.message = "tied " + src.name + " [" + rule_text(src, recipe) + "] and " + alias.name +
                  " [" + rule_text(alias, recipe) + "]: " + why;
      d.hint =
          "tied ends share one storage: give them the same shape and dtype in the model and "
          "the same placements and uneven rule (one rule matching both), or untie them "
          "(tied: none)";
      sink.report(std::move(d));
      continue;
    }
    alias.alias_of = s->second;
    if (plan.pipeline_axis >= 0 && src.stage != alias.stage) sync_groups(plan, src, alias);
  }
}

}  // namespace shardc::passes
