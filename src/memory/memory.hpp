// Per-rank training memory from the plan: "will it fit?" (src/memory).
//
// Pure functions from a Plan and its planned buffer layouts to bytes per
// rank, split by kind. Computed per shard class (`rank_sums`, buffer
// classes), never params x ranks: DeepSeek-V3 on 16,384 ranks costs about
// one `validate`.
//
// What is counted, per rank, in BYTES (every figure is exact for the plan;
// nothing is estimated except where a field says so):
//  * params: every param the rank holds, at its PADDED shape (FSDP2 stores
//    each shard in a buffer padded to the first chunk's size and exposes the
//    unpadded narrow as the parameter: torch FSDPParam._init_sharded_param,
//    `padded_sharded_param = param_data.new_zeros(chunks[0].size())`). An
//    alias on the source's stage is counted once (same storage); a tie whose
//    ends sit on different stages is a copy on each stage (contract §5.5).
//  * grads: params with requires_grad, at the PADDED shape (FSDP2's
//    reduce-scatter output is padded and each grad is an as_strided view
//    into it, so the padding stays allocated), in `grad_dtype` or the
//    param's dtype.
//  * master_weights: with `master_weights: float32`, a float32 copy of every
//    trainable param stored narrower than 4 bytes (bf16, fp16, fp8), at the
//    UNPADDED local shape (the optimizer copies the parameter tensor, a view
//    without the padding). Nothing for params already float32/float64, and
//    nothing under `optimizer: none`.
//  * optimizer_state: per trainable param, at the UNPADDED local shape
//    (torch creates state with `torch.zeros_like(p)`, p being the unpadded
//    view): adamw / adam 2 (exp_avg, exp_avg_sq); sgd 1 (momentum_buffer:
//    `sgd` means SGD with momentum; torch's SGD with momentum=0 keeps no
//    state, write `none` for it); muon 1 momentum for params of ndim >= 2
//    (the params the muon_allgather layout gathers) and AdamW's 2 for the
//    rest (hyper-parallel's Muon); none 0. Each state element is
//    `state_dtype`, else the master dtype when the param has a master copy,
//    else the param's dtype (torch.zeros_like). The per-param `step` counter
//    is a 0-d host tensor in torch (CPU unless capturable/fused) and is not
//    counted.
//  * ZeRO-1/2 (`training.zero`, Megatron's `distributed_optimizer: true`,
//    DeepSpeed's `zero_optimization.stage`; plan.zero): master_weights and
//    optimizer_state (stage 2: also grads) are the rank's share of its
//    group's flattened state: ceil(bytes / degree) per group, dense params
//    over plan.zero.dense, stacked experts over plan.zero.expert (the
//    expert data-parallel group). Grads narrower than the master add an
//    fp32 copy of the shard's grads (grads kind, sharded; without ZeRO the
//    copy of the rank's grads, whole: Megatron's Float16Optimizer
//    `main_param.grad = model_param.main_grad.float()`; none for an
//    FSDP-sharded param, whose sharded grad FSDP2 writes directly): Megatron
//    `shard_main_param.grad = shard_model_grad.float()`, DeepSpeed's fp32
//    partition. Params (and stage-1 grads) stay whole: Megatron's grad
//    buffer is reduce-scattered in place and its params all-gathered in
//    place (param_and_grad_buffer.py), so no transient buffer is added.
//    Megatron's own formula (docs "Distributed Optimizer",
//    megatron/training/theoretical_memory_usage.py): bf16 params and fp32
//    grads with Adam take 6 + 12 / d bytes per param. DeepSpeed's reduce
//    bucket (stage 2, `reduce_bucket_size`) is not counted.
//  * fsdp2_allgather: the peak of the planned fsdp2_allgather layout
//    (BufferRankBytes::gathered_peak, the one place it is computed: a unit's
//    unsharded output plus the next unit's, prefetched — the largest sum of
//    two consecutive units in module order). 0 when the recipe plans no
//    fsdp2_allgather buffer (`fsdp2_declared` false: the output says so).
//    Every unit of the rank at once (BufferRankBytes::gathered,
//    `fsdp2_every_unit`) when
//    - the plan has a pipeline: torch.distributed.pipelining runs every
//      backward but the step's last with the stage module's
//      `set_reshard_after_backward(False)` and `set_requires_gradient_sync(False)`
//      (stage.py backward_maybe_with_nosync; `perform_reduce_grad` after
//      the last micro-batch reshards and reduces), so after the first
//      backward every unit of every model chunk of the rank stays gathered,
//      whatever reshard_after_forward says;
//    - or `fsdp.reshard_after_forward: false` without a pipeline: after the
//      forward every unit stays gathered until its backward
//      (FSDPParamGroup.post_forward does not reshard).
//  * muon_allgather: the largest output of one muon all-gather call
//    (BufferRankBytes::call_peak).
//  * total = params + grads + master_weights + optimizer_state +
//    max(fsdp2_allgather, muon_allgather): FSDP2 gathers in forward and
//    backward, Muon in the optimizer step, so their buffers are never alive
//    together. Activations, the CUDA context, NCCL buffers and allocator
//    fragmentation are NOT counted (out of scope; every output says so).
//
// With a training shape (`training.seq_len`, src/core/activations.hpp)
// the report is the peak of a whole step, and adds:
//  * activations: the stage's activation bytes (stage_activations: per
//    micro-batch terms x micro-batches in flight under the schedule).
//  * fsdp2_reduce_scatter: the reduce-scatter input of the unit in backward
//    (FSDP2 FSDPParamGroup.post_backward: the unit's unsharded gradients,
//    `reduce_scatter_input` of numel unit x world, in the reduce dtype =
//    grad_dtype or the param's) alive with the gathered units: the largest
//    unit's gathered bytes of its requires_grad members (frozen members,
//    `fsdp.frozen: shard`, have no gradient) x grad/param element size. Under a pipeline every
//    unit's: with gradient sync off until the last micro-batch
//    (stage.py, above) each unsharded param accumulates its unsharded
//    gradient (FSDPParam.to_accumulated_grad_if_needed) until
//    `perform_reduce_grad`: the rank's gathered bytes of requires_grad
//    members x grad/param size.
//  * muon_grad_copy: the muon step's gathered gradient is orthogonalized
//    into a second full matrix of the same size (Newton-Schulz output)
//    before it is scattered back: one more call_peak.
//  * the gradient accumulation buffer is `grads` (FSDP2 accumulates into
//    the sharded grads, DDP / Megatron into the grad buffer, in grad_dtype):
//    no extra term.
//  * offload (`training.offload`): optimizer (master weights + state),
//    params, grads move to host memory (`host`), off the device total.
//  total = params + grads + master + state (those on the device) +
//          max(activations + fsdp2_allgather + fsdp2_reduce_scatter,
//              muon_allgather + muon_grad_copy):
//  activations and the FSDP2 buffers are alive together in backward, the
//  muon buffers in the optimizer step after the activations are freed.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/activations.hpp"
#include "core/diagnostics.hpp"
#include "core/plan.hpp"
#include "planner/buffers.hpp"
#include "support/rank_set.hpp"

