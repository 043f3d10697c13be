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
  for (std::string_view q : {"q_proj", "q_b_proj", "wq", "wq_b"})
    if (leaf == q) return Role::Query;
  for (std::string_view kv : {"k_proj", "kv_b_proj", "wk", "wkv_b"})
    if (leaf == kv) return Role::KeyValue;
  return Role::None;
}

int part_index(const FusedLayout& f, std::string_view name) {
  for (std::size_t i = 0; i < f.part_names.size(); ++i)
    if (f.part_names[i] == name) return static_cast<int>(i);
  return -1;
}

// A fused q|k|v weight (shardc/fused.hpp or the model's `fused:`).
bool fused_qkv(const PlannedParam& p) {
  return p.fused && part_index(*p.fused, "q") == 0 && part_index(*p.fused, "k") == 1;
}

// True when a rule (not FSDP) splits dim `dim` of `p`.
bool rule_split(const PlannedParam& p, int dim) {
  for (const DimSplit& s : p.geometry.per_dim[static_cast<std::size_t>(dim)])
    if (!s.fsdp && s.ways > 1) return true;
  return false;
}

// Whole items of `per` rows in [start, start + real) of a dim of `count`
// items: their range; the empty range at `count` for an empty piece;
// nullopt when the piece cuts an item.
std::optional<IdRange> whole_items(const DimPiece& d, std::int64_t per, std::int64_t count) {
  if (d.real == 0) return IdRange{count, count};
  if (per <= 0 || d.start % per != 0 || d.real % per != 0) return std::nullopt;
  return IdRange{d.start / per, (d.start + d.real) / per};
}

// The global heads of source `s` whose rows the rank at `coords` holds.
std::optional<IdRange> heads_held(const PlannedParam& p, const HeadSource& s,
                                  std::span<const std::int64_t> coords) {
  const std::int64_t extent = p.global_shape[static_cast<std::size_t>(s.dim)];
  if (s.part < 0) {
    if (extent % s.heads != 0) return std::nullopt;
    return whole_items(tp_local_rows(p, s.dim, -1, coords), extent / s.heads, s.heads);
  }
  const FusedLayout& f = *p.fused;
  if (!rule_split(p, s.dim)) return IdRange{0, s.heads};
  if (f.groups > 1) {
    // Per-group layouts (Megatron linear_qkv, GPT-NeoX query_key_value): a
    // piece of whole groups (`packed` with groups, or a `unit` of whole
    // groups) holds heads / G heads of every part per group; any other piece
    // cuts a group.
    if (s.heads % f.groups != 0) return std::nullopt;
    const auto groups =
        whole_items(tp_local_rows(p, s.dim, -1, coords), fused_group_extent(f), f.groups);
    if (!groups) return std::nullopt;
    const std::int64_t per = s.heads / f.groups;
    return IdRange{groups->start * per, groups->end * per};
  }
  // Blocked parts: split part by part only under a matching `packed` (a plain
  // split of the whole dim is W-FUSED-SPLIT: the heads are then undefined).
  if (p.geometry.parts_dim != s.dim || p.geometry.parts != f.parts) return std::nullopt;
  const std::int64_t part = f.parts[static_cast<std::size_t>(s.part)];
  std::int64_t part_start = 0;
  for (int i = 0; i < s.part; ++i) part_start += f.parts[static_cast<std::size_t>(i)];
  if (part % s.heads != 0) return std::nullopt;
  DimPiece d = tp_local_rows(p, s.dim, s.part, coords);
  if (d.real > 0) d.start -= part_start;
  return whole_items(d, part / s.heads, s.heads);
}

// What one rank sees of the params on its mesh.
struct RankView {
  const Plan& plan;
  std::span<const std::int64_t> dense;
  std::span<const std::int64_t> expert;
  int stage = 0;
  [[nodiscard]] const PlannedParam& param(std::size_t i) const { return plan.params.at(i); }
  [[nodiscard]] std::span<const std::int64_t> coords(const PlannedParam& p) const {
    return p.mesh == MeshKind::Expert ? expert : dense;
  }
  [[nodiscard]] bool holds(const PlannedParam& p) const {
    return plan.pipeline_axis < 0 || p.stage == stage;
  }
};

std::optional<AttentionLocal> attention_at(const RankView& v, const AttentionAttributes& a) {
  const PlannedParam& qp = v.param(a.query.param);
  const PlannedParam& kp = v.param(a.key_value.param);
  const auto query = heads_held(qp, a.query, v.coords(qp));
  const auto kv = heads_held(kp, a.key_value, v.coords(kp));
  if (!query || !kv || a.num_heads % a.num_kv_heads != 0) return std::nullopt;
  // transformers' repeat_kv (models/llama/modeling_llama.py): query head h
  // attends KV head h / num_key_value_groups.
  const std::int64_t group = a.num_heads / a.num_kv_heads;
  AttentionLocal out{*query, *kv, {a.num_kv_heads, a.num_kv_heads}};
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

std::optional<IdRange> experts_at(const RankView& v, const ExpertAttributes& e) {
  std::optional<IdRange> out;
  for (const std::size_t i : e.params) {
    const PlannedParam& p = v.param(i);
    const DimPiece d = tp_local_rows(p, 0, -1, v.coords(p));
    const IdRange r =
        d.real > 0 ? IdRange{d.start, d.start + d.real} : IdRange{e.num_experts, e.num_experts};
    if (out && !(*out == r)) return std::nullopt;
    out = r;
  }
  return out;
}

}  // namespace

