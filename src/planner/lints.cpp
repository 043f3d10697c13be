// Lints beyond errors (warnings; `--strict` makes them fail):
//  W-REPLICATED-LARGE  a large param replicated over an axis that shards
//                      other params by rule (a TP axis): likely a forgotten rule
//  W-VOCAB             an embedding / output head split unevenly on its vocab
//                      dim; lists the sizes that divide. Vocab tensors are
//                      found by the model's `vocab_size` attribute (a 2-D
//                      param whose dim 0 equals it) or, without it, by name
//                      (HF, Megatron, GPT-NeoX, Meta spellings)
//  W-AXIS-SIZE-1       a rule places Shard on an axis of size 1 (no effect)
//  W-ACTIVATION-SPLIT  in one parent module, a colwise weight's output dim and
//                      a later rowwise weight's input dim of the same extent
//                      are split differently: the activation between them
//                      does not line up (activation_split.cpp)
// W-UNUSED-RULE / W-SHADOWED-RULE live in rules.cpp, W-EXPERTS in checks.cpp.
#include <set>
#include <string>
#include <string_view>

#include "core/layer_blocks.hpp"
#include "planner/passes.hpp"

namespace shardc::passes {
namespace {

constexpr std::int64_t kLargeNumel = std::int64_t{1} << 24;  // 16 Mi elements

// True when the rule that placed `p` says `axis: Replicate()` explicitly.
bool explicitly_replicated(const PlannedParam& param, const Recipe& recipe,
                           const std::string& axis) {
  if (param.rule.index < 0) return false;
  // A rule's placements, or an `experts:` entry's (trial C 9: `tp: Replicate()` in an
  // experts entry was told to say `tp: Replicate()`, and that did not silence it).
  const auto index = static_cast<std::size_t>(param.rule.index);
  const bool rule = param.rule.kind == RuleRef::Kind::Rule;
  if (index >= (rule ? recipe.rules.size() : recipe.experts.size())) return false;
  const std::vector<AxisPlacement>& placements =
      rule ? recipe.rules[index].placements : recipe.experts[index].placements;
  for (const AxisPlacement& ap : placements)
    if (ap.axis == axis && ap.placement.kind == Placement::Kind::Replicate) return true;
  return false;
}

std::string divisor_list(std::int64_t extent, std::int64_t limit) {
  std::string text;
  for (std::int64_t k = 2; k <= limit; ++k)
    if (extent % k == 0) text += (text.empty() ? "" : ", ") + std::to_string(k);
  return text.empty() ? "none up to " + std::to_string(limit) : text;
}

// Dense axes that shard some param by rule (not FSDP): the "TP-like" axes.
std::set<int> rule_sharding_axes(const std::vector<PlannedParam>& params) {
  std::set<int> axes;
  for (const PlannedParam& param : params) {
    if (param.mesh != MeshKind::Dense) continue;
    for (const auto& chain : param.geometry.per_dim)
      for (const DimSplit& split : chain)
        if (!split.fsdp)
          for (int axis : split.axes) axes.insert(axis);
  }
  return axes;
}

void lint_replicated(const PlannedParam& param, const Plan& plan, const Recipe& recipe,
                     const std::set<int>& tp_axes, GroupedReporter& rep) {
  if (param.mesh != MeshKind::Dense || numel(param.global_shape) < kLargeNumel) return;
  for (int axis_index : tp_axes) {
    const auto& axis = plan.dense.axes[static_cast<std::size_t>(axis_index)];
    if (axis.size < 2) continue;
    if (param.placements[static_cast<std::size_t>(axis_index)].kind !=
        ResolvedPlacement::Kind::Replicate)
      continue;
    if (explicitly_replicated(param, recipe, axis.name)) continue;
    Diagnostic diag =
        param_diagnostic(param, DiagCode::WReplicatedLarge, param.loc, Severity::Warning);
    diag.message = param.name + " (" + std::to_string(numel(param.global_shape)) +
                   " elements) is replicated over '" + axis.name + "', which shards other params";
    diag.hint = "a rule placing it on " + axis.name +
                " may be missing; if replicating it is meant, say `" + axis.name +
                ": Replicate()` in its " +
                (param.rule.kind == RuleRef::Kind::Experts ? "experts entry's" : "rule's") +
                " placements (that silences this)";
    rep.add(std::move(diag), std::to_string(param.rule.index) + ":" + axis.name);
  }
}

void lint_vocab(const PlannedParam& param, const Model& model, GroupedReporter& rep) {
  if (!is_vocab_param(param, model) || param.geometry.per_dim.empty() || param.alias_of) return;
  if (param.uneven == SplitRule::Pad) return;  // every piece allocates the same rows
  std::int64_t ways = 1;
  for (const DimSplit& split : param.geometry.per_dim[0])
    if (!split.fsdp) ways *= split.ways;
  const std::int64_t vocab = param.global_shape[0];
  if (ways <= 1 || vocab % ways == 0) return;
  Diagnostic diag = param_diagnostic(param, DiagCode::WVocab, param.loc, Severity::Warning);
  diag.message = param.name + ": vocab " + std::to_string(vocab) + " does not divide over " +
                 std::to_string(ways) + " ranks (uneven " + split_rule_name(param.uneven) +
                 " pieces)";
  diag.hint = "sizes that divide it: " + divisor_list(vocab, std::max<std::int64_t>(ways * 4, 64)) +
              "; or pad it like Megatron / vLLM: `uneven: {pad: 64}` on its rule";
  rep.add(std::move(diag), param.name);
}

void lint_size_one(const Recipe& recipe, const Plan& plan, DiagnosticSink& sink) {
  auto check = [&](const std::vector<AxisPlacement>& pls, const Mesh* mesh,
                   const std::string& rule) {
    if (!mesh) return;
    for (const AxisPlacement& ap : pls) {
      const int axis = mesh->find(ap.axis);
      if (axis < 0 || ap.placement.kind != Placement::Kind::Shard) continue;
      if (mesh->axes[static_cast<std::size_t>(axis)].size != 1) continue;
      Diagnostic diag;
      diag.severity = Severity::Warning;
      diag.code = DiagCode::WAxisSize1;
      diag.loc = ap.loc;
      diag.rule = rule;
      diag.message =
          "'" + ap.placement.text + "' on axis '" + ap.axis + "' of size 1 has no effect";
      diag.hint = "drop it, or give the axis a size > 1";
      sink.report(std::move(diag));
    }
  };
  for (const Rule& rule : recipe.rules) check(rule.placements, &plan.dense, rule.match_text());
  for (const ExpertsEntry& entry : recipe.experts)
    check(entry.placements, plan.expert ? &*plan.expert : nullptr, entry.match.text());
}

// W-PACKED-BUFFER: muon_allgather rebuilds a global tensor by concatenating
// members' pieces, which for a packed param split on its packed dim would
// interleave the parts; such params are left out of the muon layout.
void lint_packed_buffers(const std::vector<PlannedParam>& params, const Plan& plan,
                         DiagnosticSink& sink) {
  bool muon = false;
  for (const BufferSpec& buffer : plan.buffers)
    muon = muon || buffer.kind == BufferKind::MuonAllGather;
  if (!muon) return;
  GroupedReporter rep;
  for (const PlannedParam& param : params) {
    if (param.geometry.per_dim.size() != param.global_shape.size() || !packed_dim_split(param))
      continue;
    if (!param.requires_grad || param.global_shape.size() < 2) continue;
    Diagnostic diag =
        param_diagnostic(param, DiagCode::WPackedBuffer, param.loc, Severity::Warning);
    diag.message = param.name +
                   " is packed and split on its packed dim: the muon_allgather layout leaves it "
                   "out (listed as not communicated)";
    diag.hint =
        "gather it per part in the runtime (the rank file's boxes say where each part "
        "piece sits), or drop `packed` from its rule";
    rep.add(std::move(diag), std::to_string(param.rule.index));
  }
  rep.flush(sink);
}

}  // namespace

void run_lints(const std::vector<PlannedParam>& params, const Plan& plan, const Model& model,
               const Recipe& recipe, DiagnosticSink& sink) {
  const std::set<int> tp_axes = rule_sharding_axes(params);
  GroupedReporter replicated;
  GroupedReporter vocab;
  for (const PlannedParam& param : params) {
    if (param.geometry.per_dim.size() != param.global_shape.size() || param.placements.empty())
      continue;
    lint_replicated(param, plan, recipe, tp_axes, replicated);
    lint_vocab(param, model, vocab);
  }
  replicated.flush(sink);
  vocab.flush(sink);
  lint_size_one(recipe, plan, sink);
  lint_activation_splits(params, plan, sink);
  lint_packed_buffers(params, plan, sink);
}

// A vocab tensor: by the model's vocab_size (2-D, dim 0 == vocab_size) when
// the attribute is given, else by name.
bool is_vocab_param(const PlannedParam& param, const Model& model) {
  if (param.global_shape.size() != 2 || stacked_expert(param)) return false;
  if (const auto& vocab = model.attributes_of(param.name).vocab_size)
    return param.global_shape[0] == *vocab;
  return has_vocab_name(param.name);
}

}  // namespace shardc::passes
