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
#include <string>
#include <string_view>
#include <vector>

#include "shardc/plan.hpp"

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
MuonRankGroup muon_group_for_rank(const MuonPlan& muon, const MuonGroup& g, const Plan& plan,
                                  std::int64_t rank);

/// The mesh axes of `g`'s splits (every stage's `axes`), ascending. Two ranks
/// of `g`'s stage with equal coordinates on these axes (one shard class) get
/// the same `muon_group_for_rank` but for `replicate_coord` and each stage's
/// `ranks`: equal split sizes, pad shapes, offsets, numels, stage indices and
/// slice-back, so a writer of many rank files computes them once per class.
/// Empty for a group without batches.
std::vector<int> muon_split_axes(const MuonGroup& g, const Plan& plan);

/// One stage's members as `muon_group_for_rank` gives them (`MuonStage::ranks`
/// and `index`), without the sizes.
struct MuonStageRanks {
  std::vector<std::int64_t> ranks;  ///< the group's global ranks, by split coordinate
  std::int64_t index = 0;           ///< `rank`'s position in `ranks`
};

/// Every stage's `ranks` and `index` of `muon_group_for_rank(muon, g, plan,
/// rank)`, in stage order. Cost O(stages x group size x mesh axes).
std::vector<MuonStageRanks> muon_stage_ranks(const MuonGroup& g, const Plan& plan,
                                             std::int64_t rank);

// --------------------------------------------------------------- fsdp2 --

/// One FSDP unit buffer: params of one unit on one mesh, model order.
struct Fsdp2Unit {
  std::string name;  ///< module prefix ("" = root), e.g. "model.layers.3"
  MeshKind mesh = MeshKind::Dense;
  int stage = 0;
  std::vector<std::size_t> params;  ///< FSDP-sharded, aliases excluded
  bool byte_units = false;          ///< mixed dtypes: offsets and numels in bytes
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
Fsdp2RankUnit fsdp2_unit_for_rank(const Fsdp2Unit& u, const Plan& plan, std::int64_t rank);

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

/// "muon_allgather" / "fsdp2_allgather".
const char* buffer_kind_name(BufferKind k);

/// Per-rank buffer sizes of one layout, in BYTES: `pack` is the rank's
/// packed input summed over every stage / unit it joins, `gathered` the
/// all-gather outputs (pack x group size) summed the same way.
///
/// FSDP2 never holds every unit gathered at once: `gathered_peak` (FSDP2
/// only, empty for muon) is the most it holds at one time, the largest
/// unit plus the next one prefetched — the largest sum of two consecutive
/// units in module order (or the largest unit when it has one). This is the
/// one place the FSDP2 peak is computed (see `fsdp2_gathered_peak`).
struct BufferRankBytes {
  BufferKind kind = BufferKind::MuonAllGather;
  std::vector<std::int64_t> pack;           ///< per rank, sum over stages / units
  std::vector<std::int64_t> gathered;       ///< per rank, sum over stages / units
  std::vector<std::int64_t> gathered_peak;  ///< per rank, FSDP2 only: unit + prefetched unit
  /// Per rank, FSDP2 only: the largest single unit's gathered bytes (its
  /// reduce-scatter input in backward has as many elements).
  std::vector<std::int64_t> largest_unit;
  /// Muon only (empty for FSDP2): the largest output of one all-gather call
  /// (one stage of one batch; a stage's output is unpacked before the next).
  std::vector<std::int64_t> call_peak;
};

/// The FSDP2 gathered peak of one rank from its units' gathered bytes in
/// module (execution) order: max over i of units[i] + units[i+1], or the
/// largest unit when there is only one; 0 for none.
std::int64_t fsdp2_gathered_peak(const std::vector<std::int64_t>& unit_gathered);

/// Per-rank bytes of every planned buffer without a (params x ranks) loop:
/// each group / unit is laid out once per class of its sharding axes
/// (its sizes depend on nothing else), then every rank sums one table entry
/// per group. Cost O(sum over groups of classes x group layout + ranks x
/// groups per stage).
std::vector<BufferRankBytes> buffer_rank_bytes(const Plan& plan,
                                               const std::vector<PlannedBuffer>& buffers);

}  // namespace shardc
