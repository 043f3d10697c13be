// plan.json (contract §6.1), streamed: shards are enumerated per param and
// written straight into the output string, never held as a JSON tree.
#include <algorithm>
#include <array>
#include <string>

#include "backend/backend.hpp"
#include "backend/json_writer.hpp"
#include "backend/memory_json.hpp"
#include "backend/render_util.hpp"

namespace shardc {
namespace {

using backend::bytes_of;
using json::Writer;

void write_header(Writer& w, const Plan& plan) {
  w.line_break().member("format", "shardc.plan/v1");
  w.line_break().key("generator").begin_object();
  w.member("name", "shardc").member("version", SHARDC_VERSION);
  w.end_object();
  w.line_break().key("inputs").begin_object();
  w.key("model").begin_object();
  w.member("name", plan.model_name).member("sha256", plan.model_sha256);
  w.end_object();
  w.key("recipe").begin_object().member("sha256", plan.recipe_sha256).end_object();
  w.end_object();
  w.line_break().member("world_size", plan.world_size);
}

void write_meshes(Writer& w, const Plan& plan) {
  w.line_break().key("meshes").begin_object();
  w.key("dense");
  backend::write_mesh_axes(w, plan.dense);
  w.key("expert");
  if (plan.expert) {
    backend::write_mesh_axes(w, *plan.expert);
  } else {
    w.null();
  }
  w.end_object();
  w.line_break().key("pipeline");
  if (plan.pipeline_axis >= 0) {
    const auto axis = static_cast<std::size_t>(plan.pipeline_axis);
    w.begin_object();
    w.member("axis", plan.dense.axes.at(axis).name).member("num_stages", plan.num_stages);
    if (plan.virtual_stages > 1) {
      w.member("virtual_stages", plan.virtual_stages);
      w.line_break().key("model_chunks");
      backend::write_model_chunks(w, plan, -1);
    }
    w.end_object();
  } else {
    w.null();
  }
}

void write_rule(Writer& w, const RuleRef& r) {
  w.key("rule").begin_object();
  w.member("kind", r.kind == RuleRef::Kind::Experts ? "experts" : "rule");
  w.member("index", r.index).member("match", r.match);
  w.end_object();
}

void write_stacked_from(Writer& w, const PlannedParam& p) {
  w.key("stacked_from");
  if (p.stacked_from.empty()) {
    w.null();
    return;
  }
  w.begin_object();
  w.member("count", static_cast<std::int64_t>(p.stacked_from.size()));
  w.member("first", p.stacked_from.front()).member("last", p.stacked_from.back());
  w.key("sources").begin_array();
  for (const auto& s : p.stacked_from) w.value(s);
  w.end_array();
  w.end_object();
}

void write_shards(Writer& w, const Plan& plan, const PlannedParam& p) {
  w.key("shards").begin_array();
  for (const ShardClass& c : enumerate_shards(plan, p)) {
    w.begin_object();
    w.member("ranks", c.ranks.to_string());
    w.member_ints("local_shape", c.geom.local_shape);
    w.member_ints("global_offset", c.geom.global_offset);
    w.member_ints("padded_shape", c.geom.padded_shape);
    backend::write_boxes(w, p, c.geom);
    w.end_object();
  }
  w.end_array();
}

void write_param(Writer& w, const Plan& plan, const PlannedParam& p) {
  w.begin_object();
  w.member("name", p.name).member("dtype", dtype_name(p.dtype));
  w.member_ints("global_shape", p.global_shape);
  if (p.vocab_multiple > 0) {  // Megatron's padded vocabulary: the real rows and the multiple
    w.key("vocab_padding").begin_object().member("rows", p.vocab_rows);
    w.member("multiple", p.vocab_multiple).end_object();
  }
  w.member("requires_grad", p.requires_grad).member("mesh", mesh_kind_name(p.mesh));
  w.key("placements").begin_array();
  for (const auto& label : backend::placement_labels(p)) w.value(label);
  w.end_array();
  w.member("uneven", split_rule_name(p.uneven));
  backend::write_layout_extras(w, p, plan.mesh_of(p));
  write_rule(w, p.rule);
  w.member("stage", p.stage);
  if (plan.virtual_stages > 1) w.member("virtual_stage", p.virtual_stage);
  w.key("alias_of");
  if (p.alias_of) {
    w.value(plan.params.at(*p.alias_of).name);
  } else {
    w.null();
  }
  write_stacked_from(w, p);
  if (p.prestacked) {
    w.key("prestacked").begin_object();
    w.member("dim", p.prestacked->dim).member("count", p.prestacked->count);
    w.member("first", expert_fqn(p, 0)).member("last", expert_fqn(p, p.prestacked->count - 1));
    w.end_object();
  }
  w.member("padded", p.geometry.fsdp_dim >= 0 || p.uneven == SplitRule::Pad);
  write_shards(w, plan, p);
  w.end_object();
}

void write_tie_sync(Writer& w, const Plan& plan) {
  w.line_break().key("tie_sync_groups").begin_array();
  for (const auto& t : plan.tie_sync) {
    w.line_break().begin_object();
    w.member("source", t.source).member("alias", t.alias);
    w.key("groups").begin_array();
    for (const auto& g : t.groups) w.ints(g);
    w.end_array();
    w.end_object();
  }
  if (!plan.tie_sync.empty()) w.line_break();
  w.end_array();
}

void write_diagnostics(Writer& w, const Plan& plan) {
  w.line_break().key("diagnostics").begin_array();
  for (const auto& d : plan.diagnostics) {
    w.line_break();
    backend::write_diagnostic(w, d);
  }
  if (!plan.diagnostics.empty()) w.line_break();
  w.end_array();
}

// min / median (lower) / max of per-rank bytes and the ranks reaching min and max.
void write_rank_stats(Writer& w, std::string_view key, const std::vector<std::int64_t>& v) {
  w.key(key).begin_object();
  if (v.empty()) {
    w.member("min", 0).member("median", 0).member("max", 0);
    w.member("min_ranks", "").member("max_ranks", "").end_object();
    return;
  }
  std::vector<std::int64_t> sorted = v;
  std::sort(sorted.begin(), sorted.end());
  const std::int64_t lo = sorted.front();
  const std::int64_t hi = sorted.back();
  std::vector<std::int64_t> lo_ranks;
  std::vector<std::int64_t> hi_ranks;
  for (std::size_t r = 0; r < v.size(); ++r) {
    if (v[r] == lo) lo_ranks.push_back(static_cast<std::int64_t>(r));
    if (v[r] == hi) hi_ranks.push_back(static_cast<std::int64_t>(r));
  }
  w.member("min", lo).member("median", sorted[(sorted.size() - 1) / 2]).member("max", hi);
  w.member("min_ranks", RankSet::from_sorted(lo_ranks).to_string());
  w.member("max_ranks", RankSet::from_sorted(hi_ranks).to_string());
  w.end_object();
}

// Per layout: pack and gathered bytes per rank (min / median / max).
void write_buffer_stats(Writer& w, const std::vector<BufferRankBytes>& buffer_bytes) {
  w.key("per_rank_buffer_bytes").begin_array();
  for (const BufferRankBytes& b : buffer_bytes) {
    w.line_break().begin_object().member("kind", buffer_kind_name(b.kind));
    write_rank_stats(w, "pack", b.pack);
    write_rank_stats(w, "gathered", b.gathered);
    if (!b.gathered_peak.empty()) write_rank_stats(w, "gathered_peak", b.gathered_peak);
    w.end_object();
  }
  if (!buffer_bytes.empty()) w.line_break();
  w.end_array();
}

// Per memory kind and total: min / median / max over ranks and the ranks reaching them.
void write_memory_stats(Writer& w, const Plan& plan, const MemoryReport& m) {
  w.line_break().key("per_rank_memory").begin_object();
  w.key("training");
  backend::write_training(w, plan);
  w.member("not_counted", m.activations_counted ? backend::kNotCountedStep : backend::kNotCounted);
  std::vector<std::int64_t> v(m.ranks.size());
  for (std::size_t k = 0; k < kMemoryKinds; ++k) {
    for (std::size_t r = 0; r < m.ranks.size(); ++r) v[r] = m.ranks[r].bytes[k];
    w.line_break();
    write_rank_stats(w, memory_kind_name(static_cast<MemoryKind>(k)), v);
  }
  if (m.activations_counted) {
    for (std::size_t k = 0; k < kStepKindNames.size(); ++k) {
      for (std::size_t r = 0; r < m.ranks.size(); ++r) {
        const RankMemory& rm = m.ranks[r];
        const std::array<std::int64_t, 4> step = {rm.activations, rm.fsdp2_reduce_scatter,
                                                  rm.muon_grad_copy, rm.host};
        v[r] = step[k];
      }
      w.line_break();
      write_rank_stats(w, kStepKindNames[k], v);
    }
  }
  for (std::size_t r = 0; r < m.ranks.size(); ++r) v[r] = m.ranks[r].total;
  w.line_break();
  write_rank_stats(w, "total", v);
  if (m.activations_counted) {
    w.line_break().key("stage_activations");
    backend::write_stage_activations(w, m.stage_activations);
  }
  w.line_break().end_object();
}

void write_summary(Writer& w, const Plan& plan, const RankBytes& bytes,
                   const std::vector<BufferRankBytes>& buffer_bytes, const MemoryReport* memory) {
  std::int64_t stacked = 0;
  std::int64_t count = 0;
  std::int64_t total_bytes = 0;
  for (const auto& p : plan.params) {
    if (stacked_expert(p)) ++stacked;
    if (p.alias_of) continue;
    const std::int64_t n = numel(p.global_shape);
    count += n;
    total_bytes += bytes_of(n, p.dtype);
  }
  w.line_break().key("summary").begin_object();
  w.member("num_params", static_cast<std::int64_t>(plan.params.size()));
  w.member("num_stacked", stacked).member("param_count", count);
  w.member("param_bytes", total_bytes);
  write_rank_stats(w, "per_rank_param_bytes", bytes.param_bytes);
  write_rank_stats(w, "per_rank_padded_param_bytes", bytes.padded_param_bytes);
  write_buffer_stats(w, buffer_bytes);
  if (memory != nullptr) write_memory_stats(w, plan, *memory);
  w.end_object();
}

}  // namespace

std::string render_plan_json(const Plan& plan, const RankBytes& bytes,
                             const std::vector<BufferRankBytes>& buffer_bytes,
                             const MemoryReport* memory) {
  std::string out;
  out.reserve(4096 + plan.params.size() * 512);
  Writer w(out);
  w.begin_object();
  write_header(w, plan);
  write_meshes(w, plan);
  w.line_break().key("params").begin_array();
  for (const auto& p : plan.params) {
    w.line_break();
    write_param(w, plan, p);
  }
  if (!plan.params.empty()) w.line_break();
  w.end_array();
  write_tie_sync(w, plan);
  write_diagnostics(w, plan);
  write_summary(w, plan, bytes, buffer_bytes, memory);
  w.line_break().end_object();
  out += '\n';
  return out;
}

}  // namespace shardc
