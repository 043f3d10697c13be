// The memory report as JSON: `shardc memory --format json`
// (schemas/memory.schema.json) and the pieces plan.json and rank files use.
#include "backend/memory_json.hpp"

#include <algorithm>
#include <array>
#include <cstdio>

#include "backend/backend.hpp"
#include "backend/render_util.hpp"

namespace shardc {
namespace backend {

namespace {

void write_group(json::Writer& w, const Plan& plan, const ZeroGroup& g) {
  const Mesh& mesh = g.mesh == MeshKind::Expert && plan.expert ? *plan.expert : plan.dense;
  w.begin_object().member("mesh", mesh_kind_name(g.mesh)).key("axes").begin_array();
  for (int a : g.axes) w.value(mesh.axes[static_cast<std::size_t>(a)].name);
  w.end_array().member("degree", g.degree).end_object();
}

}  // namespace

void write_zero(json::Writer& w, const Plan& plan) {
  w.begin_object()
      .member("stage", static_cast<std::int64_t>(plan.zero.stage))
      .member("spelling", plan.training.zero.spelling)
      .key("shard");
  write_group(w, plan, plan.zero.dense);
  w.key("expert_shard");
  if (plan.zero.has_experts) {
    write_group(w, plan, plan.zero.expert);
  } else {
    w.null();
  }
  w.end_object();
}

void write_rank_zero(json::Writer& w, const Plan& plan, std::int64_t rank) {
  auto shard = [&](const ZeroGroup& g) {
    w.begin_object().member("index", plan.zero_index(g, rank)).member("of", g.degree).end_object();
  };
  w.begin_object().member("stage", static_cast<std::int64_t>(plan.zero.stage)).key("dense");
  shard(plan.zero.dense);
  w.key("expert");
  if (plan.zero.has_experts) {
    shard(plan.zero.expert);
  } else {
    w.null();
  }
  w.end_object();
}

namespace {

// The training shape as resolved (recipe `training:` keys and the layout degrees).
void write_shape(json::Writer& w, const Plan& plan) {
  const TrainingShape& t = plan.training.shape;
  const TrainingLayout& tl = plan.training_layout;
  w.begin_object().member("seq_len", t.seq_len.value_or(0));
  w.member("micro_batch_size", t.micro_batch_size).member("microbatches", tl.microbatches);
  w.member("microbatches_from", tl.microbatches_from);
  w.member("recompute", recompute_name(t.recompute)).key("recompute_ranges").begin_array();
  for (const RecomputeRange& r : t.recompute_ranges) {
    w.begin_object().member("first_layer", r.first_layer).member("end_layer", r.end_layer);
    w.member("mode", recompute_name(r.mode)).end_object();
  }
  w.end_array();
  w.member("sequence_parallel", tl.degrees.sequence_parallel);
  if (t.context_parallel) {
    w.member("context_parallel", *t.context_parallel);
  } else {
    w.member_null("context_parallel");
  }
  w.member("tp", tl.degrees.tp).member("expert_tp", tl.degrees.expert_tp);
  w.member("cp", tl.degrees.cp).member("dp", tl.dp);
  w.member("pipeline_schedule", pipeline_schedule_name(tl.schedule));
  w.member("attention", attention_impl_name(t.attention));
  w.member("activation_dtype", dtype_name(tl.activation_dtype));
  w.key("moe").begin_object();
  if (t.moe.capacity_factor) {
    std::array<char, 32> text{};
    std::snprintf(text.data(), text.size(), "%.17g", *t.moe.capacity_factor);
    w.key("capacity_factor").raw(text.data());
  } else {
    w.member_null("capacity_factor");
  }
  w.end_object();
  w.key("offload").begin_object().member("optimizer", t.offload.optimizer);
  w.member("params", t.offload.params).member("grads", t.offload.grads).end_object();
  if (t.ranks_per_node) {
    w.member("ranks_per_node", *t.ranks_per_node);
  } else {
    w.member_null("ranks_per_node");
  }
  if (!tl.arch) w.member("activations_not_counted", tl.arch_missing);
  w.end_object();
}

}  // namespace

void write_report_head(json::Writer& writer, const Plan& plan, const char* format) {
  writer.line_break().member("format", format);
  writer.line_break().member("model", plan.model_name).member("world_size", plan.world_size);
  writer.member("num_stages", plan.num_stages);
  writer.line_break().key("training");
  write_training(writer, plan);
}

void write_training(json::Writer& w, const Plan& plan) {
  const TrainingSpec& t = plan.training;
  auto dtype = [&w](std::string_view key, const std::optional<DType>& d) {
    if (d) {
      w.member(key, dtype_name(*d));
    } else {
      w.member_null(key);
    }
  };
  w.begin_object().member("optimizer", optimizer_name(t.optimizer));
  dtype("master_weights", t.master_weights);
  dtype("grad_dtype", t.grad_dtype);
  dtype("state_dtype", t.state_dtype);
  if (plan.zero.stage > 0) {
    w.key("zero");
    write_zero(w, plan);
  }
  if (plan.training_layout.active) {
    w.key("shape");
    write_shape(w, plan);
  }
  w.end_object();
}

bool activations_counted(const Plan& plan) {
  return plan.training_layout.active && plan.training_layout.arch.has_value();
}

void write_rank_memory(json::Writer& w, const RankMemory& rm, bool step) {
  w.begin_object();
  for (std::size_t k = 0; k < kMemoryKinds; ++k)
    w.member(memory_kind_name(static_cast<MemoryKind>(k)), rm.bytes[k]);
  if (step) {
    w.member("activations", rm.activations)
        .member("fsdp2_reduce_scatter", rm.fsdp2_reduce_scatter)
        .member("muon_grad_copy", rm.muon_grad_copy)
        .member("host", rm.host);
  }
  w.member("total", rm.total);
  w.end_object();
}

void write_stage_activations(json::Writer& w, const std::vector<StageActivations>& stages) {
  auto terms = [&w](const std::vector<ActivationTerm>& ts) {
    w.begin_array();
    for (const ActivationTerm& t : ts) {
      w.line_break().begin_object().member("name", t.name).member("bytes", t.bytes);
      w.member("formula", t.formula).member("source", t.source).end_object();
    }
    w.end_array();
  };
  w.begin_array();
  for (const StageActivations& s : stages) {
    w.line_break().begin_object().member("stage", s.stage).member("layers", s.layers);
    w.member("in_flight", s.in_flight).member("virtual_stages", s.virtual_stages);
    w.member("per_microbatch_bytes", s.per_microbatch_bytes).member("bytes", s.bytes);
    w.key("terms");
    terms(s.per_microbatch);
    w.key("once");
    terms(s.once);
    w.end_object();
  }
  w.line_break().end_array();
}

}  // namespace backend

namespace {

using json::Writer;

void write_stats(Writer& w, std::string_view key, const KindStats& s) {
  w.key(key).begin_object();
  w.member("min", s.min).member("median", s.median).member("max", s.max);
  w.end_object();
}

void write_coords(Writer& w, const Mesh& mesh, std::int64_t rank) {
  const std::vector<std::int64_t> c = mesh_coords(mesh, rank);
  w.begin_object();
  for (std::size_t i = 0; i < mesh.axes.size(); ++i) w.member(mesh.axes[i].name, c[i]);
  w.end_object();
}

void write_rank(Writer& w, const Plan& plan, const MemoryReport& m, std::int64_t rank) {
  w.begin_object().member("rank", rank).member("stage", plan.stage_of_rank(rank));
  w.key("coords").begin_object().key("dense");
  write_coords(w, plan.dense, rank);
  w.key("expert");
  if (plan.expert) {
    write_coords(w, *plan.expert, rank);
  } else {
    w.null();
  }
  w.end_object();
  w.key("bytes");
  backend::write_rank_memory(w, m.at(rank), m.activations_counted);
  w.end_object();
}

}  // namespace

std::string render_memory_json(const Plan& plan, const MemoryReport& m,
                               std::optional<std::int64_t> budget,
                               const std::vector<std::int64_t>& ranks) {
  std::string out;
  Writer w(out);
  w.begin_object();
  backend::write_report_head(w, plan, "shardc.memory/v1");
  w.line_break().key("layouts").begin_object();
  w.member("fsdp2_allgather", m.fsdp2_declared).member("muon_allgather", m.muon_declared);
  w.end_object();
  w.line_break().member("not_counted",
                        m.activations_counted ? backend::kNotCountedStep : backend::kNotCounted);
  w.line_break().key("budget_bytes");
  if (budget) {
    w.value(*budget);
  } else {
    w.null();
  }
  w.key("fits");
  if (budget) {
    w.value(m.peak <= *budget);
  } else {
    w.null();
  }
  w.line_break().key("stages").begin_array();
  for (const StageMemory& s : stage_memory(plan, m)) {
    w.line_break().begin_object().member("stage", s.stage).member("num_ranks", s.num_ranks);
    for (std::size_t k = 0; k < kMemoryKinds; ++k)
      write_stats(w, memory_kind_name(static_cast<MemoryKind>(k)), s.kinds[k]);
    if (m.activations_counted) {
      for (std::size_t k = 0; k < kStepKindNames.size(); ++k)
        write_stats(w, kStepKindNames[k], s.step[k]);
    }
    write_stats(w, "total", s.total);
    w.end_object();
  }
  w.line_break().end_array();
  w.line_break().key("peak").begin_object();
  w.member("bytes", m.peak).member("ranks", m.peak_ranks.to_string());
  if (m.activations_counted) w.member("stage", m.peak_stage);
  w.key("first");
  write_rank(w, plan, m, m.peak_ranks.first());
  w.end_object();
  if (m.activations_counted) {
    w.line_break().key("activations");
    backend::write_stage_activations(w, m.stage_activations);
  }
  w.line_break().key("ranks").begin_array();
  for (std::int64_t r : ranks) {
    w.line_break();
    write_rank(w, plan, m, r);
  }
  if (!ranks.empty()) w.line_break();
  w.end_array();
  w.line_break().end_object();
  out += '\n';
  return out;
}

}  // namespace shardc
