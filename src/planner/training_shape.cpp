// The training shape against the plan, and the activation model's inputs
// (passes.hpp resolve_training; src/core/activations.hpp).
#include <algorithm>
#include <numeric>
#include <set>
#include <string>
#include <string_view>

#include "planner/passes.hpp"

#include "core/layer_blocks.hpp"
#include "core/pipeline_chunks.hpp"

namespace shardc::passes {
namespace {

void error(DiagnosticSink& sink, const SourceLoc& at, const SourceLoc& fallback,
           std::string message, std::string hint) {
  sink.error(DiagCode::ETraining, at.line > 0 ? at : fallback, std::move(message), std::move(hint));
}

// The layer index of a decoder-layer FQN ("model.layers.12.mlp..." -> 12), or -1.
bool expert_param(const PlannedParam& param) {
  return !param.stacked_from.empty() || param.mesh == MeshKind::Expert ||
         param.name.find(".experts.") != std::string::npos;
}

// The first dense param a rule (not FSDP) splits over dense axis `axis`, or nullptr.
const PlannedParam* rule_sharded_over(const std::vector<PlannedParam>& params, int axis) {
  for (const PlannedParam& param : params) {
    if (param.mesh != MeshKind::Dense) continue;
    for (const auto& chain : param.geometry.per_dim)
      for (const DimSplit& split : chain)
        if (!split.fsdp && split.ways > 1 &&
            std::find(split.axes.begin(), split.axes.end(), axis) != split.axes.end())
          return &param;
  }
  return nullptr;
}

// Product of the sizes of the mesh axes that split some param of `select`
// by a rule (not FSDP), each axis once.
template <class Select>
std::int64_t rule_split_degree(const std::vector<PlannedParam>& params, const Plan& plan,
                               Select select, bool skip_dim0) {
  std::set<int> dense_axes;
  std::set<int> expert_axes;
  for (const PlannedParam& param : params) {
    if (!select(param)) continue;
    for (std::size_t dim = 0; dim < param.geometry.per_dim.size(); ++dim) {
      if (skip_dim0 && dim == 0) continue;
      for (const DimSplit& split : param.geometry.per_dim[dim]) {
        if (split.fsdp) continue;
        for (int axis : split.axes)
          (param.mesh == MeshKind::Expert ? expert_axes : dense_axes).insert(axis);
      }
    }
  }
  std::int64_t degree = 1;
  for (int axis : dense_axes) degree *= plan.dense.axes[static_cast<std::size_t>(axis)].size;
  for (int axis : expert_axes) degree *= plan.expert->axes[static_cast<std::size_t>(axis)].size;
  return degree;
}

}  // namespace

void resolve_training(const std::vector<PlannedParam>& params, Plan& plan, const Model& model,
                      const Recipe& recipe, DiagnosticSink& sink) {
  const TrainingShape& shape = recipe.training.shape;
  const SourceLoc& section = recipe.training.loc;
  TrainingLayout& out = plan.training_layout;
  const PipelineSchedule& schedule = shape.pipeline_schedule;
  const std::int64_t pp = plan.num_stages;
  const std::int64_t vp = plan.virtual_stages;
  // The decoder's layer blocks (core/layer_blocks.hpp): a vision tower's blocks are
  // another stack, neither counted as decoder layers nor sized by the activation model.
  std::vector<std::string_view> names;
  names.reserve(params.size());
  for (const PlannedParam& param : params) names.emplace_back(param.name);
  const std::string decoder = decoder_stack(names, model.attributes.num_hidden_layers);
  const auto layer_index = [&decoder](std::string_view fqn) { return decoder_block(fqn, decoder); };
  // The schedule needs the stages it pipelines.
  if (schedule.written && pp <= 1) {
    error(sink, schedule.loc, section,
          std::string("`training.pipeline_schedule.kind: ") +
              pipeline_schedule_name(schedule.kind) +
              "` needs a pipeline of at least 2 stages; the plan has 1",
          "add a `pipeline` section over a pp axis of size >= 2, or remove the schedule");
  }
  if (schedule.kind == PipelineScheduleKind::Interleaved && pp > 1 && vp <= 1) {
    error(sink, schedule.loc, section,
          "`training.pipeline_schedule.kind: interleaved` needs `pipeline.virtual_stages` >= 2 "
          "(model chunks per stage); the plan has 1",
          "set `pipeline.virtual_stages: 2` (Megatron's --num-layers-per-virtual-pipeline-stage), "
          "or use kind 1f1b");
  }
  // Chunks per rank the schedule runs: one for 1F1B and GPipe (torch's single-stage
  // schedules, Schedule1F1B / ScheduleGPipe), exactly two for the V schedules
  // (ScheduleZBVZeroBubble and ScheduleDualPipeV raise otherwise).
  const auto chunks_error = [&](const std::string& runs, const std::string& hint) {
    error(sink, schedule.loc, section,
          std::string("`training.pipeline_schedule.kind: ") +
              pipeline_schedule_name(schedule.kind) + "` runs " + runs +
              "; the plan has `pipeline.virtual_stages: " + std::to_string(vp) + "`",
          hint);
  };
  const bool single_stage = schedule.kind == PipelineScheduleKind::OneFOneB ||
                            schedule.kind == PipelineScheduleKind::GPipe;
  if (schedule.written && pp > 1 && single_stage && vp > 1) {
    chunks_error("one model chunk per stage",
                 "use kind interleaved (or zero_bubble, zbv, dualpipev) with virtual stages, or "
                 "drop `pipeline.virtual_stages` (torch's Schedule1F1B / ScheduleGPipe take one "
                 "stage per rank)");
  }
  if (v_shaped(schedule.kind) && pp > 1 && vp != 2) {
    chunks_error("exactly two model chunks per stage in a V",
                 "set `pipeline.virtual_stages: 2` (torch's ScheduleZBVZeroBubble and "
                 "ScheduleDualPipeV raise unless each rank has 2 stages)");
  }
  // The context-parallel axis.
  std::int64_t cp = 1;
  if (shape.context_parallel) {
    const int axis = plan.dense.find(*shape.context_parallel);
    if (axis < 0) {
      error(sink, shape.context_parallel_loc, section,
            "`training.context_parallel: " + *shape.context_parallel +
                "` names no axis of the dense mesh",
            "name the mesh axis that splits the sequence (torchtitan's `cp`)");
    } else if (axis == plan.pipeline_axis) {
      error(sink, shape.context_parallel_loc, section,
            "`training.context_parallel` names the pipeline axis `" + *shape.context_parallel + "`",
            "the pipeline axis splits the layers, not the sequence");
    } else if (const PlannedParam* sharded = rule_sharded_over(params, axis)) {
      // Trial D 2: `context_parallel: tp` passed --strict with tp 8 and cp 8 on the same
      // ranks (tokens per rank divided twice, dp 1 on a dp-8 mesh).
      error(sink, shape.context_parallel_loc, section,
            "`training.context_parallel` names axis `" + *shape.context_parallel +
                "`, which a rule shards " + sharded->name +
                " over: context-parallel ranks hold the same params (their own part of every "
                "sequence)",
            "name an axis no rule places a `Shard` on (torchtitan's `cp`; FSDP may shard over "
            "it), and keep tensor parallelism on its own axis");
    } else {
      cp = plan.dense.axes[static_cast<std::size_t>(axis)].size;
    }
  }
  // Load-balanced CP cuts each sequence into 2 x cp chunks (torch's _HeadTailLoadBalancer,
  // Megatron arguments.py `seq_length % (context_parallel_size * 2) == 0`).
  const std::int64_t cp_chunks = cp > 1 ? 2 * cp : 1;
  if (shape.seq_len && *shape.seq_len % cp_chunks != 0) {
    error(sink, shape.seq_len_loc, section,
          "`training.seq_len` " + std::to_string(*shape.seq_len) + " is not divisible by " +
              (cp > 1 ? "2 x the " + std::to_string(cp) + " context-parallel ranks"
                      : std::to_string(cp)),
          "torch context_parallel (load-balanced) and Megatron's CP cut every sequence into 2 x "
          "cp equal chunks");
  }
  const std::int64_t tp = rule_split_degree(
      params, plan,
      [&layer_index](const PlannedParam& param) {
        return param.mesh == MeshKind::Dense && !expert_param(param) &&
               layer_index(param.name) >= 0;
      },
      false);
  const std::int64_t expert_tp =
      plan.expert || std::any_of(params.begin(), params.end(), expert_param)
          ? rule_split_degree(
                params, plan, [](const PlannedParam& param) { return !param.stacked_from.empty(); },
                true)
          : 1;
  // Sequence parallelism splits each rank's sequence over tp (Megatron mappings.py
  // _split_along_first_dim asserts it divides; trial D 8).
  if (shape.seq_len && shape.sequence_parallel && tp > 1 && *shape.seq_len % cp_chunks == 0 &&
      (*shape.seq_len / cp) % tp != 0) {
    error(sink, shape.seq_len_loc, section,
          "`training.seq_len` " + std::to_string(*shape.seq_len) +
              (cp > 1 ? " over " + std::to_string(cp) + " context-parallel ranks leaves " +
                            std::to_string(*shape.seq_len / cp) + " tokens per rank,"
                      : " is") +
              " not divisible by tp " + std::to_string(tp) + " under sequence_parallel",
          "a sequence length that is a multiple of " +
              std::to_string(std::lcm(cp_chunks, cp * tp)) +
              " (Megatron's sequence parallelism splits the tokens evenly over tp)");
  }
  const std::int64_t dense_world = plan.world_size;
  const std::int64_t dp =
      std::max<std::int64_t>(1, dense_world / std::max<std::int64_t>(1, pp * tp * cp));
  // Micro-batches per step.
  std::int64_t micro_batches = pp > 1 ? pp * vp : 1;
  std::string from = pp > 1 ? "default: pp x virtual_stages" : "default: 1";
  if (shape.gradient_accumulation_steps) {
    micro_batches = *shape.gradient_accumulation_steps;
    from = "gradient_accumulation_steps";
  }
  if (shape.global_batch_size) {
    const std::int64_t per_step = shape.micro_batch_size * dp;
    if (*shape.global_batch_size % per_step != 0) {
      error(sink, shape.global_batch_size_loc, section,
            "`training.global_batch_size` " + std::to_string(*shape.global_batch_size) +
                " is not a multiple of micro_batch_size x data-parallel ranks = " +
                std::to_string(shape.micro_batch_size) + " x " + std::to_string(dp) + " = " +
                std::to_string(per_step),
            "the data-parallel degree is world / (pp x tp x cp) = " + std::to_string(dense_world) +
                " / (" + std::to_string(pp) + " x " + std::to_string(tp) + " x " +
                std::to_string(cp) + ")");
    } else {
      micro_batches = *shape.global_batch_size / per_step;
      from = "global_batch_size / (micro_batch_size x dp)";
    }
  }
  if (schedule.microbatches) {
    if ((shape.gradient_accumulation_steps || shape.global_batch_size) &&
        *schedule.microbatches != micro_batches && from != "default: 1" &&
        from.rfind("default", 0) != 0) {
      error(sink, schedule.microbatches_loc, section,
            "`training.pipeline_schedule.microbatches` " + std::to_string(*schedule.microbatches) +
                " disagrees with the " + std::to_string(micro_batches) + " micro-batches of " +
                from,
            "write the micro-batch count once");
    }
    micro_batches = *schedule.microbatches;
    from = "pipeline_schedule.microbatches";
  }
  if (schedule.kind == PipelineScheduleKind::Interleaved && pp > 1 && micro_batches % pp != 0) {
    error(sink, schedule.microbatches_loc.line > 0 ? schedule.microbatches_loc : schedule.loc,
          section,
          "the interleaved schedule runs " + std::to_string(micro_batches) +
              " micro-batches, not a multiple of the " + std::to_string(pp) + " stages",
          "Megatron's interleaved 1F1B requires num_microbatches % pipeline size == 0 "
          "(schedules.py forward_backward_pipelining_with_interleaving)");
  }
  if (schedule.kind == PipelineScheduleKind::DualPipeV && pp > 1 && micro_batches < 2 * pp) {
    error(sink, schedule.microbatches_loc.line > 0 ? schedule.microbatches_loc : schedule.loc,
          section,
          "dualpipev runs " + std::to_string(micro_batches) + " micro-batches, fewer than its " +
              std::to_string(2 * pp) + " stages (2 x " + std::to_string(pp) + " ranks)",
          "torch's ScheduleDualPipeV requires at least as many micro-batches as stages");
  }
  // Layers per stage by kind and recompute mode.
  std::vector<StageLayers> stages(static_cast<std::size_t>(std::max<std::int64_t>(1, pp)));
  std::set<std::int64_t> seen;
  std::set<std::int64_t> moe;
  struct LayerPlace {
    std::int64_t layer = 0;
    int stage = 0;
    int virtual_stage = 0;  // with stage: the model chunk
  };
  std::vector<LayerPlace> layer_stage;  // model order
  std::vector<LayerParamShape> layer0;
  std::int64_t first_layer = -1;
  for (const PlannedParam& param : params) {
    const std::int64_t li = layer_index(param.name);
    // A learned position embedding (GPT-2's wpe) tells activation_arch there is no RoPE.
    if (li < 0 && is_position_embedding(param.name)) {
      layer0.push_back({param.name, param.global_shape});
    }
    if (li < 0) continue;
    if (first_layer < 0) first_layer = li;
    if (li == first_layer) layer0.push_back({param.name, param.global_shape});
    if (expert_param(param)) moe.insert(li);
    if (seen.insert(li).second)
      layer_stage.push_back(LayerPlace{li, param.stage, param.virtual_stage});
  }
  const std::int64_t layers = static_cast<std::int64_t>(layer_stage.size());
  for (const RecomputeRange& range : shape.recompute_ranges) {
    if (range.end_layer > layers) {
      error(
          sink, range.loc, section,
          "`training.recompute` names layers [" + std::to_string(range.first_layer) + ", " +
              std::to_string(range.end_layer) + ") but the model has " + std::to_string(layers) +
              " layer blocks",
          "layer blocks are numbered 0.." + std::to_string(std::max<std::int64_t>(0, layers - 1)));
    }
  }
  // In model order: a layer starts a chunk of its stage when the layer before it ran in
  // another chunk (recompute_tails: what a recomputed layer's backward finds freed).
  for (std::size_t i = 0; i < layer_stage.size(); ++i) {
    const LayerPlace& place = layer_stage[i];
    StageLayers& counts =
        stages[static_cast<std::size_t>(std::clamp<std::int64_t>(place.stage, 0, pp - 1))];
    const bool chunk_start = i == 0 || layer_stage[i - 1].stage != place.stage ||
                             layer_stage[i - 1].virtual_stage != place.virtual_stage;
    counts.add_layer(moe.count(place.layer) > 0 ? LayerKind::Moe : LayerKind::Dense,
                     shape.recompute_of(place.layer), chunk_start);
  }
  stages.front().embedding = true;
  // The logits sit with the model's last chunk: the last stage, or stage 0 in a V.
  stages[static_cast<std::size_t>(
             std::clamp<std::int64_t>(chunk_place(pp * vp - 1, pp, plan.v_shape).stage, 0, pp - 1))]
      .logits = true;
  out.active = shape.seq_len.has_value();
  out.degrees = ActivationLayout{tp, expert_tp, shape.sequence_parallel && tp > 1, cp};
  out.dp = dp;
  out.microbatches = micro_batches;
  out.microbatches_from = from;
  out.schedule = schedule.written ? schedule.kind
                 : vp > 1         ? PipelineScheduleKind::Interleaved
                                  : PipelineScheduleKind::OneFOneB;
  DType dtype = params.empty() ? DType::BFloat16 : params.front().dtype;
  out.activation_dtype = shape.activation_dtype.value_or(dtype);
  out.stages = std::move(stages);
  if (!out.active) return;
  std::string missing;
  out.arch = activation_arch(model.attributes, layer0, missing);
  if (out.arch) {
    // A padded vocabulary (`vocab_padding`) is what the output layer computes logits over
    // (Megatron's padded_vocab_size; trial D 9: the logits used the real rows).
    for (const PlannedParam& param : params)
      if (param.vocab_rows > 0 && param.vocab_rows == out.arch->vocab &&
          !param.global_shape.empty())
        out.arch->vocab = std::max(out.arch->vocab, param.global_shape[0]);
  }
  if (!out.arch) {
    out.arch_missing = missing;
    out.arch_missing_loc = model.attributes.loc.file.empty() ? SourceLoc{model.source_path, 0, 0}
                                                             : model.attributes.loc;
  }
}

}  // namespace shardc::passes
