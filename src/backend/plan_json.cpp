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

void write_header(Writer& writer, const Plan& plan) {
  writer.line_break().member("format", "shardc.plan/v1");
  writer.line_break().key("generator").begin_object();
  writer.member("name", "shardc").member("version", SHARDC_VERSION);
  writer.end_object();
  writer.line_break().key("inputs").begin_object();
  writer.key("model").begin_object();
  writer.member("name", plan.model_name).member("sha256", plan.model_sha256);
  writer.end_object();
  writer.key("recipe").begin_object().member("sha256", plan.recipe_sha256).end_object();
  writer.end_object();
  writer.line_break().member("world_size", plan.world_size);
}

void write_meshes(Writer& writer, const Plan& plan) {
  writer.line_break().key("meshes").begin_object();
  writer.key("dense");
  backend::write_mesh_axes(writer, plan.dense);
  writer.key("expert");
  if (plan.expert) {
    backend::write_mesh_axes(writer, *plan.expert);
  } else {
    writer.null();
  }
  writer.end_object();
  writer.line_break().key("pipeline");
  if (plan.pipeline_axis >= 0) {
    const auto axis = static_cast<std::size_t>(plan.pipeline_axis);
    writer.begin_object();
    writer.member("axis", plan.dense.axes.at(axis).name).member("num_stages", plan.num_stages);
    if (plan.virtual_stages > 1) {
      writer.member("virtual_stages", plan.virtual_stages);
      writer.line_break().key("model_chunks");
      backend::write_model_chunks(writer, plan, -1);
    }
    writer.end_object();
  } else {
    writer.null();
  }
}

void write_rule(Writer& writer, const RuleRef& rule) {
  writer.key("rule").begin_object();
  writer.member("kind", rule.kind == RuleRef::Kind::Experts ? "experts" : "rule");
  writer.member("index", rule.index).member("match", rule.match);
  writer.end_object();
}

void write_stacked_from(Writer& writer, const PlannedParam& param) {
  writer.key("stacked_from");
  if (param.stacked_from.empty()) {
    writer.null();
    return;
  }
  writer.begin_object();
  writer.member("count", static_cast<std::int64_t>(param.stacked_from.size()));
  writer.member("first", param.stacked_from.front()).member("last", param.stacked_from.back());
  writer.key("sources").begin_array();
  for (const auto& source : param.stacked_from) writer.value(source);
  writer.end_array();
  writer.end_object();
}

void write_shards(Writer& writer, const Plan& plan, const PlannedParam& param) {
  writer.key("shards").begin_array();
  for (const ShardClass& shard : enumerate_shards(plan, param)) {
    writer.begin_object();
    writer.member("ranks", shard.ranks.to_string());
    writer.member_ints("local_shape", shard.geom.local_shape);
    writer.member_ints("global_offset", shard.geom.global_offset);
    writer.member_ints("padded_shape", shard.geom.padded_shape);
    backend::write_boxes(writer, param, shard.geom);
    writer.end_object();
  }
  writer.end_array();
}

void write_param(Writer& writer, const Plan& plan, const PlannedParam& param) {
  writer.begin_object();
  writer.member("name", param.name).member("dtype", dtype_name(param.dtype));
  writer.member_ints("global_shape", param.global_shape);
  if (param.vocab_multiple > 0) {  // Megatron's padded vocabulary: the real rows and the multiple
    writer.key("vocab_padding").begin_object().member("rows", param.vocab_rows);
    writer.member("multiple", param.vocab_multiple).end_object();
  }
  writer.member("requires_grad", param.requires_grad).member("mesh", mesh_kind_name(param.mesh));
  writer.key("placements").begin_array();
  for (const auto& label : backend::placement_labels(param)) writer.value(label);
  writer.end_array();
  writer.member("uneven", split_rule_name(param.uneven));
  backend::write_layout_extras(writer, param, plan.mesh_of(param));
  write_rule(writer, param.rule);
  writer.member("stage", param.stage);
  if (plan.virtual_stages > 1) writer.member("virtual_stage", param.virtual_stage);
  writer.key("alias_of");
  if (param.alias_of) {
    writer.value(plan.params.at(*param.alias_of).name);
  } else {
    writer.null();
  }
  write_stacked_from(writer, param);
  if (param.prestacked) {
    writer.key("prestacked").begin_object();
    writer.member("dim", param.prestacked->dim).member("count", param.prestacked->count);
    writer.member("first", expert_fqn(param, 0))
        .member("last", expert_fqn(param, param.prestacked->count - 1));
    writer.end_object();
  }
  writer.member("padded", param.geometry.fsdp_dim >= 0 || param.uneven == SplitRule::Pad);
  write_shards(writer, plan, param);
  writer.end_object();
}

void write_tie_sync(Writer& writer, const Plan& plan) {
  writer.line_break().key("tie_sync_groups").begin_array();
  for (const auto& tie : plan.tie_sync) {
    writer.line_break().begin_object();
    writer.member("source", tie.source).member("alias", tie.alias);
    writer.key("groups").begin_array();
    for (const auto& group : tie.groups) writer.ints(group);
    writer.end_array();
    writer.end_object();
  }
  if (!plan.tie_sync.empty()) writer.line_break();
  writer.end_array();
}

void write_diagnostics(Writer& writer, const Plan& plan) {
  writer.line_break().key("diagnostics").begin_array();
  for (const auto& diag : plan.diagnostics) {
    writer.line_break();
    backend::write_diagnostic(writer, diag);
  }
  if (!plan.diagnostics.empty()) writer.line_break();
  writer.end_array();
}