namespace shardc {

enum class MemoryKind {
  Params,
  Grads,
  MasterWeights,
  OptimizerState,
  Fsdp2AllGather,
  MuonAllGather,
};
inline constexpr std::size_t kMemoryKinds = 6;

/// JSON / table name: "params", "grads", "master_weights",
/// "optimizer_state", "fsdp2_allgather", "muon_allgather".
const char* memory_kind_name(MemoryKind kind);

/// True when FSDP2 holds every unit of a rank gathered at its peak (the
/// fsdp2_allgather rule above): under a pipeline, or with
/// `fsdp.reshard_after_forward: false`; else a unit and the next one.
bool fsdp2_every_unit_gathered(const Plan& plan);

/// One rank's memory, in bytes.
struct RankMemory {
  std::array<std::int64_t, kMemoryKinds> bytes{};  ///< indexed by MemoryKind
  /// params + grads + master + optimizer state + max(fsdp2, muon).
  std::int64_t total = 0;
  /// Bytes of params + grads + master + state that FSDP shards (or would
  /// shard, when the recipe has no `fsdp`: trainable params of ndim >= 1);
  /// they shrink as 1 / FSDP degree; on the device only (what `training.offload`
  /// keeps on the host left out). Used for the budget hint.
  std::int64_t fsdp_scaled = 0;
  // With a training shape only (MemoryReport::activations_counted), bytes:
  std::int64_t activations = 0;
  std::int64_t fsdp2_reduce_scatter = 0;
  std::int64_t muon_grad_copy = 0;
  std::int64_t host = 0;  ///< offloaded to host memory (not in `total`), shape or not
  /// Of `grads`: the fp32 copy the optimizer steps on (grads narrower than the master).
  std::int64_t grad_copy = 0;
  /// The max(...) part of `total` with a training shape (activations and buffers).
  std::int64_t step_transient = 0;
  [[nodiscard]] std::int64_t of(MemoryKind k) const { return bytes[static_cast<std::size_t>(k)]; }
};

/// Per-param byte factors after the training defaults are resolved.
struct ParamMemoryRule {
  std::int64_t param_bytes = 0;   ///< per padded element
  std::int64_t grad_bytes = 0;    ///< per padded element (0 when frozen)
  std::int64_t master_bytes = 0;  ///< per local element
  std::int64_t state_count = 0;   ///< optimizer state tensors
  DType state_dtype = DType::Float32;
  std::int64_t state_bytes = 0;  ///< per local element, all state tensors
  /// Per local element, the fp32 copy of the grads the optimizer steps on when grads are
  /// narrower than the master (under ZeRO-1/2 sharded with the state).
  std::int64_t grad_copy_bytes = 0;
};

/// The rule for `param` under `training` (see the header comment for every default).
ParamMemoryRule param_memory_rule(const PlannedParam& param, const TrainingSpec& training);

/// Ranks of one pipeline stage with the same memory (every field of RankMemory equal).
struct MemoryClass {
  int stage = 0;
  RankMemory memory;
  RankSet ranks;
  std::int64_t count = 0;  ///< ranks.size()
};

struct MemoryReport {
  /// Indexed by global rank; filled by `compute_memory` only (per-rank outputs: compile,
  /// verify), empty from `memory_classes_by_runs`.
  std::vector<RankMemory> ranks;
  /// Every rank in exactly one class, classes ordered by lowest rank. What `memory`,
  /// budgets, `inspect` and stage statistics read: O(classes), whatever the world.
  std::vector<MemoryClass> classes;
  bool fsdp2_declared = false;  ///< an fsdp2_allgather layout was planned
  bool muon_declared = false;   ///< a muon_allgather layout was planned
  /// FSDP2 holds every unit of a rank gathered at its peak (a pipeline, or
  /// `fsdp.reshard_after_forward: false`), not a unit and the next one.
  bool fsdp2_every_unit = false;
  std::int64_t peak = 0;  ///< the largest total
  RankSet peak_ranks;     ///< ranks whose total is `peak`
  /// The FSDP degree of dense params (product of the fsdp.shard axes), 1
  /// without FSDP; of stacked experts (fsdp.expert_shard), 1 without.
  std::int64_t fsdp_degree = 1;
  std::int64_t expert_fsdp_degree = 1;
  /// One rank's memory: `ranks[rank]` when filled, else its class (O(classes x runs)).
  /// Precondition (asserted): 0 <= rank < world size.
  [[nodiscard]] const RankMemory& at(std::int64_t rank) const;
  /// A training shape was given and the model has the sizes: activations and
  /// the gradient side of the buffers are in every total.
  bool activations_counted = false;
  /// Why they are not, when a training shape was given ("the model has no
  /// `intermediate_size` attribute"); empty otherwise.
  std::string activations_note;
  std::vector<StageActivations> stage_activations;  ///< per stage, when counted
  int peak_stage = 0;                               ///< the stage of the first peak rank
};

/// Memory of every rank. `buffer_bytes` must come from
/// `buffer_rank_bytes(plan, plan_buffers(plan))`. Cost O(params x shard
/// classes + buffer classes + ranks).
MemoryReport compute_memory(const Plan& plan, const std::vector<BufferRankBytes>& buffer_bytes);

/// Convenience: plans the buffers and computes their bytes first.
MemoryReport compute_memory(const Plan& plan);

/// The memory classes without a per-rank table (`ranks` stays empty), for worlds up to the
/// legal 2^31 - 1 (hostile/memory_world_oom): a dim's piece depends only on the coordinates of
/// the axes its split chain names, so each mesh axis is cut into runs of coordinates whose
/// pieces agree on every chain naming it (compared by a 128-bit hash of the pieces over the
/// chain's other axes), and one representative rank per cell of runs (x stage) is computed
/// like any rank (`shard_at`, `buffer_bytes_at`); cells of equal memory are one class. Cost
/// O(sum over distinct chains of the combinations of their axes' coordinates) + O(cells x
/// params). nullopt, with the reason in `why`, for a plan with an expert mesh (its ranks'
/// coordinates are on two meshes), more than limits::kMaxMemoryReportWorld cells, or rank sets
/// of more than 2^24 runs. Equal to `compute_memory`'s classes (tests/unit/memory).
std::optional<MemoryReport> memory_classes_by_runs(const Plan& plan, std::string* why = nullptr);

/// `compute_memory(plan)` up to limits::kMaxMemoryReportWorld ranks, `memory_classes_by_runs`
/// above: what the commands that need only classes call.
std::optional<MemoryReport> memory_classes(const Plan& plan, std::string* why = nullptr);

/// One pipeline stage's ranks: min / lower median / max per kind and total.
struct KindStats {
  std::int64_t min = 0;
  std::int64_t median = 0;
  std::int64_t max = 0;
};
struct StageMemory {
  int stage = 0;
  std::int64_t num_ranks = 0;
  std::array<KindStats, kMemoryKinds> kinds{};
  /// With a training shape (activations_counted): activations,
  /// fsdp2_reduce_scatter, muon_grad_copy, host (kStepKindNames order).
  std::array<KindStats, 4> step{};
  KindStats total;
};
inline constexpr std::array<const char*, 4> kStepKindNames = {"activations", "fsdp2_reduce_scatter",
                                                              "muon_grad_copy", "host"};

/// Per-stage statistics (stage order). Cost O(ranks log ranks).
std::vector<StageMemory> stage_memory(const Plan& plan, const MemoryReport& report);

/// Per-rank tables (compile's and verify's rank files and plan.json per-rank memory) keep a
/// row per rank: for a world above limits::kMaxMemoryReportWorld, one E-MEMORY-WORLD error at
/// `loc` naming `what` needs them, and false (hostile/memory_world_oom: 2^31 - 1 ranks, 16 GiB
/// per kind). Commands that need only classes call `memory_classes` and `refuse_memory_classes`.
bool check_memory_world(const Plan& plan, const SourceLoc& loc, std::string_view what,
                        DiagnosticSink& sink);

/// E-MEMORY-WORLD at `loc` when `memory_classes` answers nullopt with `why`.
void refuse_memory_classes(const Plan& plan, const SourceLoc& loc, const std::string& why,
                           DiagnosticSink& sink);

/// The budget check: when some rank's total exceeds `budget` bytes, one
/// E-BUDGET error at `loc` (the recipe's `budget`, or the file-less
/// location of `--budget`) naming the worst rank (mesh coordinates, stage),
/// its breakdown, how many ranks are over (and which, as a rank set), and in
/// the hint what would bring it under: the FSDP degree at which the
/// FSDP-scaled state fits (all-gather buffers kept), or that no FSDP degree
/// can. Nothing when every rank fits.
void check_budget(const Plan& plan, const MemoryReport& report, std::int64_t budget,
                  const SourceLoc& loc, DiagnosticSink& sink);

/// "pp=0 dp_shard=3 tp=1" (dense mesh; the expert mesh appended as
/// "| efsdp=0 ep=5" when present).
std::string rank_coords_text(const Plan& plan, std::int64_t rank);

}  // namespace shardc
