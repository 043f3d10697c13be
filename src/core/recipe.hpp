// The sharding recipe after parsing (contract §4): meshes, placement rules,
// expert stacking, ties, pipeline stages, FSDP/HSDP and buffer layouts.
//
// The front end checks syntax (types, unknown keys, placement spelling,
// pattern syntax) and records a SourceLoc on every node; the planner checks
// meaning (axes exist, dims in range, products match).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/diagnostics.hpp"
#include "support/dtype.hpp"
#include "support/limits.hpp"
#include "support/pattern.hpp"

namespace shardc {

/// How one tensor dim of length L is split over n ranks (contract §5.1).
enum class SplitRule {
  Chunk,     ///< torch.chunk / DTensor Shard / FSDP2: c = ceil(L/n)
  Balanced,  ///< hyper-parallel: q, r = divmod(L, n); first r ranks get q+1
  Even,      ///< error unless L % n == 0 (then as Chunk)
  /// Megatron `make-vocab-size-divisible-by`, vLLM / ColossalAI vocab
  /// padding: every piece allocates c = ceil(L / (n x m)) x m (m the pad
  /// multiple); piece k holds the real rows [k c, min((k+1) c, L)) and pad
  /// rows after them (pad rows sit at the end of the padded tensor n x c).
  Pad,
};

/// Bounds of the per-rule extras (front end): pad multiples and units are in
/// [1, kMaxPadOrUnit], part counts in [1, kMaxParts] (shardc/limits.hpp).
using limits::kMaxPadOrUnit;
using limits::kMaxParts;

/// A packed (fused) parameter (`packed:` on a rule): the tensor is its parts
/// concatenated on `dim` (SwiGLU [W; V], fused q|k|v). Each part is split on
/// its own by the rule's placements; a rank's local tensor is its pieces of
/// every part concatenated in part order. Interleaved and per-group layouts
/// (contract §5.10): `interleave: k` (equal parts alternating in blocks of k
/// elements: gpt-oss gate|up is 1) or `groups: G` (G consecutive groups, each
/// holding parts[i] / G elements of every part: Megatron's linear_qkv, G =
/// query groups); their part pieces are contiguous, so a rank holds one box
/// and the split counts whole groups.
///
/// Parts with their own placement (issue 27 item 7): a part written as a map
/// `{size: S, name: k, replicas: R}` is split by the rule's one split of the
/// packed dim (W ways) into W / R pieces, piece floor(c / R) held by split
/// coordinate c: R consecutive coordinates hold the same piece, R = W holds
/// the whole part on every coordinate. This is vLLM's QKVParallelLinear for
/// fewer KV heads than tp (vllm/model_executor/layers/linear.py:
/// num_kv_head_replicas = tp_size / total_num_kv_heads, and its weight_loader
/// takes KV shard tp_rank // num_kv_head_replicas); Megatron-Core refuses that
/// case (attention.py: divide(num_query_groups, tp)). Blocked parts only.
struct PackedSpec {
  std::int64_t count = 0;           ///< equal parts (when `sizes` is empty)
  std::vector<std::int64_t> sizes;  ///< explicit part extents on `dim` (elements)
  int dim = 0;                      ///< may be negative, normalized by the planner
  SourceLoc loc;
  std::int64_t interleave = 0;  ///< `interleave: k` (elements per block), 0 = not given
  std::int64_t groups = 0;      ///< `groups: G`, 0 = not given (blocked)
  /// Per part (same length as `sizes`), when any part is written as a map:
  /// its `name` ("" when not given) and `replicas` (1 when not given).
  std::vector<std::string> names{};
  std::vector<std::int64_t> replicas{};
  SourceLoc replicas_loc{};  ///< the first part map with `replicas` > 1 (for diagnostics)
};

/// "chunk", "balanced", "even".
const char* split_rule_name(SplitRule rule);

struct MeshAxis {
  std::string name;
  std::int64_t size = 1;  ///< as written; the planner checks >= 1 (E-MESH)
  SourceLoc loc;          ///< the axis entry
  SourceLoc size_loc;     ///< its `size` value
};

/// A device mesh, row-major: the first axis is the slowest-varying.
struct Mesh {
  std::vector<MeshAxis> axes;
  SourceLoc loc;
  /// Index of the axis named `name`, or -1.
  [[nodiscard]] int find(std::string_view name) const;
};

/// A placement as written in the recipe. `dim` may be negative (counted from
/// the end, as torch does); the planner normalizes it against the param's ndim.
struct Placement {
  enum class Kind { Replicate, Shard, Partial };
  Kind kind = Kind::Replicate;
  int dim = 0;            ///< Shard only
  std::string reduce_op;  ///< Partial only: "sum" (default), "avg", "min", "max"
  std::string text;       ///< as written, for messages
};

/// `{axis: placement}` as written, in written order.
struct AxisPlacement {
  std::string axis;
  Placement placement;
  SourceLoc loc;
};

struct Rule {
  std::vector<Pattern> match;  ///< one or more patterns; any may match
  /// Where each pattern of `match` is written (same length as `match`): a
  /// list element that matches nothing is reported at its own line:col.
  std::vector<SourceLoc> match_locs;
  std::vector<AxisPlacement> placements;
  std::optional<SplitRule> uneven;  ///< overrides the recipe default
  std::int64_t pad_multiple = 0;    ///< uneven == Pad: the multiple (rows per piece)
  /// `unit:` the smallest block of a sharded dim a split may not cut (a head:
  /// head_dim rows; a gate/up pair; a 64-row grain); 1 = any row. Splits then
  /// split whole units (chunk/balanced/pad count units, even needs them to divide).
  std::int64_t unit = 1;
  std::optional<PackedSpec> packed;  ///< `packed:` parts, or none
  /// `vocab_padding: {divisible_by: N}`: dim 0 is a vocabulary Megatron pads
  /// to a multiple of N x (the ways dim 0 is split), its checkpoint's global
  /// shape (megatron/training/tokenizer/tokenizer.py _vocab_size_with_padding,
  /// make_vocab_size_divisible_by); 0 = none.
  std::int64_t vocab_divisible_by = 0;
  SourceLoc vocab_loc;  ///< the `vocab_padding` value
  SourceLoc loc;
  /// The `match` text as written (patterns joined by ", "), for messages and the manifest.
  [[nodiscard]] std::string match_text() const;
};

/// EP stacking entry (contract §5.4): sources matching `match` (which must
/// contain an `{E}` capture) are grouped by their other captures into
/// stacked params named by `stack`. With `stacked_dim` the params `match`
/// names are already stacked (one `[E, ...]` tensor per layer and
/// projection, as transformers' fused MoE experts, gpt-oss and Llama-4 store
/// them): no `{E}`, no `stack`; each keeps its name and is placed as a
/// stacked expert param (docs/experts.md).
struct ExpertsEntry {
  Pattern match;
  SourceLoc match_loc;                    ///< where `match` is written
  std::string stack;                      ///< name template with `{capture}` references
  std::vector<AxisPlacement> placements;  ///< on the expert mesh (dense mesh without one)
  std::optional<SplitRule> uneven;
  std::int64_t pad_multiple = 0;  ///< uneven == Pad: the multiple
  /// `stacked_dim: 0`: the matched params are pre-stacked with the expert
  /// index on this dim (only 0: every expert placement, FSDP `expert_dim`
  /// and the runtime's stacked layout put experts on dim 0).
  std::optional<int> stacked_dim;
  /// `expert_name:` the FQN of expert {E} of a pre-stacked param, a template
  /// over `match`'s captures and {E} (for `explain` / `inspect --match`);
  /// empty = the param's name with the segment {E} after its last
  /// `experts` segment (`…mlp.experts.17.gate_up_proj`).
  std::string expert_name;
  /// `unit:` and `packed:` as in a rule, on the stacked [E, ...] tensor's
  /// dims (expert TP of a SwiGLU linear_fc1: `packed: {parts: 2, dim: 1}`).
  std::int64_t unit = 1;
  std::optional<PackedSpec> packed;
  SourceLoc loc;
};

enum class TiedMode { Auto, None, Explicit };

struct TiedSpec {
  TiedMode mode = TiedMode::Auto;
  std::vector<std::pair<std::string, std::string>> pairs;  ///< Explicit: (source, alias)
  SourceLoc loc;
};

struct PipelineSpec {
  std::string axis;    ///< dense mesh axis, usually "pp"
  SourceLoc axis_loc;  ///< where `axis` is written (the section when defaulted)
  bool auto_stages = true;
  std::vector<std::vector<Pattern>> stages;  ///< explicit: glob list per stage
  /// `virtual_stages: v`: Megatron's interleaved 1F1B schedule
  /// (virtual_pipeline_model_parallel_size): the layers are cut into
  /// stages x v model chunks, chunk k runs on stage k % stages as that
  /// stage's virtual stage k / stages (round-robin). With explicit `stages`
  /// the list then has stages x v glob lists, one per model chunk in order.
  std::int64_t virtual_stages = 1;
  SourceLoc virtual_stages_loc;
  /// `first_stage_less_layers` / `last_stage_less_layers` (torchtitan's
  /// pipeline_parallel_first/last_stage_less_layers, with `stages: auto` only): the
  /// embedding and the output count as that many layer blocks of the first and last
  /// model chunk (core/pipeline_chunks.hpp). 0 (the default): the even cut.
  std::int64_t first_stage_less_layers = 0;
  std::int64_t last_stage_less_layers = 0;
  SourceLoc less_layers_loc;  ///< the first of the two keys written
  SourceLoc loc;
};

enum class ExpertDim { Zero, One, Auto };

/// `fsdp.frozen`: what FSDP does with `requires_grad: false` params. `Ignore`
/// (the default, SPEC): they stay out of FSDP, as FSDP2 with them in
/// `ignored_params`; `Shard`: FSDP2's own default, `fully_shard` shards and
/// all-gathers them like any param (a LoRA-style run's frozen base weights).
enum class FrozenParams { Ignore, Shard };

struct FsdpSpec {
  std::vector<std::string> shard;         ///< dense axes, flattened row-major
  std::optional<std::string> replicate;   ///< HSDP replicate axis
  std::vector<std::string> expert_shard;  ///< expert-mesh axes for stacked experts
  std::vector<SourceLoc> shard_locs;      ///< where each `shard` axis is written
  SourceLoc replicate_loc;
  std::vector<SourceLoc> expert_shard_locs;  ///< where each `expert_shard` axis is written
  int dim = 0;
  ExpertDim expert_dim = ExpertDim::Auto;
  FrozenParams frozen = FrozenParams::Ignore;
  /// `fsdp.reshard_after_forward`: FSDP2's `fully_shard(reshard_after_forward=)`.
  /// nullopt = unstated: torchtitan's default (`not pp_enabled`,
  /// parallelize.py apply_fsdp), which under a pipeline changes no memory
  /// (src/memory/memory.hpp) and without one is FSDP2's own default, true.
  std::optional<bool> reshard_after_forward;
  SourceLoc loc;
};

/// A `buffers:` entry's kind: all-gather packings (muon, FSDP2) and the flat
/// optimizer buffers of ZeRO (Megatron-Core's distributed optimizer, DeepSpeed
/// ZeRO 1/2 flat groups and ZeRO-3 per-param partitions; src/planner/buffers.hpp).
enum class BufferKind { MuonAllGather, Fsdp2AllGather, MegatronDistOpt, DeepSpeedZero };

struct BufferSpec {
  BufferKind kind = BufferKind::MuonAllGather;
  std::int64_t alignment_bytes = 512;                  ///< muon only
  std::int64_t max_batch_numel = 512LL * 1024 * 1024;  ///< muon only, elements
  std::vector<Pattern> units;                          ///< fsdp2 only
  /// megatron_distopt only: DistributedDataParallelConfig.bucket_size in
  /// ELEMENTS; 0 = `auto` (max(40M, 1M x dp), Megatron's default with
  /// overlap_grad_reduce), -1 = `none` (one bucket per buffer:
  /// overlap_grad_reduce false).
  std::int64_t bucket_size = 0;
  /// megatron_distopt only: DistributedDataParallelConfig.pad_buckets_for_high_nccl_busbw
  /// (bucket ends padded to lcm(dp, 128, 2^16) instead of lcm(dp, 128)).
  bool pad_for_high_nccl_busbw = false;
  SourceLoc loc;
};

/// `fp8_scales:` how FP8 block scales (`X.weight_scale_inv`, docs/semantics.md
/// "FP8 block-quantized checkpoints") are planned.
enum class Fp8Scales {
  /// The default: Follow when the model has a `weight_block_size` attribute
  /// (every block-quantized checkpoint's config.json declares it), else Rules.
  Auto,
  /// Each scale takes its weight's rule, mesh, stage, stacking and
  /// placements, split in whole blocks (src/planner/fp8_scales.cpp).
  Follow,
  /// Scales are ordinary params placed by `rules` (no pairing, no block check).
  Rules,
};

/// The optimizer whose state `shardc memory` counts (recipe `training.optimizer`).
enum class Optimizer {
  AdamW,  ///< torch.optim.AdamW: exp_avg + exp_avg_sq per local element
  Adam,   ///< torch.optim.Adam: same state as AdamW
  Sgd,    ///< torch.optim.SGD with momentum: one momentum_buffer per local element
  Muon,   ///< hyper-parallel Muon: one momentum for params of ndim >= 2, AdamW for the rest
  None,   ///< no optimizer state (inference, or SGD with momentum=0)
};

/// "adamw", "adam", "sgd", "muon", "none".
const char* optimizer_name(Optimizer optimizer);

/// Optimizer-state sharding over the data-parallel ranks (recipe
/// `training.zero`, `training.distributed_optimizer`,
/// `training.zero_optimization.stage`): ZeRO's stages (Rajbhandari et al.,
/// "ZeRO: Memory Optimizations Toward Training Trillion Parameter Models",
/// SC 2020, Sec. 5): 1 shards the fp32 master weights and the optimizer
/// state (P_os), 2 also the gradients (P_os+g), 3 also the params (P_os+g+p:
/// that is FSDP, the `fsdp` section, which stage 3 requires). Megatron-Core's
/// distributed optimizer (`distributed_optimizer: true`,
/// megatron/core/optimizer/distrib_optimizer.py) is stage 1: the grad buffer
/// stays whole (reduce-scattered in place, param_and_grad_buffer.py) and each
/// rank keeps the fp32 main params and Adam moments of its shard.
struct ZeroSpec {
  int stage = 0;  ///< 0 = no optimizer-state sharding (plain DP / FSDP as written)
  /// How it was spelled: "zero", "distributed_optimizer", "zero_optimization.stage".
  std::string spelling;
  /// Dense-mesh axes of the DP group (flattened row-major); empty = inferred
  /// (every dense axis but the pipeline axis on which no non-expert param is sharded).
  std::vector<std::string> shard;
  std::vector<SourceLoc> shard_locs;
  /// Axes of the expert DP group (expert mesh, else dense mesh); empty =
  /// inferred (every axis of the experts' mesh but the pipeline axis on
  /// which no stacked expert is sharded): Megatron's expert data parallel
  /// group (parallel_state.get_expert_data_parallel_group).
  std::vector<std::string> expert_shard;
  std::vector<SourceLoc> expert_shard_locs;
  SourceLoc loc;  ///< the `zero` / `distributed_optimizer` / `zero_optimization` value
};

/// Activation recomputation (`training.recompute`), Korthikanti et al. 2022,
/// "Reducing Activation Recomputation in Large Transformer Models" (arXiv
/// 2205.05198): none keeps every tensor autograd saves; selective
/// recomputes the attention core (the s x s scores, softmax, dropout, and
/// the attention-over-values output: Sec. 5, Megatron-Core
/// `--recompute-granularity selective`, core_attention); full keeps only
/// each layer's input and recomputes the layer in backward (Sec. 4,
/// `--recompute-granularity full --recompute-method uniform`,
/// torch.utils.checkpoint around each decoder layer).
enum class Recompute { None, Selective, Full };
const char* recompute_name(Recompute recompute);

/// One `training.recompute` entry of the per-layer form: layers
/// [first_layer, end_layer) of the model's layer blocks use `mode`.
struct RecomputeRange {
  Recompute mode = Recompute::None;
  std::int64_t first_layer = 0;
  std::int64_t end_layer = 0;
  SourceLoc loc;
};

/// `training.pipeline_schedule.kind`: 1F1B (PipeDream-Flush, Megatron's
/// forward_backward_pipelining_without_interleaving, torch
/// Schedule1F1B), interleaved 1F1B (Megatron's
/// forward_backward_pipelining_with_interleaving, torch
/// ScheduleInterleaved1F1B; its virtual stages are `pipeline.virtual_stages`),
/// GPipe (all forwards, then all backwards: torch ScheduleGPipe), zero bubble
/// (`zero_bubble`: ZB-H1, Qi et al. 2023, with one stage per rank; with
/// `virtual_stages` > 1 torch ScheduleInterleavedZeroBubble, chunks placed as the
/// interleaved schedule places them), and the two V schedules, exactly two model
/// chunks per rank placed in a V (rank r runs chunks r and 2 pp - 1 - r: torch
/// generate_stage_to_rank_mapping(style="v"), torchtitan's pipeline_module_split):
/// `zbv` (torch ScheduleZBVZeroBubble) and `dualpipev` (torch ScheduleDualPipeV,
/// DeepSeek's DualPipe cut in half: deepseek-ai/DualPipe).
enum class PipelineScheduleKind {
  OneFOneB,
  Interleaved,
  GPipe,
  ZeroBubble,
  ZeroBubbleV,
  DualPipeV
};
/// Every kind, in the order messages and `--schedules` list them.
inline constexpr PipelineScheduleKind kPipelineScheduleKinds[] = {
    PipelineScheduleKind::OneFOneB,    PipelineScheduleKind::Interleaved,
    PipelineScheduleKind::GPipe,       PipelineScheduleKind::ZeroBubble,
    PipelineScheduleKind::ZeroBubbleV, PipelineScheduleKind::DualPipeV};
/// True for the V schedules (zbv, dualpipev): two chunks per rank in a V.
constexpr bool v_shaped(PipelineScheduleKind kind) {
  return kind == PipelineScheduleKind::ZeroBubbleV || kind == PipelineScheduleKind::DualPipeV;
}
const char* pipeline_schedule_name(PipelineScheduleKind kind);

struct PipelineSchedule {
  PipelineScheduleKind kind = PipelineScheduleKind::OneFOneB;
  bool written = false;  ///< `kind` was written (else the default is chosen from the pipeline)
  /// Micro-batches per step; nullopt = gradient_accumulation_steps (or
  /// global_batch_size / (micro_batch_size x data-parallel degree)).
  std::optional<std::int64_t> microbatches;
  SourceLoc loc;
  SourceLoc microbatches_loc;
};

/// `training.attention`: flash (FlashAttention / transformers'
/// flash_attention_2: the s x s scores are never stored, grouped KV heads
/// used as they are), sdpa (torch scaled_dot_product_attention through
/// transformers' sdpa_attention_forward: scores not stored on the flash and
/// memory-efficient kernels), eager (transformers' eager_attention_forward:
/// the scores, their fp32 softmax and its cast are stored, s x s per head).
enum class AttentionImpl { Flash, Sdpa, Eager };
const char* attention_impl_name(AttentionImpl impl);

/// `training.kernels`: which modules' saved tensors the activation model counts
/// (src/core/activations.hpp). eager: Hugging Face transformers' modules run
/// eagerly (fp32 norm copies, four SwiGLU tensors, the attention output copied
/// for o_proj), the default and what tests/torch/test_activation_witness.py
/// measures; fused: Megatron-Core with Transformer Engine's fused kernels
/// (LayerNormLinear keeps the norm input, rstd and output; bias_swiglu keeps its
/// input, linear_fc2 the product; the projection reads flash attention's own
/// output; the vocab-parallel cross entropy keeps fp32 softmax only), attention
/// always flash.
enum class ActivationKernels { Eager, Fused };
const char* activation_kernels_name(ActivationKernels kernels);

/// `training.moe`: how many tokens an expert may receive. Dropless (the
/// default: torchtitan, Megatron `--moe-token-dispatcher-type alltoall`
/// without capacity) plans for the tokens routed: tokens x top_k over the
/// experts in total; a capacity factor c caps each expert at
/// c x tokens x top_k / experts (Megatron --moe-expert-capacity-factor,
/// GShard), with padding: every expert then holds its full capacity.
struct MoeRouting {
  std::optional<double> capacity_factor;  ///< nullopt = dropless
  SourceLoc loc;
};

/// `training.offload`: what lives in host memory instead of the device
/// (DeepSpeed ZeRO-Offload `offload_optimizer` / `offload_param`; FSDP2's
/// `CPUOffloadPolicy` moves params, grads and optimizer state together).
struct OffloadSpec {
  bool optimizer = false;  ///< master weights and optimizer state on the host
  bool params = false;     ///< sharded params on the host (gathered to the device per unit)
  bool grads = false;      ///< sharded grads on the host (reduce-scattered, then copied)
  SourceLoc loc;
};

/// The training shape (recipe `training:`, issue 26): what activation memory
/// and (later) per-step communication depend on. Absent `seq_len` = no
/// training shape: activations are not counted and every output is what it
/// was before these keys existed.
struct TrainingShape {
  std::optional<std::int64_t> seq_len;  ///< tokens per sequence
  SourceLoc seq_len_loc;
  std::int64_t micro_batch_size = 1;  ///< sequences per micro-batch per data-parallel rank
  SourceLoc micro_batch_size_loc;
  std::optional<std::int64_t> global_batch_size;  ///< sequences per optimizer step, all ranks
  SourceLoc global_batch_size_loc;
  std::optional<std::int64_t> gradient_accumulation_steps;  ///< micro-batches per step per rank
  SourceLoc gradient_accumulation_steps_loc;
  Recompute recompute = Recompute::None;  ///< the mode of layers no range names
  std::vector<RecomputeRange> recompute_ranges;
  SourceLoc recompute_loc;
  bool sequence_parallel = false;   ///< Megatron SP: norms/dropout activations split over tp
  SourceLoc sequence_parallel_loc;  ///< where it is written (line 0: defaulted)
  std::optional<std::string> context_parallel;  ///< dense mesh axis splitting the sequence
  SourceLoc context_parallel_loc;
  PipelineSchedule pipeline_schedule;
  AttentionImpl attention = AttentionImpl::Sdpa;
  SourceLoc attention_loc;  ///< where `attention` is written (line 0: defaulted)
  ActivationKernels kernels = ActivationKernels::Eager;
  SourceLoc kernels_loc;
  std::optional<DType> activation_dtype;  ///< default: the dtype of the model's params
  SourceLoc activation_dtype_loc;
  MoeRouting moe;
  OffloadSpec offload;
  std::optional<std::int64_t> ranks_per_node;  ///< ranks sharing a node (communication)
  SourceLoc ranks_per_node_loc;
  /// The mode of layer block `layer` (0-based).
  [[nodiscard]] Recompute recompute_of(std::int64_t layer) const {
    for (const RecomputeRange& r : recompute_ranges)
      if (layer >= r.first_layer && layer < r.end_layer) return r.mode;
    return recompute;
  }
};

/// Recipe `training:` section: what the per-rank memory report assumes
/// (src/memory, src/memory/memory.hpp). Every field is optional; the
/// defaults describe torch.optim.AdamW run directly on the params as the
/// model stores them.
struct TrainingSpec {
  Optimizer optimizer = Optimizer::AdamW;
  /// float32 master copies of params stored in a narrower float dtype
  /// (`master_weights: float32`); nullopt = none (`master_weights: none`).
  std::optional<DType> master_weights;
  SourceLoc master_weights_loc;     ///< where `master_weights` is written (line 0: defaulted)
  std::optional<DType> grad_dtype;  ///< default: the param's dtype
  /// Set by the planner (plan.training) when it defaults `grad_dtype` itself: why
  /// (Megatron's distributed optimizer over bf16 params keeps fp32 main grads).
  std::string grad_dtype_default;
  std::optional<DType>
      state_dtype;  ///< default: master dtype when a master copy exists, else the param's
  std::optional<std::int64_t>
      budget_bytes;      ///< `budget: 80GiB`: per-rank limit for validate/memory
  ZeroSpec zero;         ///< optimizer-state sharding (stage 0 = none)
  TrainingShape shape;   ///< seq_len, batch, recompute, schedule... (activations)
  SourceLoc loc;         ///< the `training` section (file only when absent)
  SourceLoc budget_loc;  ///< the `budget` value
};

struct Recipe {
  std::string source_path;
  std::string sha256;
  /// Optional `world_size:` (the intended number of ranks); when set, both
  /// meshes' products are checked against it (E-MESH names the mesh that differs).
  /// As written; the planner checks it lies in [1, limits::kMaxWorld] (E-MESH).
  std::optional<std::int64_t> world_size;
  SourceLoc world_size_loc;
  Mesh mesh;
  std::optional<Mesh> expert_mesh;
  SplitRule uneven = SplitRule::Chunk;
  std::int64_t pad_multiple = 0;  ///< uneven == Pad: the multiple
  std::vector<Rule> rules;
  std::vector<ExpertsEntry> experts;
  TiedSpec tied;
  std::optional<PipelineSpec> pipeline;
  std::optional<FsdpSpec> fsdp;
  std::vector<BufferSpec> buffers;
  Fp8Scales fp8_scales = Fp8Scales::Auto;  ///< `fp8_scales: auto|follow|rules`
  SourceLoc fp8_scales_loc;                ///< where `fp8_scales` is written (empty when absent)
  TrainingSpec training;
};

/// How messages name rule `index` (0-based) of `recipe.rules`, or of
/// `recipe.experts` when `experts`: 1-based number and recipe line, e.g.
/// "rule 4 (line 12)" or "experts entry 1 (line 30)".
std::string rule_label(const Recipe& recipe, bool experts, int index);

}  // namespace shardc
