// Communication per training step per rank (issue 26 item 5), in BYTES.
//
// Two layers, so that the layout search (issue 22) can price thousands of
// layouts without planning any of them:
//  (a) `stage_communication`: a pure function of the architecture sizes
//      (ActivationArch), the training shape, the layout's degrees and process
//      groups (size, node crossing) and one stage's per-rank parameter and
//      gradient bytes. No Plan, no I/O; cost O(terms).
//  (b) `plan_communication`: the adapter from a Plan. It feeds (a) the exact
//      per-rank byte counts of every shard class (`rank_sums`, never params x
//      ranks) and the groups read off the meshes, and returns per-rank totals
//      by (axis, collective) with the ranks grouped into classes of equal
//      figures.
//
// "Bytes" of a term are the bytes ONE rank SENDS in that collective over one
// step (the ring algorithm's count; a ring receives as much as it sends).
// For a group of n ranks and a collective whose full buffer is B bytes
// (B = the all-gather output, the reduce-scatter input, the all-reduce
// tensor, the all-to-all input):
//  * all-gather:      (n - 1) / n x B  (each rank forwards n - 1 chunks of B / n)
//  * reduce-scatter:  (n - 1) / n x B
//  * all-reduce:      2 (n - 1) / n x B (reduce-scatter + all-gather; NCCL's
//                     ring all-reduce, "algorithm bandwidth" = B / t, "bus
//                     bandwidth" = 2 (n - 1) / n x B / t: NVIDIA nccl-tests
//                     doc/PERFORMANCE.md)
//  * all-to-all:      (n - 1) / n x B  (the B / n addressed to itself stays)
//  * send/recv:       B (point to point, one peer)
// Every division rounds up per call (a ring moves whole chunks; FSDP2 pads
// its shards so B is a multiple of n already). n = 1 moves nothing (every
// term is 0 and omitted).
//
// Terms (s = seq_len / cp tokens of a sequence on the rank, b = micro-batch,
// T = s b, h = hidden, e = activation element size, m = micro-batches per
// step, L_p = the stage's layers, k = top-k):
//  * FSDP2 (torch.distributed.fsdp.fully_shard; FSDPParamGroup): forward
//    all-gathers every unit (B = the unit's unsharded padded bytes = shard x
//    n); with reshard_after_forward the backward all-gathers it again,
//    except the root unit (FSDP2 FSDPState._lazy_init: the root keeps its
//    params after forward, `post_forward_mesh_info = None`). Gradients are
//    reduce-scattered (B = unsharded grad bytes in the reduce dtype).
//    Without a pipeline, gradient accumulation as torchtitan runs it
//    (train.py: forward_backward_step once per micro-batch, no
//    set_requires_gradient_sync(False)) syncs every micro-batch: m forward
//    gathers, m backward gathers (reshard_after_forward) and m
//    reduce-scatters. With a pipeline, torch.distributed.pipelining
//    (stage.py backward_maybe_with_nosync) turns off gradient sync and
//    reshard-after-backward until the last micro-batch, which runs
//    post_backward: one reduce-scatter per step; with reshard_after_forward
//    false (torchtitan's default under PP: parallelize.py apply_fsdp,
//    `reshard_after_forward = not pp_enabled`) the params stay gathered from
//    the first forward to the last backward: one all-gather per step; with
//    it true every forward and backward gathers (m + m, an upper bound: the
//    schedule may find a unit still gathered).
//  * HSDP (fully_shard over a 2-D mesh, replicate x shard): after the
//    reduce-scatter, the gradient SHARD is all-reduced over the replicate
//    group (FSDPParamGroup.post_backward, `all_reduce` of the
//    reduce-scatter output): B = shard grad bytes, same count as the
//    reduce-scatter.
//  * plain data parallel (DDP, no FSDP and no ZeRO): gradient all-reduce of
//    every replicated trainable param once per step (DDP's no_sync /
//    Megatron's grad accumulation fusion sync on the last micro-batch),
//    B = local grad bytes.
//  * ZeRO-1/2 / Megatron distributed optimizer: grads reduce-scattered
//    (B = local grad bytes) and the updated params all-gathered (B = local
//    param bytes) over the ZeRO group, once per step
//    (megatron/core/distributed/param_and_grad_buffer.py, the
//    `reduce_scatter_tensor` of start_grad_sync and `all_gather` of
//    start_param_sync; DeepSpeed stage_1_and_2.py reduce-scatters the
//    partitioned grads and all-gathers the updated partitions).
//  * TP, per layer (Korthikanti et al. 2022, arXiv 2205.05198, Sec. 4.2.2
//    and Fig. 4: "a transformer layer ... four all-reduce operations in a
//    single forward and backward pass"): without sequence parallel, 2
//    all-reduces forward (after attention's o_proj, after the MLP's
//    down_proj: RowwiseParallel's Partial output) and 2 backward (the input
//    gradients of the ColwiseParallel q/k/v and gate/up), B = e T h each;
//    with sequence parallel, each all-reduce is an all-gather + a
//    reduce-scatter of the same B (same bytes). Full recompute runs the
//    layer's forward again in backward: 2 more all-reduces per layer.
//    torch's parallelize_module on unfused q/k/v and gate/up
//    (transformers' base_model_tp_plan; CommLayout::tp_per_linear) reduces
//    each ColwiseParallel linear's input gradient on its own: 3 + 2 in
//    backward for a gated layer instead of 2 (MLA: counted as fused). An MoE
//    layer reduces its attention, and its MLP block only with shared
//    experts (the routed experts' TP is the expert mesh's). With a
//    vocab-parallel embedding and lm_head (CommLayout::vocab_parallel) the
//    embedding (vocab-parallel, RowwiseParallel on dim 0) all-reduces its
//    output once per micro-batch forward, the lm_head (colwise) its input
//    gradient once backward (B = e T h each); the loss over vocab-parallel
//    logits (torch loss_parallel, Megatron _VocabParallelCrossEntropy)
//    all-reduces 3 fp32 statistics per token (max, sum of exp, target
//    logit): B = 12 T.
//  * CP: torch.distributed.tensor.experimental.context_parallel's default
//    rotate method "allgather" (torch/distributed/tensor/experimental/
//    _attention.py, `_cp_options.rotate_method = _RotateMethod.ALL_GATHER`):
//    per layer, forward all-gathers K and V of the cp ranks (B = 2 e T_full
//    a_kv d / t, T_full = cp T), backward all-gathers them again and
//    reduce-scatters their gradients (same B each). The "alltoall" ring
//    rotation (Liu et al. 2023, Ring Attention) sends the same volume in
//    cp - 1 point-to-point steps. Every FSDP/DP gradient group includes
//    the cp axis (torchtitan flattens dp_shard x cp for FSDP).
//  * EP (token dispatch all-to-all; Megatron MoEAlltoAllTokenDispatcher,
//    torchtitan ExpertParallel._token_dispatch / _token_combine): per MoE
//    layer per micro-batch, forward dispatch and combine (B = T k h e each,
//    dropless balanced routing, or c T k h e with capacity factor c), and
//    backward the same two in reverse: 4 all-to-alls of (ep - 1) / ep x B.
//    Full recompute adds the forward pair again.
//  * PP: per micro-batch, each stage but the last sends its output
//    activation forward (B = e T h) and each stage but the first sends the
//    input gradient backward (same B); with sequence parallel the
//    activation is the rank's 1/t shard (Megatron's
//    scatter_gather_tensors_in_pipeline: torch sends the full tensor).
//    Interleaved: each model chunk boundary sends, so v x as many calls.
//    Counted as the bytes the rank sends (its send/recv peer is on the
//    next / previous stage).
//  * Tied ends on different stages: one all-reduce of the tied grad over the
//    tie's 2 stages per step (Megatron's embedding group).
//
// Not counted: the optimizer step's global-norm all-reduce (one scalar),
// MoE's token-count all-to-all (ep integers per layer), the loss's mean
// over data parallel (one scalar), barrier and bookkeeping collectives.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/activations.hpp"
#include "core/recipe.hpp"
#include "support/rank_set.hpp"

