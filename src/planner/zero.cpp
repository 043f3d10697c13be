// Optimizer-state sharding (`training.zero`, `distributed_optimizer`,
// `zero_optimization.stage`; src/core/recipe.hpp ZeroSpec): resolves
// the data-parallel groups the fp32 master weights and optimizer state (and
// under ZeRO-2 the grads) are sharded over.
//
// Two groups, as Megatron-Core builds them (parallel_state.py: the data
// parallel group for dense params, the expert data parallel group for
// experts; DistributedDataParallel puts expert params in their own buffers,
// distributed_data_parallel.py `expert_parallel_buffers`):
//  * dense: the dense mesh's axes but the pipeline axis on which no
//    non-expert param is sharded (TP, CP-like axes shard something; the
//    DP axes, and an `ep` axis of the dense mesh, shard nothing dense);
//  * expert: the experts' mesh (the expert mesh, else the dense mesh) axes
//    but the pipeline axis on which no stacked expert is sharded (EP and
//    expert TP shard them; expert DP does not).
// `shard` / `expert_shard` name the axes instead; each must exist, not be
// the pipeline axis and shard no param of its group (E-ZERO).
// Stage 3 is FSDP: it needs the `fsdp` section, whose axes it records;
// stages 1 and 2 beside `fsdp` are refused (FSDP already shards all three).
#include <string>

#include "planner/buffers.hpp"
#include "planner/passes.hpp"

