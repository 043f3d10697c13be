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

void write_group(json::Writer& writer, const Plan& plan, const ZeroGroup& group) {
  const Mesh& mesh = group.mesh == MeshKind::Expert && plan.expert ? *plan.expert : plan.dense;
  writer.begin_object().member("mesh", mesh_kind_name(group.mesh)).key("axes").begin_array();
  for (int axis : group.axes) writer.value(mesh.axes[static_cast<std::size_t>(axis)].name);
  writer.end_array().member("degree", group.degree).end_object();
}

}  // namespace

void write_zero(json::Writer& writer, const Plan& plan) {
  writer.begin_object()
      .member("stage", static_cast<std::int64_t>(plan.zero.stage))
      .member("spelling", plan.training.zero.spelling)
      .key("shard");
  write_group(writer, plan, plan.zero.dense);
  writer.key("expert_shard");
  if (plan.zero.has_experts) {
    write_group(writer, plan, plan.zero.expert);
  } else {
    writer.null();
  }
  writer.end_object();
}

void write_rank_zero(json::Writer& writer, const Plan& plan, std::int64_t rank) {
  auto shard = [&](const ZeroGroup& group) {
    writer.begin_object()
        .member("index", plan.zero_index(group, rank))
        .member("of", group.degree)
        .end_object();
  };
  writer.begin_object().member("stage", static_cast<std::int64_t>(plan.zero.stage)).key("dense");
  shard(plan.zero.dense);
  writer.key("expert");
  if (plan.zero.has_experts) {
    shard(plan.zero.expert);
  } else {
    writer.null();
  }
  writer.end_object();
}

namespace {

// The training shape as resolved (recipe `training:` keys and the layout degrees).
void write_shape(json::Writer& writer, const Plan& plan) {
  const TrainingShape& shape = plan.training.shape;
  const TrainingLayout& tl = plan.training_layout;
  writer.begin_object().member("seq_len", shape.seq_len.value_or(0));
  writer.member("micro_batch_size", shape.micro_batch_size).member("microbatches", tl.microbatches);
  writer.member("microbatches_from", tl.microbatches_from);
  writer.member("recompute", recompute_name(shape.recompute)).key("recompute_ranges").begin_array();
  for (const RecomputeRange& range : shape.recompute_ranges) {
    writer.begin_object()
        .member("first_layer", range.first_layer)
        .member("end_layer", range.end_layer);
    writer.member("mode", recompute_name(range.mode)).end_object();
  }
  writer.end_array();
  writer.member("sequence_parallel", tl.degrees.sequence_parallel);
  if (shape.context_parallel) {
    writer.member("context_parallel", *shape.context_parallel);
  } else {
    writer.member_null("context_parallel");
  }
  writer.member("tp", tl.degrees.tp).member("expert_tp", tl.degrees.expert_tp);
  writer.member("cp", tl.degrees.cp).member("dp", tl.dp);
  writer.member("pipeline_schedule", pipeline_schedule_name(tl.schedule));
  writer.member("attention", attention_impl_name(shape.attention));
  // Only when not the default: plan.json and memory JSON of eager recipes keep their bytes.
  if (shape.kernels != ActivationKernels::Eager)
    writer.member("kernels", activation_kernels_name(shape.kernels));
  writer.member("activation_dtype", dtype_name(tl.activation_dtype));
  writer.key("moe").begin_object();
  if (shape.moe.capacity_factor) {
    std::array<char, 32> text{};
    std::snprintf(text.data(), text.size(), "%.17g", *shape.moe.capacity_factor);
    writer.key("capacity_factor").raw(text.data());
  } else {
    writer.member_null("capacity_factor");
  }
  writer.end_object();
  writer.key("offload").begin_object().member("optimizer", shape.offload.optimizer);
  writer.member("params", shape.offload.params).member("grads", shape.offload.grads).end_object();
  if (shape.ranks_per_node) {
    writer.member("ranks_per_node", *shape.ranks_per_node);
  } else {
    writer.member_null("ranks_per_node");
  }
  if (!tl.arch) writer.member("activations_not_counted", tl.arch_missing);
  writer.end_object();
}

}  // namespace

void write_report_head(json::Writer& writer, const Plan& plan, const char* format) {
  writer.line_break().member("format", format);
  writer.line_break().member("model", plan.model_name).member("world_size", plan.world_size);
  writer.member("num_stages", plan.num_stages);
  writer.line_break().key("training");
  write_training(writer, plan);
}

void write_training(json::Writer& writer, const Plan& plan) {
  const TrainingSpec& training = plan.training;
  auto dtype = [&writer](std::string_view key, const std::optional<DType>& d) {
    if (d) {
      writer.member(key, dtype_name(*d));
    } else {
      writer.member_null(key);
    }
  };
  writer.begin_object().member("optimizer", optimizer_name(training.optimizer));
  dtype("master_weights", training.master_weights);
  dtype("grad_dtype", training.grad_dtype);
  dtype("state_dtype", training.state_dtype);
  if (plan.zero.stage > 0) {
    writer.key("zero");
    write_zero(writer, plan);
  }
  if (plan.training_layout.active) {
    writer.key("shape");
    write_shape(writer, plan);
  }
  writer.end_object();
}

bool activations_counted(const Plan& plan) {
  return plan.training_layout.active && plan.training_layout.arch.has_value();
}