namespace shardc {

struct Plan;

enum class Collective { AllGather, ReduceScatter, AllReduce, AllToAll, SendRecv };
inline constexpr std::size_t kCollectives = 5;

/// JSON / table name: "all_gather", "reduce_scatter", "all_reduce",
/// "all_to_all", "send_recv".
const char* collective_name(Collective collective);

/// Bytes one rank sends in one collective of full buffer `buffer_bytes` over
/// `group_size` ranks (the header's ring counts; 0 for a group of 1).
/// Saturates at INT64_MAX instead of overflowing.
std::int64_t ring_bytes_sent(Collective collective, std::int64_t buffer_bytes,
                             std::int64_t group_size);

/// What a group is for (which terms it carries).
enum class CommRole {
  Fsdp,             ///< dense FSDP shard group (fsdp.shard axes, x cp when CP)
  ExpertFsdp,       ///< expert FSDP shard group (fsdp.expert_shard)
  Replicate,        ///< HSDP replicate group of dense params (fsdp.replicate)
  ExpertReplicate,  ///< HSDP replicate group of the experts
  DataParallel,     ///< plain DDP all-reduce of replicated grads (dense)
  ExpertDataParallel,
  Zero,  ///< ZeRO-1/2 / distributed optimizer group (dense)
  ExpertZero,
  Tp,
  Cp,
  Ep,
  Pp,
  TiedSync,  ///< tied ends on different stages
};
inline constexpr std::size_t kCommRoles = 13;

/// "fsdp", "expert_fsdp", "replicate", "expert_replicate", "dp", "expert_dp",
/// "zero", "expert_zero", "tp", "cp", "ep", "pp", "tied".
const char* comm_role_name(CommRole role);

/// One class of process groups: every group of that role has `size` ranks.
struct CommGroup {
  std::int64_t size = 1;       ///< ranks in the group (1 = no communication)
  bool crosses_nodes = false;  ///< its ranks sit on more than one node
  std::string axes;            ///< mesh axis names, "dp_shard" or "dp_replicate x dp_shard"
};

/// The groups of a layout, by role (indexed by CommRole).
struct CommGroups {
  CommGroup group[kCommRoles]{};
  [[nodiscard]] const CommGroup& of(CommRole role) const {
    return group[static_cast<std::size_t>(role)];
  }
  CommGroup& of(CommRole role) { return group[static_cast<std::size_t>(role)]; }
};

/// The layout as the communication model sees it: degrees and schedule.
struct CommLayout {
  ActivationLayout degrees;  ///< tp, expert_tp, sequence_parallel, cp (activations.hpp)
  std::int64_t ep = 1;       ///< expert-parallel degree (ranks an MoE layer's tokens spread over)
  std::int64_t pp = 1;       ///< pipeline stages
  std::int64_t virtual_stages = 1;
  std::int64_t microbatches = 1;  ///< per step per data-parallel rank (m)
  PipelineScheduleKind schedule = PipelineScheduleKind::OneFOneB;
  /// FSDP2 reshard_after_forward; nullopt = torchtitan's default (true
  /// without a pipeline, false with one).
  std::optional<bool> reshard_after_forward;
  /// Where `reshard_after_forward` comes from: "--reshard-after-forward",
  /// "recipe" (`fsdp.reshard_after_forward`) or "torchtitan default".
  const char* reshard_after_forward_from = "torchtitan default";
  int zero_stage = 0;         ///< 1/2: the Zero groups carry reduce-scatter + all-gather
  bool loss_parallel = true;  ///< vocab-parallel loss (else the logits are all-gathered)
  /// TP input-gradient all-reduces per layer in backward: 2 (fused: one per
  /// block) or the number of ColwiseParallel linears (CommOptions::TpInputs).
  bool tp_per_linear = false;
  /// The embedding and lm_head are split over tp (vocab-parallel).
  bool vocab_parallel = false;
  /// false: the terms' name, formula and source are left empty (the layout search's
  /// phase 1 reads only their roles, collectives, groups and bytes).
  bool texts = true;
  [[nodiscard]] bool reshards() const { return reshard_after_forward.value_or(pp <= 1); }
};

/// One stage's per-rank byte counts (one rank; the adapter passes every
/// shard class's own figure). Bytes summed over dtypes, each element at its
/// own dtype's size; "local" = the rank's piece (padded for FSDP2).
struct StageCommBytes {
  int stage = 0;
  std::int64_t fsdp_param_bytes = 0;  ///< dense params FSDP shards: padded local shard, param dtype
  std::int64_t fsdp_grad_bytes = 0;   ///< their trainable part in the reduce (grad) dtype
  /// Of fsdp_param_bytes, the root unit's (not gathered again in backward).
  std::int64_t fsdp_root_param_bytes = 0;
  std::int64_t expert_fsdp_param_bytes = 0;
  std::int64_t expert_fsdp_grad_bytes = 0;
  /// Trainable params no FSDP split shards (local bytes, grad dtype): DDP
  /// all-reduces them, ZeRO reduce-scatters them, HSDP replicate ... (dense / expert).
  std::int64_t replicated_grad_bytes = 0;
  std::int64_t replicated_param_bytes = 0;  ///< the same params, param dtype (ZeRO all-gather)
  std::int64_t expert_replicated_grad_bytes = 0;
  std::int64_t expert_replicated_param_bytes = 0;
  std::int64_t tied_grad_bytes = 0;  ///< grads of tie ends whose pair spans stages (local)
  StageLayers layers;                ///< the stage's layers by kind and recompute mode
};

/// One term of a stage's communication: one collective kind on one group.
struct CommTerm {
  CommRole role = CommRole::Tp;
  Collective collective = Collective::AllReduce;
  std::string name;               ///< "fsdp.forward_all_gather", "tp.layer_all_reduce"
  std::int64_t calls = 0;         ///< per step
  std::int64_t buffer_bytes = 0;  ///< B of one call (the header's full buffer)
  std::int64_t bytes = 0;         ///< sent per rank per step: calls x ring_bytes_sent(B)
  std::int64_t group_size = 1;
  bool crosses_nodes = false;
  std::string formula;  ///< "m x 2 x (n-1)/n x B = 4 x 2 x 7/8 x 16777216"
  std::string source;   ///< the module / paper it follows
};

/// Every term of one stage (a rank of that stage with those bytes), and the sum.
struct StageComm {
  int stage = 0;
  std::vector<CommTerm> terms;  ///< zero terms omitted
  std::int64_t bytes = 0;       ///< sum of terms
};

/// The communication of one rank on stage `bytes.stage` per step: the pure
/// model (a). `element_bytes` = activation element size. Preconditions (the
/// planner's E-TRAINING checks): seq_len set and divisible by cp, every
/// degree >= 1. Cost O(terms).
StageComm stage_communication(const ActivationArch& arch, const TrainingShape& shape,
                              std::int64_t element_bytes, const CommLayout& layout,
                              const CommGroups& groups, const StageCommBytes& bytes);

/// Ranks with equal communication (every term equal).
struct CommClass {
  StageComm comm;
  RankSet ranks;
  std::int64_t count = 0;
};

/// Per-(role, collective) statistics over all ranks.
struct CommStats {
  CommRole role = CommRole::Tp;
  Collective collective = Collective::AllReduce;
  std::string axes;
  std::int64_t group_size = 1;
  bool crosses_nodes = false;
  std::int64_t min = 0;
  std::int64_t median = 0;  ///< lower median over ranks
  std::int64_t max = 0;
};

/// min / lower median / max over ranks, bytes.
struct ByteStats {
  std::int64_t min = 0;
  std::int64_t median = 0;
  std::int64_t max = 0;
};

/// The adapter's answer (b).
struct CommReport {
  bool counted = false;  ///< a training shape and the architecture sizes
  std::string note;      ///< why not, when not
  CommLayout layout;
  CommGroups groups;
  std::vector<CommClass> classes;  ///< ordered by lowest rank; every rank in one
  std::vector<CommStats> stats;    ///< (role, collective) with a nonzero max, role order
  /// Per collective (indexed by Collective), every role summed, over ranks.
  ByteStats per_collective[kCollectives]{};
  ByteStats total;                  ///< every term of a rank, over ranks
  std::int64_t peak = 0;            ///< the largest per-rank total
  RankSet peak_ranks;               ///< ranks whose total is `peak`
  std::int64_t ranks_per_node = 0;  ///< training.ranks_per_node (0 = one node)
};

/// What the plan does not say and the command may choose.
struct CommOptions {
  /// FSDP2 reshard_after_forward; nullopt = torchtitan's default.
  std::optional<bool> reshard_after_forward;
  /// How many TP input-gradient all-reduces a layer's backward runs:
  /// Fused = one per block (Megatron's fused column-parallel linears,
  /// torchtitan's PrepareModuleInput before attention and feed_forward:
  /// Korthikanti's 2 per layer in backward); PerLinear = one per
  /// ColwiseParallel linear (torch parallelize_module on unfused q/k/v and
  /// gate/up, transformers' base_model_tp_plan: each from_local input's
  /// gradient is reduced on its own: 3 + 2 per gated layer).
  enum class TpInputs { Fused, PerLinear } tp_inputs = TpInputs::Fused;
  bool loss_parallel = true;  ///< vocab-parallel cross entropy (torch loss_parallel)
};

/// Every rank's communication per step for `plan` (its training shape,
/// layout degrees and groups; bytes from each shard class). `counted` false
/// with a note when the plan has no training shape or the model lacks a
/// size. Cost O(params x shard classes + ranks).
CommReport plan_communication(const Plan& plan, const CommOptions& options);

}  // namespace shardc