// min / median (lower) / max of per-rank bytes and the ranks reaching min and max.
void write_rank_stats(Writer& writer, std::string_view key,
                      const std::vector<std::int64_t>& per_rank) {
  writer.key(key).begin_object();
  if (per_rank.empty()) {
    writer.member("min", 0).member("median", 0).member("max", 0);
    writer.member("min_ranks", "").member("max_ranks", "").end_object();
    return;
  }
  std::vector<std::int64_t> sorted = per_rank;
  std::sort(sorted.begin(), sorted.end());
  const std::int64_t lo = sorted.front();
  const std::int64_t hi = sorted.back();
  std::vector<std::int64_t> lo_ranks;
  std::vector<std::int64_t> hi_ranks;
  for (std::size_t r = 0; r < per_rank.size(); ++r) {
    if (per_rank[r] == lo) lo_ranks.push_back(static_cast<std::int64_t>(r));
    if (per_rank[r] == hi) hi_ranks.push_back(static_cast<std::int64_t>(r));
  }
  writer.member("min", lo).member("median", sorted[(sorted.size() - 1) / 2]).member("max", hi);
  writer.member("min_ranks", RankSet::from_sorted(lo_ranks).to_string());
  writer.member("max_ranks", RankSet::from_sorted(hi_ranks).to_string());
  writer.end_object();
}

// Per layout: pack and gathered bytes per rank (min / median / max).
void write_buffer_stats(Writer& writer, const std::vector<BufferRankBytes>& buffer_bytes) {
  writer.key("per_rank_buffer_bytes").begin_array();
  for (const BufferRankBytes& buffer : buffer_bytes) {
    writer.line_break().begin_object().member("kind", buffer_kind_name(buffer.kind));
    write_rank_stats(writer, "pack", buffer.pack);
    write_rank_stats(writer, "gathered", buffer.gathered);
    if (!buffer.gathered_peak.empty())
      write_rank_stats(writer, "gathered_peak", buffer.gathered_peak);
    writer.end_object();
  }
  if (!buffer_bytes.empty()) writer.line_break();
  writer.end_array();
}

// Per memory kind and total: min / median / max over ranks and the ranks reaching them.
void write_memory_stats(Writer& writer, const Plan& plan, const MemoryReport& memory) {
  writer.line_break().key("per_rank_memory").begin_object();
  writer.key("training");
  backend::write_training(writer, plan);
  writer.member("not_counted",
                memory.activations_counted ? backend::kNotCountedStep : backend::kNotCounted);
  std::vector<std::int64_t> per_rank(memory.ranks.size());
  for (std::size_t k = 0; k < kMemoryKinds; ++k) {
    for (std::size_t r = 0; r < memory.ranks.size(); ++r) per_rank[r] = memory.ranks[r].bytes[k];
    writer.line_break();
    write_rank_stats(writer, memory_kind_name(static_cast<MemoryKind>(k)), per_rank);
  }
  if (memory.activations_counted) {
    for (std::size_t k = 0; k < kStepKindNames.size(); ++k) {
      for (std::size_t r = 0; r < memory.ranks.size(); ++r) {
        const RankMemory& rm = memory.ranks[r];
        const std::array<std::int64_t, 4> step = {rm.activations, rm.fsdp2_reduce_scatter,
                                                  rm.muon_grad_copy, rm.host};
        per_rank[r] = step[k];
      }
      writer.line_break();
      write_rank_stats(writer, kStepKindNames[k], per_rank);
    }
  }
  for (std::size_t r = 0; r < memory.ranks.size(); ++r) per_rank[r] = memory.ranks[r].total;
  writer.line_break();
  write_rank_stats(writer, "total", per_rank);
  if (memory.activations_counted) {
    writer.line_break().key("stage_activations");
    backend::write_stage_activations(writer, memory.stage_activations);
  }
  writer.line_break().end_object();
}

void write_summary(Writer& writer, const Plan& plan, const RankBytes& bytes,
                   const std::vector<BufferRankBytes>& buffer_bytes, const MemoryReport* memory) {
  std::int64_t stacked = 0;
  std::int64_t count = 0;
  std::int64_t total_bytes = 0;
  for (const auto& param : plan.params) {
    if (stacked_expert(param)) ++stacked;
    if (param.alias_of) continue;
    const std::int64_t elements = numel(param.global_shape);
    count += elements;
    total_bytes += bytes_of(elements, param.dtype);
  }
  writer.line_break().key("summary").begin_object();
  writer.member("num_params", static_cast<std::int64_t>(plan.params.size()));
  writer.member("num_stacked", stacked).member("param_count", count);
  writer.member("param_bytes", total_bytes);
  write_rank_stats(writer, "per_rank_param_bytes", bytes.param_bytes);
  write_rank_stats(writer, "per_rank_padded_param_bytes", bytes.padded_param_bytes);
  write_buffer_stats(writer, buffer_bytes);
  if (memory != nullptr) write_memory_stats(writer, plan, *memory);
  writer.end_object();
}

}  // namespace

std::string render_plan_json(const Plan& plan, const RankBytes& bytes,
                             const std::vector<BufferRankBytes>& buffer_bytes,
                             const MemoryReport* memory) {
  std::string out;
  out.reserve(4096 + plan.params.size() * 512);
  Writer writer(out);
  writer.begin_object();
  write_header(writer, plan);
  write_meshes(writer, plan);
  writer.line_break().key("params").begin_array();
  for (const auto& param : plan.params) {
    writer.line_break();
    write_param(writer, plan, param);
  }
  if (!plan.params.empty()) writer.line_break();
  writer.end_array();
  write_tie_sync(writer, plan);
  write_diagnostics(writer, plan);
  write_summary(writer, plan, bytes, buffer_bytes, memory);
  writer.line_break().end_object();
  out += '\n';
  return out;
}

}  // namespace shardc