namespace shardc::passes {
namespace {

bool expert_class(const PlannedParam& param) {
  return param.mesh == MeshKind::Expert || stacked_expert(param);
}

// True when some param of the class sits on `mesh_kind` and is sharded on axis `a`.
bool axis_shards_class(const std::vector<PlannedParam>& params, bool experts, MeshKind mesh_kind,
                       int axis) {
  for (const PlannedParam& param : params) {
    if (expert_class(param) != experts || param.mesh != mesh_kind) continue;
    const auto i = static_cast<std::size_t>(axis);
    if (i < param.placements.size() &&
        param.placements[i].kind != ResolvedPlacement::Kind::Replicate)
      return true;
  }
  return false;
}

std::string axis_names(const Mesh& mesh) {
  std::string text;
  for (const MeshAxis& axis : mesh.axes)
    text += (text.empty() ? "" : ", ") + axis.name + " (" + std::to_string(axis.size) + ")";
  return text;
}

// The section's key as written: `training.zero`, `training.zero_optimization`.
std::string section_of(const ZeroSpec& spec) {
  return spec.spelling == "zero_optimization.stage" ? "training.zero_optimization"
                                                    : "training." + spec.spelling;
}

// "training.zero stage 2", "training.zero_optimization.stage 2",
// "training.distributed_optimizer (ZeRO-1)".
std::string stage_label(const ZeroSpec& spec) {
  if (spec.spelling == "distributed_optimizer") return "training.distributed_optimizer (ZeRO-1)";
  const std::string stage = std::to_string(spec.stage);
  if (spec.spelling == "zero_optimization.stage")
    return "training.zero_optimization.stage " + stage;
  return "training.zero stage " + stage;
}

struct GroupInput {
  bool experts = false;
  MeshKind mesh_kind = MeshKind::Dense;
  const Mesh* mesh = nullptr;
  int pipeline_axis = -1;
  const std::vector<std::string>* names = nullptr;
  const std::vector<SourceLoc>* locs = nullptr;
  const char* field = "shard";
};

ZeroGroup resolve_group(const std::vector<PlannedParam>& params, const GroupInput& in,
                        const ZeroSpec& spec, DiagnosticSink& sink) {
  ZeroGroup group;
  group.mesh = in.mesh_kind;
  const Mesh& mesh = *in.mesh;
  const char* what = in.experts ? "stacked expert" : "dense param";
  if (in.names->empty()) {
    for (std::size_t i = 0; i < mesh.axes.size(); ++i) {
      const int axis = static_cast<int>(i);
      if (axis == in.pipeline_axis) continue;
      if (axis_shards_class(params, in.experts, in.mesh_kind, axis)) continue;
      group.axes.push_back(axis);
      group.degree *= mesh.axes[i].size;
    }
    return group;
  }
  const std::string field = section_of(spec) + "." + in.field;
  for (std::size_t k = 0; k < in.names->size(); ++k) {
    const std::string& name = (*in.names)[k];
    const SourceLoc loc = k < in.locs->size() && (*in.locs)[k].line > 0 ? (*in.locs)[k] : spec.loc;
    const int axis = mesh.find(name);
    if (axis < 0) {
      sink.error(DiagCode::EZero, loc,
                 field + " names axis '" + name + "' but the " +
                     (in.mesh_kind == MeshKind::Expert ? "expert_mesh" : "mesh") +
                     " has no such axis",
                 "axes of that mesh: " + axis_names(mesh));
      continue;
    }
    if (axis == in.pipeline_axis) {
      sink.error(DiagCode::EZero, loc,
                 field + " names the pipeline axis '" + name +
                     "': pipeline stages hold different params, they cannot share one "
                     "optimizer shard",
                 "list the data-parallel axes only");
      continue;
    }
    if (axis_shards_class(params, in.experts, in.mesh_kind, axis)) {
      sink.error(DiagCode::EZero, loc,
                 field + " names axis '" + name + "', which shards a " + what +
                     ": its ranks hold different pieces, not data-parallel copies",
                 "list the axes every " + std::string(what) +
                     " is replicated on (or omit the list: it is inferred)");
      continue;
    }
    group.axes.push_back(axis);
    group.degree *= mesh.axes[static_cast<std::size_t>(axis)].size;
  }
  return group;
}

// Stage 3 records the FSDP axes (memory is FSDP's: nothing more is sharded).
ZeroGroup fsdp_group(const Mesh& mesh, MeshKind kind, const std::vector<std::string>& names) {
  ZeroGroup group;
  group.mesh = kind;
  for (const std::string& name : names) {
    const int axis = mesh.find(name);
    if (axis < 0) continue;  // E-AXIS from apply_fsdp
    group.axes.push_back(axis);
    group.degree *= mesh.axes[static_cast<std::size_t>(axis)].size;
  }
  return group;
}

}  // namespace

namespace {

// A megatron_distopt / deepspeed_zero buffer lays out what a ZeRO stage
// shards: it needs one (Megatron's distributed optimizer is stage 1 or 2:
// Megatron-FSDP is another layout; DeepSpeed's stage 3 partitions per param).
void check_flat_buffers(const Recipe& recipe, DiagnosticSink& sink) {
  const int stage = recipe.training.zero.stage;
  for (const BufferSpec& buffer : recipe.buffers) {
    if (buffer.kind != BufferKind::MegatronDistOpt && buffer.kind != BufferKind::DeepSpeedZero)
      continue;
    const char* kind = buffer_kind_name(buffer.kind);
    if (stage == 0) {
      sink.error(DiagCode::EZero, buffer.loc,
                 std::string("a ") + kind +
                     " buffer lays out the shards of a ZeRO stage, and the recipe shards no "
                     "optimizer state",
                 buffer.kind == BufferKind::MegatronDistOpt
                     ? "add `training: {distributed_optimizer: true}` (or `zero: 1`)"
                     : "add `training: {zero_optimization: {stage: 1}}` (or 2, or 3 with `fsdp`)");
    } else if (stage == 3 && buffer.kind == BufferKind::MegatronDistOpt) {
      sink.error(DiagCode::EZero, buffer.loc,
                 "a megatron_distopt buffer with ZeRO stage 3: Megatron's distributed optimizer "
                 "keeps the params whole (stage 1; its grads are reduce-scattered, stage 2)",
                 "use stage 1 or 2 for megatron_distopt, or deepspeed_zero for ZeRO-3's "
                 "per-param partitions");
    }
  }
}

}  // namespace

void resolve_zero(const std::vector<PlannedParam>& params, Plan& plan, const Recipe& recipe,
                  DiagnosticSink& sink) {
  const ZeroSpec& spec = recipe.training.zero;
  plan.zero = ZeroPlan{};
  check_flat_buffers(recipe, sink);
  if (spec.stage == 0) return;
  plan.zero.stage = spec.stage;
  // Megatron with --bf16 accumulates and reduces grads in fp32 unless
  // --grad-reduce-in-bf16 (megatron/training/arguments.py: `accumulate_allreduce_grads_in_fp32
  // = True` "for bfloat16 data type"), so its distributed optimizer's bf16 params take 6 +
  // 12/d bytes, not 4 + 16/d (trial D 4: the Megatron spelling defaulted to bf16 grads).
  const bool megatron =
      spec.spelling == "distributed_optimizer" ||
      std::any_of(recipe.buffers.begin(), recipe.buffers.end(), [](const BufferSpec& buffer) {
        return buffer.kind == BufferKind::MegatronDistOpt;
      });
  const bool bf16 = std::any_of(params.begin(), params.end(), [](const PlannedParam& param) {
    return param.requires_grad && param.dtype == DType::BFloat16;
  });
  if (megatron && bf16 && !plan.training.grad_dtype) {
    plan.training.grad_dtype = DType::Float32;
    plan.training.grad_dtype_default =
        "Megatron's default for bf16 params: accumulate_allreduce_grads_in_fp32; "
        "`grad_dtype: bfloat16` is --grad-reduce-in-bf16";
  }
  for (const PlannedParam& param : params) plan.zero.has_experts |= expert_class(param);
  const std::string name = stage_label(spec);
  if (spec.stage == 3) {
    if (!recipe.fsdp) {
      sink.error(DiagCode::EZero, spec.loc,
                 name +
                     " shards the params too: that is FSDP, and the recipe has no `fsdp` "
                     "section",
                 "add `fsdp: {shard: [dp]}` (the DP axes; `expert_shard` for stacked experts), "
                 "or use stage 1 (optimizer state) or 2 (also grads)");
      return;
    }
    plan.zero.dense = fsdp_group(plan.dense, MeshKind::Dense, recipe.fsdp->shard);
    plan.zero.expert = plan.expert
                           ? fsdp_group(*plan.expert, MeshKind::Expert, recipe.fsdp->expert_shard)
                           : fsdp_group(plan.dense, MeshKind::Dense, recipe.fsdp->expert_shard);
    return;
  }
  if (recipe.fsdp) {
    sink.error(DiagCode::EZero, spec.loc,
               name +
                   " beside `fsdp`: FSDP already shards params, grads and optimizer state "
                   "(ZeRO-3)",
               "drop `fsdp` for ZeRO-" + std::to_string(spec.stage) +
                   " (replicated params), or drop the stage and keep FSDP");
    return;
  }
  if (spec.stage == 2 && plan.num_stages > 1) {
    // Trial D 3: DeepSpeed's PipelineEngine asserts `zero_optimization_stage() <
    // ZeroStageEnum.gradients` ("ZeRO-2 and ZeRO-3 are incompatible with pipeline
    // parallelism", deepspeed/runtime/pipe/engine.py); Megatron's distributed optimizer is
    // ZeRO-1 (its grad buffer stays whole). Nobody runs a pipeline with sharded grads.
    sink.error(DiagCode::EZero, spec.loc,
               name + " with a pipeline of " + std::to_string(plan.num_stages) +
                   " stages: DeepSpeed's pipeline engine refuses ZeRO-2 (\"ZeRO-2 and ZeRO-3 "
                   "are incompatible with pipeline parallelism\"), and Megatron's distributed "
                   "optimizer keeps whole grads (ZeRO-1)",
               "use stage 1 with the pipeline (`distributed_optimizer: true` in Megatron), or "
               "`fsdp` (FSDP2 runs under torch's pipelining)");
    return;
  }
  const std::size_t errors_before = sink.error_count();
  GroupInput dense{false,       MeshKind::Dense,  &plan.dense, plan.pipeline_axis,
                   &spec.shard, &spec.shard_locs, "shard"};
  plan.zero.dense = resolve_group(params, dense, spec, sink);
  GroupInput expert = dense;
  expert.experts = true;
  expert.names = &spec.expert_shard;
  expert.locs = &spec.expert_shard_locs;
  expert.field = "expert_shard";
  if (plan.expert) {
    expert.mesh_kind = MeshKind::Expert;
    expert.mesh = &*plan.expert;
    expert.pipeline_axis = plan.expert_pipeline_axis;
  }
  plan.zero.expert = resolve_group(params, expert, spec, sink);
  // Trial D 7: a group of one rank shards nothing: the same bytes as no ZeRO, and a recipe
  // meant to shard its optimizer state (a mesh axis left at 1, an axis list naming only
  // size-1 axes) would pass silently.
  const bool dense_whole = plan.zero.dense.degree <= 1;
  const bool expert_whole = !plan.zero.has_experts || plan.zero.expert.degree <= 1;
  if (dense_whole && expert_whole && sink.error_count() == errors_before) {
    sink.warning(DiagCode::WAxisSize1, spec.loc,
                 name +
                     " shards over 1 rank: every data-parallel axis it could use has size 1, "
                     "so it shards nothing (the same bytes as no ZeRO)",
                 "give a data-parallel axis a size > 1 (or list it in `shard`), or drop the "
                 "ZeRO stage");
  }
}

}  // namespace shardc::passes