void write_rank_memory(json::Writer& writer, const RankMemory& rm, bool step) {
  writer.begin_object();
  for (std::size_t k = 0; k < kMemoryKinds; ++k)
    writer.member(memory_kind_name(static_cast<MemoryKind>(k)), rm.bytes[k]);
  if (step) {
    writer.member("activations", rm.activations)
        .member("fsdp2_reduce_scatter", rm.fsdp2_reduce_scatter)
        .member("muon_grad_copy", rm.muon_grad_copy)
        .member("host", rm.host);
  } else if (rm.host > 0) {
    writer.member("host", rm.host);  // `training.offload` without a training shape
  }
  writer.member("total", rm.total);
  writer.end_object();
}

void write_stage_activations(json::Writer& writer, const std::vector<StageActivations>& stages) {
  auto terms = [&writer](const std::vector<ActivationTerm>& ts) {
    writer.begin_array();
    for (const ActivationTerm& term : ts) {
      writer.line_break().begin_object().member("name", term.name).member("bytes", term.bytes);
      writer.member("formula", term.formula).member("source", term.source).end_object();
    }
    writer.end_array();
  };
  writer.begin_array();
  for (const StageActivations& stage : stages) {
    writer.line_break().begin_object().member("stage", stage.stage).member("layers", stage.layers);
    writer.member("in_flight", stage.in_flight).member("virtual_stages", stage.virtual_stages);
    writer.member("per_microbatch_bytes", stage.per_microbatch_bytes).member("bytes", stage.bytes);
    writer.key("terms");
    terms(stage.per_microbatch);
    writer.key("once");
    terms(stage.once);
    writer.end_object();
  }
  writer.line_break().end_array();
}

}  // namespace backend

namespace {

using json::Writer;

void write_stats(Writer& writer, std::string_view key, const KindStats& stats) {
  writer.key(key).begin_object();
  writer.member("min", stats.min).member("median", stats.median).member("max", stats.max);
  writer.end_object();
}

void write_coords(Writer& writer, const Mesh& mesh, std::int64_t rank) {
  const std::vector<std::int64_t> coords = mesh_coords(mesh, rank);
  writer.begin_object();
  for (std::size_t i = 0; i < mesh.axes.size(); ++i) writer.member(mesh.axes[i].name, coords[i]);
  writer.end_object();
}

void write_rank(Writer& writer, const Plan& plan, const MemoryReport& memory, std::int64_t rank) {
  writer.begin_object().member("rank", rank).member("stage", plan.stage_of_rank(rank));
  writer.key("coords").begin_object().key("dense");
  write_coords(writer, plan.dense, rank);
  writer.key("expert");
  if (plan.expert) {
    write_coords(writer, *plan.expert, rank);
  } else {
    writer.null();
  }
  writer.end_object();
  writer.key("bytes");
  backend::write_rank_memory(writer, memory.at(rank), memory.activations_counted);
  writer.end_object();
}

}  // namespace

std::string render_memory_json(const Plan& plan, const MemoryReport& memory,
                               std::optional<std::int64_t> budget,
                               const std::vector<std::int64_t>& ranks) {
  std::string out;
  Writer writer(out);
  writer.begin_object();
  backend::write_report_head(writer, plan, "shardc.memory/v1");
  writer.line_break().key("layouts").begin_object();
  writer.member("fsdp2_allgather", memory.fsdp2_declared)
      .member("muon_allgather", memory.muon_declared);
  if (memory.fsdp2_every_unit) writer.member("fsdp2_every_unit_gathered", true);
  writer.end_object();
  writer.line_break().member(
      "not_counted", memory.activations_counted ? backend::kNotCountedStep : backend::kNotCounted);
  writer.line_break().key("budget_bytes");
  if (budget) {
    writer.value(*budget);
  } else {
    writer.null();
  }
  writer.key("fits");
  if (budget) {
    writer.value(memory.peak <= *budget);
  } else {
    writer.null();
  }
  writer.line_break().key("stages").begin_array();
  for (const StageMemory& stage : stage_memory(plan, memory)) {
    writer.line_break()
        .begin_object()
        .member("stage", stage.stage)
        .member("num_ranks", stage.num_ranks);
    for (std::size_t k = 0; k < kMemoryKinds; ++k)
      write_stats(writer, memory_kind_name(static_cast<MemoryKind>(k)), stage.kinds[k]);
    if (memory.activations_counted) {
      for (std::size_t k = 0; k < kStepKindNames.size(); ++k)
        write_stats(writer, kStepKindNames[k], stage.step[k]);
    }
    write_stats(writer, "total", stage.total);
    writer.end_object();
  }
  writer.line_break().end_array();
  writer.line_break().key("peak").begin_object();
  writer.member("bytes", memory.peak).member("ranks", memory.peak_ranks.to_string());
  if (memory.activations_counted) writer.member("stage", memory.peak_stage);
  writer.key("first");
  write_rank(writer, plan, memory, memory.peak_ranks.first());
  writer.end_object();
  if (memory.activations_counted) {
    writer.line_break().key("activations");
    backend::write_stage_activations(writer, memory.stage_activations);
  }
  writer.line_break().key("ranks").begin_array();
  for (std::int64_t rank : ranks) {
    writer.line_break();
    write_rank(writer, plan, memory, rank);
  }
  if (!ranks.empty()) writer.line_break();
  writer.end_array();
  writer.line_break().end_object();
  out += '\n';
  return out;
}

}  // namespace shardc