DimPiece tp_local_rows(const PlannedParam& p, int dim, int part,
                       std::span<const std::int64_t> coords) {
  SHARDC_ASSERT(dim >= 0 && dim < static_cast<int>(p.geometry.per_dim.size()),
                p.name + ": dim out of range");
  const auto& chain = p.geometry.per_dim[static_cast<std::size_t>(dim)];
  // The FSDP split is always the last of its chain (contract §5.3).
  const std::size_t rules = chain.size() - (!chain.empty() && chain.back().fsdp ? 1 : 0);
  const std::span<const DimSplit> rule(chain.data(), rules);
  if (part < 0)
    return apply_chain(p.geometry.global_shape[static_cast<std::size_t>(dim)], rule, coords);
  SHARDC_ASSERT(static_cast<std::size_t>(part) < p.geometry.parts.size(),
                p.name + ": part out of range");
  std::int64_t part_start = 0;
  for (int i = 0; i < part; ++i) part_start += p.geometry.parts[static_cast<std::size_t>(i)];
  DimPiece d = apply_chain(p.geometry.parts[static_cast<std::size_t>(part)], rule, coords);
  if (d.real > 0) d.start += part_start;
  return d;
}

LocalAttributes local_attributes_at(const Plan& plan, std::span<const std::int64_t> dense_coords,
                                    std::span<const std::int64_t> expert_coords, int stage) {
  const RankView v{plan, dense_coords, expert_coords, stage};
  const LocalAttributeSpec& spec = plan.local_attributes;
  LocalAttributes out;
  for (const AttentionAttributes& a : spec.attention) {
    const bool held = v.holds(v.param(a.query.param)) && v.holds(v.param(a.key_value.param));
    out.attention_held.push_back(held);
    out.attention.push_back(held ? attention_at(v, a) : std::nullopt);
  }
  for (const ExpertAttributes& e : spec.experts) {
    const bool held = std::all_of(e.params.begin(), e.params.end(),
                                  [&](std::size_t i) { return v.holds(v.param(i)); });
    out.experts_held.push_back(held);
    out.experts.push_back(held ? experts_at(v, e) : std::nullopt);
  }
  for (const VocabAttributes& t : spec.vocab) {
    const PlannedParam& p = v.param(t.param);
    out.vocab_held.push_back(v.holds(p));
    const DimPiece d = tp_local_rows(p, 0, -1, v.coords(p));
    const IdRange ids =
        d.real > 0 ? IdRange{d.start, d.start + d.real} : IdRange{t.vocab_size, t.vocab_size};
    out.vocab.push_back({ids, d.alloc - d.real});
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
  // Attention modules, in the model order of their first projection.
  if (attrs.num_attention_heads && *attrs.num_attention_heads > 0) {
    const std::int64_t heads = *attrs.num_attention_heads;
    const std::int64_t kv_heads = attrs.num_key_value_heads.value_or(heads);
    struct Found {
      std::optional<HeadSource> query, key_value;
    };
    std::vector<std::string> order;
    std::map<std::string, Found, std::less<>> found;
    for (std::size_t i = 0; i < params.size(); ++i) {
      const PlannedParam& p = params[i];
      std::string_view module, leaf;
      if (!p.stacked_from.empty() || p.global_shape.size() != 2 ||
          !split_weight_name(p.name, module, leaf))
        continue;
      Found f;
      if (fused_qkv(p)) {
        f.query = HeadSource{i, p.fused->dim, 0, heads};
        f.key_value = HeadSource{i, p.fused->dim, 1, kv_heads};
      } else if (const Role role = projection_role(leaf); role == Role::Query) {
        f.query = HeadSource{i, 0, -1, heads};
      } else if (role == Role::KeyValue) {
        f.key_value = HeadSource{i, 0, -1, kv_heads};
      } else {
        continue;
      }
      auto [it, fresh] = found.try_emplace(std::string(module));
      if (fresh) order.emplace_back(module);
      if (f.query && !it->second.query) it->second.query = f.query;
      if (f.key_value && !it->second.key_value) it->second.key_value = f.key_value;
    }
    for (const std::string& module : order) {
      const Found& f = found.at(module);
      if (f.query && f.key_value)
        spec.attention.push_back({module, *f.query, *f.key_value, heads, kv_heads});
    }
  }
  // Layers of experts: stacked by `experts` entries, or stacked in the model.
  std::vector<std::string> expert_order;
  std::map<std::string, ExpertAttributes, std::less<>> layers;
  for (std::size_t i = 0; i < params.size(); ++i) {
    const PlannedParam& p = params[i];
    const bool stacked = !p.stacked_from.empty();
    const bool model_stacked = attrs.num_experts && p.global_shape.size() == 3 &&
                               p.global_shape[0] == *attrs.num_experts &&
                               p.name.find(".experts.") != std::string::npos;
    if ((!stacked && !model_stacked) || p.global_shape.empty()) continue;
    const auto dot = p.name.rfind('.');
    if (dot == std::string::npos) continue;
    std::string module = p.name.substr(0, dot);
    // A stacked model param's own name ends in `.weight` only when it is a
    // module's weight: `experts.w1.weight` belongs to `experts`.
    if (model_stacked && !stacked && p.name.ends_with(".weight")) {
      const auto up = module.rfind('.');
      if (up != std::string::npos && module.substr(0, up).ends_with(".experts")) module.resize(up);
    }
    auto [it, fresh] = layers.try_emplace(module);
    if (fresh) {
      expert_order.push_back(module);
      it->second.module = module;
      it->second.num_experts = p.global_shape[0];
    }
    if (it->second.num_experts == p.global_shape[0]) it->second.params.push_back(i);
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
