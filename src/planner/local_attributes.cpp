// The local attributes a runtime sets on a sharded module (contract §6.7,
// src/planner/local_attributes.hpp): the pass that finds which params
// carry them (find_local_attributes) and their values at one rank
// (local_attributes_at). Pure, no I/O.
#include "planner/local_attributes.hpp"

#include <algorithm>
#include <map>
#include <string_view>

#include "core/fused.hpp"
#include "planner/passes.hpp"
#include "support/assert.hpp"

namespace shardc {
namespace {

// "a.b.q_proj.weight" -> module "a.b", leaf "q_proj"; false for anything but
// a `.weight` of a module with a parent.
bool split_weight_name(std::string_view fqn, std::string_view& module, std::string_view& leaf) {
  constexpr std::string_view kSuffix = ".weight";
  if (fqn.size() <= kSuffix.size() || fqn.substr(fqn.size() - kSuffix.size()) != kSuffix)
    return false;
  const std::string_view mod = fqn.substr(0, fqn.size() - kSuffix.size());
  const auto dot = mod.rfind('.');
  if (dot == std::string_view::npos) return false;
  module = mod.substr(0, dot);
  leaf = mod.substr(dot + 1);
  return true;
}

// The projections E-HEADS knows (src/planner/checks.cpp head_module) that
// carry one head count on their output rows: Hugging Face Llama / Qwen /
// Mistral q_proj k_proj, DeepSeek-V2/V3 MLA q_b_proj (q_proj without a q
// LoRA) and kv_b_proj, Meta / torchtitan wq wk, and torchtitan's MLA
// (torchtitan/models/deepseek_v3/model/model.py Attention: wq or wq_b, wkv_b,
// head-major on their output rows).
enum class Role { None, Query, KeyValue };
Role projection_role(std::string_view leaf) {
  for (std::string_view name : {"q_proj", "q_b_proj", "wq", "wq_b"})
    if (leaf == name) return Role::Query;
  for (std::string_view kv : {"k_proj", "kv_b_proj", "wk", "wkv_b"})
    if (leaf == kv) return Role::KeyValue;
  return Role::None;
}

int part_index(const FusedLayout& layout, std::string_view name) {
  for (std::size_t i = 0; i < layout.part_names.size(); ++i)
    if (layout.part_names[i] == name) return static_cast<int>(i);
  return -1;
}

// A fused q|k|v weight (shardc/fused.hpp or the model's `fused:`).
bool fused_qkv(const PlannedParam& param) {
  return param.fused && part_index(*param.fused, "q") == 0 && part_index(*param.fused, "k") == 1;
}

// True when a rule (not FSDP) splits dim `dim` of `p`.
bool rule_split(const PlannedParam& param, int dim) {
  for (const DimSplit& split : param.geometry.per_dim[static_cast<std::size_t>(dim)])
    if (!split.fsdp && split.ways > 1) return true;
  return false;
}

// Whole items of `per` rows in [start, start + real) of a dim of `count`
// items: their range; the empty range at `count` for an empty piece;
// nullopt when the piece cuts an item.
std::optional<IdRange> whole_items(const DimPiece& dim_piece, std::int64_t per,
                                   std::int64_t count) {
  if (dim_piece.real == 0) return IdRange{count, count};
  if (per <= 0 || dim_piece.start % per != 0 || dim_piece.real % per != 0) return std::nullopt;
  return IdRange{dim_piece.start / per, (dim_piece.start + dim_piece.real) / per};
}

// The global heads of source `s` whose rows the rank at `coords` holds.
std::optional<IdRange> heads_held(const PlannedParam& param, const HeadSource& source,
                                  std::span<const std::int64_t> coords) {
  const std::int64_t extent = param.global_shape[static_cast<std::size_t>(source.dim)];
  if (source.part < 0) {
    if (extent % source.heads != 0) return std::nullopt;
    return whole_items(tp_local_rows(param, source.dim, -1, coords), extent / source.heads,
                       source.heads);
  }
  const FusedLayout& layout = *param.fused;
  if (!rule_split(param, source.dim)) return IdRange{0, source.heads};
  if (layout.groups > 1) {
    // Per-group layouts (Megatron linear_qkv, GPT-NeoX query_key_value): a
    // piece of whole groups (`packed` with groups, or a `unit` of whole
    // groups) holds heads / G heads of every part per group; any other piece
    // cuts a group.
    if (source.heads % layout.groups != 0) return std::nullopt;
    const auto groups = whole_items(tp_local_rows(param, source.dim, -1, coords),
                                    fused_group_extent(layout), layout.groups);
    if (!groups) return std::nullopt;
    const std::int64_t per = source.heads / layout.groups;
    return IdRange{groups->start * per, groups->end * per};
  }
  // Blocked parts: split part by part only under a matching `packed` (a plain
  // split of the whole dim is W-FUSED-SPLIT: the heads are then undefined).
  if (param.geometry.parts_dim != source.dim || param.geometry.parts != layout.parts)
    return std::nullopt;
  const std::int64_t part = layout.parts[static_cast<std::size_t>(source.part)];
  std::int64_t part_start = 0;
  for (int i = 0; i < source.part; ++i) part_start += layout.parts[static_cast<std::size_t>(i)];
  if (part % source.heads != 0) return std::nullopt;
  DimPiece dim_piece = tp_local_rows(param, source.dim, source.part, coords);
  if (dim_piece.real > 0) dim_piece.start -= part_start;
  return whole_items(dim_piece, part / source.heads, source.heads);
}

// What one rank sees of the params on its mesh.
struct RankView {
  const Plan& plan;
  std::span<const std::int64_t> dense;
  std::span<const std::int64_t> expert;
  int stage = 0;
  [[nodiscard]] const PlannedParam& param(std::size_t i) const { return plan.params.at(i); }
  [[nodiscard]] std::span<const std::int64_t> coords(const PlannedParam& held) const {
    return held.mesh == MeshKind::Expert ? expert : dense;
  }
  [[nodiscard]] bool holds(const PlannedParam& held) const {
    return plan.pipeline_axis < 0 || held.stage == stage;
  }
};

std::optional<AttentionLocal> attention_at(const RankView& view, const AttentionAttributes& attrs) {
  const PlannedParam& qp = view.param(attrs.query.param);
  const PlannedParam& kp = view.param(attrs.key_value.param);
  const auto query = heads_held(qp, attrs.query, view.coords(qp));
  const auto kv = heads_held(kp, attrs.key_value, view.coords(kp));
  if (!query || !kv || attrs.num_heads % attrs.num_kv_heads != 0) return std::nullopt;
  // transformers' repeat_kv (models/llama/modeling_llama.py): query head h
  // attends KV head h / num_key_value_groups.
  const std::int64_t group = attrs.num_heads / attrs.num_kv_heads;
  AttentionLocal out{*query, *kv, {attrs.num_kv_heads, attrs.num_kv_heads}};
  if (query->size() > 0) {
    if (query->start % group != 0 || query->end % group != 0) {
      // Query heads of one KV group split over ranks: each rank attends a
      // whole KV head with part of its queries.
      out.kv_used = {query->start / group, (query->end + group - 1) / group};
    } else {
      out.kv_used = {query->start / group, query->end / group};
    }
  }
  return out;
}

std::optional<IdRange> experts_at(const RankView& view, const ExpertAttributes& attrs) {
  std::optional<IdRange> out;
  for (const std::size_t i : attrs.params) {
    const PlannedParam& param = view.param(i);
    const DimPiece dim_piece = tp_local_rows(param, 0, -1, view.coords(param));
    const IdRange ids = dim_piece.real > 0
                            ? IdRange{dim_piece.start, dim_piece.start + dim_piece.real}
                            : IdRange{attrs.num_experts, attrs.num_experts};
    if (out && !(*out == ids)) return std::nullopt;
    out = ids;
  }
  return out;
}

}  // namespace

DimPiece tp_local_rows(const PlannedParam& param, int dim, int part,
                       std::span<const std::int64_t> coords) {
  SHARDC_ASSERT(dim >= 0 && dim < static_cast<int>(param.geometry.per_dim.size()),
                param.name + ": dim out of range");
  const auto& chain = param.geometry.per_dim[static_cast<std::size_t>(dim)];
  // The FSDP split is always the last of its chain (contract §5.3).
  const std::size_t rules = chain.size() - (!chain.empty() && chain.back().fsdp ? 1 : 0);
  const std::span<const DimSplit> rule(chain.data(), rules);
  if (part < 0)
    return apply_chain(param.geometry.global_shape[static_cast<std::size_t>(dim)], rule, coords);
  SHARDC_ASSERT(static_cast<std::size_t>(part) < param.geometry.parts.size(),
                param.name + ": part out of range");
  std::int64_t part_start = 0;
  for (int i = 0; i < part; ++i) part_start += param.geometry.parts[static_cast<std::size_t>(i)];
  // A part with replicas (KV heads shared by tp / kv ranks) splits fewer ways (trial C 4:
  // its heads were null for vLLM's layout).
  DimPiece dim_piece =
      packed_part_piece(param.geometry, static_cast<std::size_t>(part), rule, coords);
  if (dim_piece.real > 0) dim_piece.start += part_start;
  return dim_piece;
}

LocalAttributes local_attributes_at(const Plan& plan, std::span<const std::int64_t> dense_coords,
                                    std::span<const std::int64_t> expert_coords, int stage) {
  const RankView view{plan, dense_coords, expert_coords, stage};
  const LocalAttributeSpec& spec = plan.local_attributes;
  LocalAttributes out;
  for (const AttentionAttributes& attrs : spec.attention) {
    const bool held =
        view.holds(view.param(attrs.query.param)) && view.holds(view.param(attrs.key_value.param));
    out.attention_held.push_back(held);
    out.attention.push_back(held ? attention_at(view, attrs) : std::nullopt);
  }
  for (const ExpertAttributes& attrs : spec.experts) {
    const bool held = std::all_of(attrs.params.begin(), attrs.params.end(),
                                  [&](std::size_t i) { return view.holds(view.param(i)); });
    out.experts_held.push_back(held);
    out.experts.push_back(held ? experts_at(view, attrs) : std::nullopt);
  }
  for (const VocabAttributes& attrs : spec.vocab) {
    const PlannedParam& param = view.param(attrs.param);
    out.vocab_held.push_back(view.holds(param));
    const DimPiece dim_piece = tp_local_rows(param, 0, -1, view.coords(param));
    const IdRange ids = dim_piece.real > 0
                            ? IdRange{dim_piece.start, dim_piece.start + dim_piece.real}
                            : IdRange{attrs.vocab_size, attrs.vocab_size};
    out.vocab.push_back({ids, dim_piece.alloc - dim_piece.real});
  }
  return out;
}

LocalAttributes local_attributes_at(const Plan& plan, std::int64_t rank) {
  const std::vector<std::int64_t> dense = mesh_coords(plan.dense, rank);
  std::vector<std::int64_t> expert;
  if (plan.expert) expert = mesh_coords(*plan.expert, rank);
  return local_attributes_at(plan, dense, expert, plan.stage_of_rank(rank));
}

namespace passes {

LocalAttributeSpec find_local_attributes(const std::vector<PlannedParam>& params,
                                         const Model& model) {
  LocalAttributeSpec spec;
  const ModelAttributes& attrs = model.attributes;
  // Attention modules, in the model order of their first projection. A sub-model's params
  // (a vision tower, contract §3.2) count their heads with its own attributes.
  {
    struct Found {
      std::optional<HeadSource> query, key_value;
      std::int64_t heads = 0;
      std::int64_t kv_heads = 0;
    };
    std::vector<std::string> order;
    std::map<std::string, Found, std::less<>> found;
    for (std::size_t i = 0; i < params.size(); ++i) {
      const PlannedParam& param = params[i];
      std::string_view module, leaf;
      if (!param.stacked_from.empty() || param.global_shape.size() != 2 ||
          !split_weight_name(param.name, module, leaf))
        continue;
      const SubModel* sub = model.submodel_of(param.name);
      const ModelAttributes& own = sub != nullptr ? sub->attributes : attrs;
      if (!own.num_attention_heads || *own.num_attention_heads <= 0) continue;
      const std::int64_t heads = *own.num_attention_heads;
      const std::int64_t kv_heads = own.num_key_value_heads.value_or(heads);
      Found sources;
      if (fused_qkv(param)) {
        sources.query = HeadSource{i, param.fused->dim, 0, heads};
        sources.key_value = HeadSource{i, param.fused->dim, 1, kv_heads};
      } else if (const Role role = projection_role(leaf); role == Role::Query) {
        sources.query = HeadSource{i, 0, -1, heads};
      } else if (role == Role::KeyValue) {
        sources.key_value = HeadSource{i, 0, -1, kv_heads};
      } else {
        continue;
      }
      auto [it, fresh] = found.try_emplace(std::string(module));
      if (fresh) {
        order.emplace_back(module);
        it->second.heads = heads;
        it->second.kv_heads = kv_heads;
      }
      if (sources.query && !it->second.query) it->second.query = sources.query;
      if (sources.key_value && !it->second.key_value) it->second.key_value = sources.key_value;
    }
    for (const std::string& module : order) {
      const Found& sources = found.at(module);
      if (sources.query && sources.key_value)
        spec.attention.push_back(
            {module, *sources.query, *sources.key_value, sources.heads, sources.kv_heads});
    }
  }
  // Layers of experts: stacked by `experts` entries, or stacked in the model.
  std::vector<std::string> expert_order;
  std::map<std::string, ExpertAttributes, std::less<>> layers;
  for (std::size_t i = 0; i < params.size(); ++i) {
    const PlannedParam& param = params[i];
    const bool stacked = !param.stacked_from.empty();
    const bool model_stacked = attrs.num_experts && param.global_shape.size() == 3 &&
                               param.global_shape[0] == *attrs.num_experts &&
                               param.name.find(".experts.") != std::string::npos;
    if ((!stacked && !model_stacked) || param.global_shape.empty()) continue;
    const auto dot = param.name.rfind('.');
    if (dot == std::string::npos) continue;
    std::string module = param.name.substr(0, dot);
    // A stacked model param's own name ends in `.weight` only when it is a
    // module's weight: `experts.w1.weight` belongs to `experts`.
    if (model_stacked && !stacked && param.name.ends_with(".weight")) {
      const auto up = module.rfind('.');
      if (up != std::string::npos && module.substr(0, up).ends_with(".experts")) module.resize(up);
    }
    auto [it, fresh] = layers.try_emplace(module);
    if (fresh) {
      expert_order.push_back(module);
      it->second.module = module;
      it->second.num_experts = param.global_shape[0];
    }
    if (it->second.num_experts == param.global_shape[0]) it->second.params.push_back(i);
  }
  for (const std::string& module : expert_order) spec.experts.push_back(layers.at(module));
  // Vocab tensors (the W-VOCAB rule), tied aliases too (their module is told
  // its range as well).
  for (std::size_t i = 0; i < params.size(); ++i)
    if (is_vocab_param(params[i], model)) spec.vocab.push_back({i, params[i].global_shape[0]});
  return spec;
}

}  // namespace passes
}  // namespace shardc
