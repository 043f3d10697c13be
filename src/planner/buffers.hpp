// Buffer-packing layouts for fused all-gathers (contract §6.3).
//
// Two kinds:
//  * muon_allgather: hyper-parallel's Muon optimizer gathers each param's
//    shards back to the global tensor before Newton-Schulz, one stage per
//    sharding split, innermost split first (the reverse of the order the
//    splits were applied: rule placements in mesh order, then FSDP).
//  * fsdp2_allgather: PyTorch FSDP2's per-unit all-gather of padded shards.
//
// Layouts are computed in two steps so that a plan with many ranks does
// not redo rank-independent work: `plan_*` once per plan (groups, units,
// batches, owners), then `*_for_rank` per rank (shapes, offsets).
// All numel / offset fields are in ELEMENTS of the param's dtype unless a
// struct says otherwise (FSDP2 byte units for mixed-dtype units).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/plan.hpp"

namespace shardc {

// ---------------------------------------------------------------- muon --

/// One fused all-gather call of a muon group: params of one dtype, in
/// group order, whose global numels fill up to `max_batch_numel` (elements).
struct MuonBatch {
  DType dtype = DType::BFloat16;
  std::vector<std::size_t> params;  ///< indices into Plan::params, group order
};

/// A muon layout group: params of one stage sharing a layout key (mesh,
/// axis -> sharded tensor dim, ndim), in first-appearance order.
struct MuonGroup {
  std::string key;  ///< readable layout key, e.g. "dense ndim=2 dp_shard:0 tp:0"
  MeshKind mesh = MeshKind::Dense;
  int stage = 0;
  std::vector<std::size_t> params;  ///< indices into Plan::params
  /// The splits gathered, in stage order (innermost split first): each is
  /// (tensor dim, index of the DimSplit in that dim's chain). Splits whose
  /// ways == 1 are omitted.
  std::vector<std::pair<int, int>> splits;
  /// Mesh axes of the replicate grid: the mesh's axes that shard nothing
  /// and are not the pipeline axis.
  std::vector<int> replicate_axes;
  /// Owner coordinate on the replicate grid per param (same order as
  /// `params`): largest global numel first, then input order, to the least
  /// loaded coordinate, ties to the lowest coordinate (hyper-parallel).
  std::vector<std::vector<std::int64_t>> owners;
  /// Batches of at most `max_batch_numel` global elements (a batch closes
  /// once it reaches the cap), one dtype each, in first-appearance order.
  std::vector<MuonBatch> batches;
};

struct MuonPlan {
  std::int64_t alignment_bytes = 512;
  std::int64_t max_batch_numel = 0;
  std::vector<MuonGroup> groups;  ///< all stages, stage-major
  /// Params held but not communicated (requires_grad false, ndim < 2, or an
  /// alias sharing its source's storage), per stage, model order.
  std::vector<std::vector<std::size_t>> not_communicated;
};

/// Builds the rank-independent part. Cost O(params x log grid).
MuonPlan plan_muon(const Plan& plan, const BufferSpec& spec);

/// One param in one stage of a muon all-gather, for one rank.
struct MuonStageParam {
  std::size_t param = 0;
  int tensor_dim = 0;
  std::vector<std::int64_t> split_sizes;  ///< every member's extent on tensor_dim
  Shape pad_shape;                        ///< element-wise max of the members' current shapes
  std::int64_t offset = 0;                ///< into the packed buffer, elements
  std::int64_t actual_numel = 0;          ///< this rank's elements
  std::int64_t padded_numel = 0;          ///< numel(pad_shape) rounded to alignment
};

struct MuonStage {
  std::vector<int> axes;            ///< mesh axes gathered (several = flattened FSDP)
  std::vector<std::int64_t> ranks;  ///< the group's global ranks, by split coordinate
  std::int64_t index = 0;           ///< this rank's position in `ranks`
  std::vector<MuonStageParam> params;
  std::int64_t total_numel = 0;     ///< sum of padded_numel
  std::int64_t gathered_numel = 0;  ///< total_numel x ranks.size()
};

/// One narrow of the slice-back recipe: update.narrow(dim, start, length).
struct SliceStep {
  int dim = 0;
  std::int64_t start = 0;
  std::int64_t length = 0;
};

/// The one muon stage arithmetic (contract §6.3), which the planner (from the
/// plan's geometry) and the output reader (from a lean rank file's split sizes,
/// src/outputs/readback.cpp) both call: a param whose stage input shape (this
/// rank's piece with the earlier stages gathered) is `input_shape` and whose
/// members hold `split_sizes` on `tensor_dim` (every other dim as the input)
/// packs `padded_numel` elements at its offset; `pad_shape` is the input with
/// tensor_dim set to the largest split, `actual_numel` the member `index`'s.
/// Precondition: 0 <= tensor_dim < input_shape.size().
struct MuonStageSizes {
  Shape pad_shape;
  std::int64_t actual_numel = 0;  ///< 0 when `index` is not a member
  std::int64_t padded_numel = 0;  ///< numel(pad_shape) rounded up to `align_elements`
};
MuonStageSizes muon_stage_sizes(const Shape& input_shape, int tensor_dim,
                                std::span<const std::int64_t> split_sizes, std::int64_t index,
                                std::int64_t align_elements);

/// A muon buffer's alignment in elements of `dtype`: alignment_bytes / element size, at least 1.
std::int64_t muon_align_elements(std::int64_t alignment_bytes, DType dtype);

/// The narrow that cuts member `index`'s piece back out of a stage's gathered
/// tensor: start = the sum of the split sizes before it (index clamped to the members).
SliceStep muon_slice_step(int tensor_dim, std::span<const std::int64_t> split_sizes,
                          std::int64_t index);

struct MuonRankBatch {
  DType dtype = DType::BFloat16;
  std::vector<MuonStage> stages;
};

struct MuonRankGroup {
  const MuonGroup* group = nullptr;
  std::vector<MuonRankBatch> batches;
  std::vector<std::int64_t> replicate_coord;  ///< this rank on the replicate grid
  /// Per param (group order): the narrows, last stage first, that cut this
  /// rank's piece out of the full (global) update.
  std::vector<std::vector<SliceStep>> slice_back;
};

struct MuonRankLayout {
  std::vector<MuonRankGroup> groups;  ///< groups of this rank's stage
  const std::vector<std::size_t>* not_communicated = nullptr;
};

/// The layout `rank` packs. Cost O(params x stages x group size).
MuonRankLayout muon_for_rank(const MuonPlan& muon, const Plan& plan, std::int64_t rank);

/// One group of `muon_for_rank` (the group must be on `rank`'s stage). Its
/// sizes depend only on `rank`'s coordinates on the group's split axes.
MuonRankGroup muon_group_for_rank(const MuonPlan& muon, const MuonGroup& group, const Plan& plan,
                                  std::int64_t rank);

/// The mesh axes of `group`'s splits (every stage's `axes`), ascending. Two ranks
/// of `group`'s stage with equal coordinates on these axes (one shard class) get
/// the same `muon_group_for_rank` but for `replicate_coord` and each stage's
/// `ranks`: equal split sizes, pad shapes, offsets, numels, stage indices and
/// slice-back, so a writer of many rank files computes them once per class.
/// Empty for a group without batches.
std::vector<int> muon_split_axes(const MuonGroup& group, const Plan& plan);

/// One stage's members as `muon_group_for_rank` gives them (`MuonStage::ranks`
/// and `index`), without the sizes.
struct MuonStageRanks {
  std::vector<std::int64_t> ranks;  ///< the group's global ranks, by split coordinate
  std::int64_t index = 0;           ///< `rank`'s position in `ranks`
};

/// Every stage's `ranks` and `index` of `muon_group_for_rank(muon, g, plan,
/// rank)`, in stage order. Cost O(stages x group size x mesh axes).
std::vector<MuonStageRanks> muon_stage_ranks(const MuonGroup& group, const Plan& plan,
                                             std::int64_t rank);

// --------------------------------------------------------------- fsdp2 --

/// One FSDP unit buffer: params of one unit on one mesh, model order.
struct Fsdp2Unit {
  std::string name;  ///< module prefix ("" = root), e.g. "model.layers.3"
  MeshKind mesh = MeshKind::Dense;
  int stage = 0;
  std::vector<std::size_t> params;  ///< FSDP-sharded, aliases excluded
  bool byte_units = false;          ///< mixed dtypes: offsets and numels in bytes
  /// FSDP2's root (`fully_shard(model)` over the params no other unit names) gathered for
  /// the whole forward and backward: the root unit when it holds its stage's first params
  /// (Hugging Face-style wrapping, each block then the model: the embedding is the root's).
  /// The root is not resharded after forward (FSDPState._lazy_init), its pre_backward runs
  /// first and its post_backward last (tests/torch/test_fsdp2_gathered.py). A "**" unit
  /// after the blocks (torchtitan: tok_embeddings a unit of its own, `fully_shard([norm,
  /// output])` kept after forward for the backward that starts with it) is one of the chain.
  bool held_whole_step = false;
};

struct Fsdp2Plan {
  std::vector<Fsdp2Unit> units;  ///< in order of their first param
  /// Params held but in no buffer (not FSDP-sharded, or aliases), per stage.
  std::vector<std::vector<std::size_t>> not_communicated;
};

/// Assigns params to units: each pattern names the shortest module prefix
/// of the FQN it matches; the deepest such prefix over all patterns wins.
/// Params no pattern matches go to the root unit "".
Fsdp2Plan plan_fsdp2(const Plan& plan, const BufferSpec& spec);

/// The FSDP unit of `fqn` under `units` (an fsdp2_allgather buffer's patterns): the
/// deepest module prefix of `fqn` any pattern names ("" = the root unit).
std::string fsdp2_unit_of(const std::string& fqn, const std::vector<Pattern>& units);

struct Fsdp2Param {
  std::size_t param = 0;
  std::int64_t offset = 0;        ///< in this rank's slot (elements, or bytes)
  std::int64_t padded_numel = 0;  ///< elements, or bytes
  Shape padded_shape;
  Shape local_shape;
  Shape unsharded_shape;  ///< the TP/EP-local shape the all-gather rebuilds
};

struct Fsdp2RankUnit {
  const Fsdp2Unit* unit = nullptr;
  std::vector<std::int64_t> ranks;  ///< the FSDP group, by FSDP coordinate
  std::int64_t index = 0;           ///< this rank's position in `ranks`
  std::vector<Fsdp2Param> params;
  std::int64_t total = 0;  ///< per-rank slot size (elements, or bytes)
  std::int64_t total_bytes = 0;
};

struct Fsdp2RankLayout {
  std::vector<Fsdp2RankUnit> units;
  const std::vector<std::size_t>* not_communicated = nullptr;
};

/// The FSDP2 buffers `rank` packs: every unit of its pipeline stage, with
/// this rank's FSDP group (global ranks by FSDP coordinate), per-param offsets
/// and padded numels (elements, or bytes for byte-unit units) and the
/// unit's slot size. Cost O(params of the stage x ndim).
Fsdp2RankLayout fsdp2_for_rank(const Fsdp2Plan& fsdp2, const Plan& plan, std::int64_t rank);

/// One unit of `fsdp2_for_rank` (the unit must be on `rank`'s stage).
Fsdp2RankUnit fsdp2_unit_for_rank(const Fsdp2Unit& unit, const Plan& plan, std::int64_t rank);

// ---------------------------------------------------- flat optimizer buffers --
//
// The contiguous param/grad buffers ZeRO stages 1-3 shard over a data-parallel
// group (plan.zero: `training.zero`, `distributed_optimizer`,
// `zero_optimization.stage`). Each buffer holds a rank's local tensors
// (TP/EP-local; under ZeRO-3 before the FSDP split) flattened, is cut into
// buckets, and each bucket into `degree` equal contiguous shards: DP rank i
// (Plan::zero_index) owns shard i of every bucket, i.e. the fp32 main params
// and optimizer state of the param ranges that fall in it (a param may
// straddle shards). Rules, by kind:
//
// megatron_distopt (Megatron-Core, commit d98e8a64 of NVIDIA/Megatron-LM:
// megatron/core/optimizer/param_layout.py pad_param_start / pad_bucket_end,
// megatron/core/optimizer/distrib_optimizer.py _compute_per_buffer_param_layout
// and _build_model_gbuf_param_range_map, megatron/core/distributed/
// param_and_grad_buffer.py group_params_for_buffers, distributed_data_parallel.py):
//  * one buffer per model chunk (one DDP instance each) and per (param dtype,
//    grad dtype, expert) in order of first appearance; experts use the
//    expert DP group; requires_grad params only, a same-stage tie alias not
//    again (shared storage);
//  * params in reverse model order (backprop order); a stacked expert param
//    enters as its local experts, one piece each (TEGroupedMLP's weight0..N);
//  * each param start padded up to a multiple of 64 elements;
//  * a bucket closes once it holds >= bucket_size elements (bucket_size =
//    max(40M, 1M x dp) by default; no bucketing (one bucket) on pipeline
//    stages > 0 and model chunks > 0, and with `bucket_size: none`); a
//    cross-stage tie end (Megatron's shared_embedding) gets a bucket of its own;
//  * each bucket end padded to lcm(dp, 128) (lcm(dp, 128, 2^16) with
//    pad_for_high_nccl_busbw).
// deepspeed_zero, stages 1 and 2 (DeepSpeed, commit edaa7221 of
// deepspeedai/DeepSpeed: deepspeed/runtime/zero/stage_1_and_2.py, the
// constructor's flatten with alignment = nccl_start_alignment_factor (2) x dp,
// get_data_parallel_partitions): one flat group per (stage, dtype, expert) in
// model order, no per-param padding, the group padded at its end to a
// multiple of 2 x dp, one "bucket" = the whole group cut into dp partitions.
// deepspeed_zero, stage 3 (partition_parameters.py _partition_param,
// _padding_size): every param on its own, padded to a multiple of dp, rank i
// owns elements [i x ceil(n/dp), (i + 1) x ceil(n/dp)) of it flattened.
//
// All numel / offset fields are in ELEMENTS of the buffer's param dtype.

/// One piece of a param in a flat buffer: elements [param_offset,
/// param_offset + numel) of the param's rank-local tensor flattened row-major
/// (the whole param, or one local expert of a stacked param), stored at
/// [start, start + numel) of the buffer.
struct FlatEntry {
  std::size_t param = 0;  ///< index into Plan::params
  std::int64_t param_offset = 0;
  std::int64_t numel = 0;
  std::int64_t start = 0;
  std::int64_t bucket = 0;
};

/// A bucket [start, end) of a flat buffer; `numel_unpadded` = last param end - start.
struct FlatBucket {
  std::int64_t start = 0;
  std::int64_t end = 0;
  std::int64_t numel_unpadded = 0;
};

/// A range a rank's shard owns: `numel` elements of entry `entry`'s param
/// from `param_offset` (its rank-local flat index), at `buffer_start` of the
/// buffer (Megatron's "param" and "gbuf_world" ranges).
struct FlatOwned {
  std::size_t entry = 0;  ///< index into FlatRankBuffer::entries
  std::int64_t param_offset = 0;
  std::int64_t numel = 0;
  std::int64_t buffer_start = 0;
};

/// One flat buffer as one rank builds it.
struct FlatRankBuffer {
  MeshKind mesh = MeshKind::Dense;
  bool expert = false;    ///< in the expert DP group
  int virtual_stage = 0;  ///< the model chunk's virtual stage (megatron_distopt)
  DType param_dtype = DType::BFloat16;
  DType grad_dtype = DType::BFloat16;
  std::vector<std::int64_t> ranks;  ///< the DP group, by ZeRO index
  std::int64_t index = 0;           ///< this rank's ZeRO index in `ranks`
  std::int64_t bucket_size = -1;    ///< elements; -1 = one bucket (no bucketing)
  std::vector<FlatEntry> entries;   ///< buffer order
  std::vector<FlatBucket> buckets;
  std::int64_t numel = 0;        ///< padded: the last bucket's end
  std::vector<FlatOwned> owned;  ///< this rank's shard of every bucket, buffer order
  std::int64_t owned_numel = 0;  ///< sum of owned[].numel (padding excluded)
  std::int64_t shard_numel = 0;  ///< sum over buckets of (end - start) / degree (padding included)
};

struct FlatRankLayout {
  std::vector<FlatRankBuffer> buffers;
  std::vector<std::size_t> not_communicated;  ///< held, in no buffer (frozen, aliases), model order
};

/// The flat buffers `rank` builds for a megatron_distopt / deepspeed_zero
/// entry. Precondition: plan.zero.stage >= 1 (the recipe check refuses the
/// entry otherwise). Cost O(params of the rank's stage x ndim).
FlatRankLayout flat_for_rank(const Plan& plan, const BufferSpec& spec, std::int64_t rank);

/// The ranges shard `shard` (of `degree`) of `bucket` owns, in buffer order
/// (Megatron's _build_model_gbuf_param_range_map). Cost O(entries of the bucket).
std::vector<FlatOwned> flat_owned(const std::vector<FlatEntry>& entries, const FlatBucket& bucket,
                                  std::int64_t bucket_index, std::int64_t degree,
                                  std::int64_t shard);

/// The bucket-end divisor: lcm(dp, 128), or lcm(dp, 128, 2^16) with
/// `pad_for_high_nccl_busbw` (param_layout.py bucket_end_divisor).
std::int64_t megatron_bucket_end_divisor(std::int64_t dp, bool pad_for_high_nccl_busbw);

/// Megatron's default bucket size: max(40,000,000, 1,000,000 x dp) elements
/// (distributed_data_parallel.py).
std::int64_t megatron_default_bucket_size(std::int64_t dp);

// ------------------------------------------------------------- per plan --

/// One `buffers:` entry of the recipe with its rank-independent layout,
/// computed once per compile and shared (read-only) by every rank writer.
struct PlannedBuffer {
  BufferSpec spec;
  std::optional<MuonPlan> muon;    ///< kind == MuonAllGather
  std::optional<Fsdp2Plan> fsdp2;  ///< kind == Fsdp2AllGather
};

/// `plan_muon` / `plan_fsdp2` for every entry of `plan.buffers`, in order.
std::vector<PlannedBuffer> plan_buffers(const Plan& plan);

/// The ranks whose files `shardc verify` needs to check `rank`'s buffers:
/// `rank` and the closure (`group_closure`) of every muon group and FSDP2
/// unit it joins, sorted. `compile --with-groups` writes these too. Cost
/// O(muon_for_rank + fsdp2_for_rank) for `rank`.
std::vector<std::int64_t> buffer_peers(const Plan& plan, const std::vector<PlannedBuffer>& buffers,
                                       std::int64_t rank);

/// How text output names an FSDP unit: its module prefix, or "(root)" for
/// the root unit (whose prefix, as in rank files, is "").
std::string fsdp2_unit_label(std::string_view name);

/// "muon_allgather" / "fsdp2_allgather" / "megatron_distopt" / "deepspeed_zero".
const char* buffer_kind_name(BufferKind kind);

/// Per-rank buffer sizes of one layout, in BYTES: `pack` is the rank's
/// packed input summed over every stage / unit it joins, `gathered` the
/// all-gather outputs (pack x group size) summed the same way.
///
/// FSDP2 never holds every unit gathered at once: `gathered_peak` (FSDP2
/// only, empty for muon) is the most it holds at one time: the root unit (the
/// params no other unit names, gathered through the whole forward and
/// backward: FSDPState._lazy_init keeps it after forward, its pre_backward
/// runs first and its post_backward last) plus the largest unit and the next
/// one prefetched, the largest sum of two consecutive other units in module
/// order (or the largest when there is one). Witnessed by torch FSDP2 in
/// tests/torch/test_fsdp2_gathered.py. This is the one place the FSDP2 peak
/// is computed (see `fsdp2_gathered_peak`).
struct BufferRankBytes {
  BufferKind kind = BufferKind::MuonAllGather;
  std::vector<std::int64_t> pack;           ///< per rank, sum over stages / units
  std::vector<std::int64_t> gathered;       ///< per rank, sum over stages / units
  std::vector<std::int64_t> gathered_peak;  ///< per rank, FSDP2 only: unit + prefetched unit
  /// Per rank, FSDP2 only: the largest single unit's gathered bytes of its
  /// requires_grad members (its reduce-scatter input in backward has as many
  /// elements: frozen members, `fsdp.frozen: shard`, have no gradient).
  std::vector<std::int64_t> largest_unit;
  /// Per rank, FSDP2 only: every unit's gathered bytes of its requires_grad
  /// members (the unsharded grads a pipeline accumulates: src/memory/memory.hpp).
  std::vector<std::int64_t> trainable_gathered;
  /// Muon only (empty for FSDP2): the largest output of one all-gather call
  /// (one stage of one batch; a stage's output is unpacked before the next).
  std::vector<std::int64_t> call_peak;
};

/// The FSDP2 gathered peak of one rank from its units' gathered bytes in
/// module (execution) order, the root unit's apart (`root_gathered`, 0 without
/// one): the root plus max over i of units[i] + units[i+1] (the largest unit
/// when there is only one; 0 for none).
std::int64_t fsdp2_gathered_peak(const std::vector<std::int64_t>& unit_gathered,
                                 std::int64_t root_gathered);

/// Per-rank bytes of every planned buffer without a (params x ranks) loop:
/// each group / unit is laid out once per class of its sharding axes
/// (its sizes depend on nothing else), then every rank sums one table entry
/// per group. Cost O(sum over groups of classes x group layout + ranks x
/// groups per stage).
std::vector<BufferRankBytes> buffer_rank_bytes(const Plan& plan,
                                               const std::vector<PlannedBuffer>& buffers);

/// One rank's entry of every `buffer_rank_bytes` vector (same order, same values), computed
/// for that rank alone: O(groups + units) class representatives, no per-rank table, so it
/// answers on any legal world (memory report classes, `inspect --rank`). `call_peak` is 0 for
/// FSDP2, `gathered_peak` 0 for muon.
struct BufferBytesAt {
  BufferKind kind = BufferKind::MuonAllGather;
  std::int64_t pack = 0;
  std::int64_t gathered = 0;
  std::int64_t gathered_peak = 0;
  std::int64_t call_peak = 0;
  std::int64_t largest_unit = 0;        ///< FSDP2: the largest unit's trainable gathered bytes
  std::int64_t trainable_gathered = 0;  ///< FSDP2: every unit's trainable gathered bytes
};
std::vector<BufferBytesAt> buffer_bytes_at(const Plan& plan,
                                           const std::vector<PlannedBuffer>& buffers,
                                           std::int64_t rank);

}  // namespace shardc
