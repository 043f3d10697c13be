// The plan: the planner's output and the back end's input.
//
// Geometry is stored per parameter as split chains, not per rank: a rank's
// local shape and global offset are a pure function of the param's chains
// and the rank's mesh coordinates (`shard_at`), so planning costs
// O(params) and enumerating distinct shards costs O(params x shard classes),
// never O(params x ranks).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/activations.hpp"
#include "core/diagnostics.hpp"
#include "core/local_attribute_spec.hpp"
#include "core/model.hpp"
#include "core/recipe.hpp"
#include "support/assert.hpp"
#include "support/dtype.hpp"
#include "support/rank_set.hpp"

namespace shardc {

enum class MeshKind { Dense, Expert };

/// "dense" / "expert".
const char* mesh_kind_name(MeshKind kind);

/// A resolved placement on one mesh axis, dims normalized to [0, ndim).
struct ResolvedPlacement {
  enum class Kind { Replicate, Shard, StridedShard };
  Kind kind = Kind::Replicate;
  int dim = 0;
  std::int64_t split_factor = 1;  ///< StridedShard only
  /// torch label: "Replicate()", "Shard(0)", "_StridedShard(0, sf=8)".
  [[nodiscard]] std::string label() const;
};

/// One split of a tensor dim over a (possibly flattened) group of mesh axes.
/// `axes` are indices into the param's mesh; the coordinate of the split is
/// the row-major flattening of the coordinates on `axes` (first slowest), and
/// `ways` is the product of their sizes.
struct DimSplit {
  std::vector<int> axes;
  std::vector<std::int64_t> axis_sizes;  ///< sizes of `axes`, same order
  std::int64_t ways = 1;                 ///< product of `axis_sizes`
  SplitRule rule = SplitRule::Chunk;
  bool fsdp = false;              ///< the FSDP split (always last in its chain, always Chunk)
  std::int64_t pad_multiple = 0;  ///< rule == Pad: every piece allocates a multiple of it
  std::int64_t unit = 1;          ///< rows a split may not cut (rule splits only)
  /// Rule splits only: > 1 when the split reads as DTensor's `_StridedShard(d,
  /// sf=split_factor)` (torch 2.13 placement_types.py `_StridedShard._split_tensor`):
  /// the current rows chunked into split_factor pieces, each chunked `ways` ways, the
  /// rank's piece of every one concatenated. Set only on a dim whose labels are no shard
  /// order (docs/shard-order.md, "Labels that are no order"): the chain then stays in mesh
  /// order and a rank's rows on that dim are several boxes (`strided_chain`).
  std::int64_t split_factor = 1;
};

/// All splits of one param, per tensor dim, outermost (first applied) first:
/// rule placements in mesh order, then the FSDP split (contract §5.2, §5.3).
struct ParamGeometry {
  Shape global_shape;
  std::vector<std::vector<DimSplit>> per_dim;  ///< size == ndim
  int fsdp_dim = -1;                           ///< dim the FSDP split acts on, or -1
  std::int64_t fsdp_ways = 1;                  ///< W, the FSDP world on that dim
  /// Packed params: the part extents on `parts_dim` (they sum to its global
  /// extent); the rule splits of that dim act on every part separately and
  /// the FSDP split on the concatenated local tensor. Empty when unpacked.
  std::vector<std::int64_t> parts;
  int parts_dim = -1;
  /// Per part (empty = all 1): R > 1 when R consecutive coordinates of the
  /// packed dim's one rule split share the part's piece (the part is cut in
  /// ways / R pieces; coordinate c holds piece c / R): vLLM's
  /// num_kv_head_replicas (recipe.hpp PackedSpec). R divides that split's ways.
  std::vector<std::int64_t> part_replicas{};
  std::vector<std::string> part_names{};  ///< with part_replicas: each part's name ("part i")
  /// Interleaved / per-group `packed` (contract §5.10): the rule splits of
  /// `group_dim` cut whole groups of `group_extent` elements (their unit is
  /// group_extent x the rule's unit). -1 / 1 otherwise.
  int group_dim = -1;
  std::int64_t group_extent = 1;
};

/// One contiguous box of a packed param's piece: `shape` elements at
/// `global_offset` in the global tensor sit at `local_offset` in the rank's
/// local tensor (which is its boxes concatenated on the packed dim).
struct ShardBox {
  Shape global_offset;
  Shape local_offset;
  Shape shape;
  bool operator==(const ShardBox&) const = default;
};

/// A rank's piece of one param. Offsets of empty dims carry the DCP
/// sentinel (the global extent of that dim, contract §5.2).
///  * `local_shape`: the real (logical) elements the rank holds, a prefix of
///    its allocated tensor on every dim; with `global_offset` the box of the
///    global (checkpoint) tensor they are.
///  * `padded_shape`: what the rank allocates: `local_shape` plus pad rows at
///    the end of a padded dim (`uneven: {pad: M}`) and FSDP2's padding of the
///    FSDP dim to ceil(L_local / W); equal to `local_shape` otherwise.
///  * `boxes`: packed params and `_StridedShard` labels that are no shard order
///    (`boxed_dim` >= 0; empty otherwise): the global boxes of the piece in local
///    order; `global_offset` is then the first box's offset (or the sentinel) and
///    does not describe the piece alone.
struct ShardGeom {
  Shape local_shape;
  Shape global_offset;
  Shape padded_shape;
  std::vector<ShardBox> boxes;
  bool operator==(const ShardGeom&) const = default;
};

/// Start and length of piece `k` of a dim of length `length` split `ways`
/// ways (contract §5.1). `Even` behaves as `Chunk` (divisibility is checked
/// elsewhere). Preconditions (asserted): length >= 0, ways >= 1, 0 <= k < ways.
struct Piece {
  std::int64_t start = 0;
  std::int64_t size = 0;
};
Piece split_piece(std::int64_t length, std::int64_t ways, std::int64_t k, SplitRule rule);

/// Piece `k` of split `split` of an allocated extent `length`: whole units of
/// `split.unit` rows (a trailing partial unit stays with the last piece);
/// `Pad` pieces are all ceil(L_units / (ways x m)) x m units long (the last
/// ones may start past `length`: pure padding); the FSDP split allocates
/// ceil(length / ways) per piece (FSDP2 padding). `size` is the allocated
/// extent; saturates instead of overflowing on hostile sizes. Precondition
/// (asserted): 0 <= k < s.ways.
Piece split_piece(std::int64_t length, std::int64_t k, const DimSplit& split);

/// One dim of a piece after some splits: `alloc` allocated rows, of which
/// the first `real` hold global rows [start, start + real).
struct DimPiece {
  std::int64_t alloc = 0;
  std::int64_t real = 0;
  std::int64_t start = 0;
};

/// Applies the splits of `chain` in order to a dim of global extent
/// `length` at mesh coordinates `coords` (each split acts on the allocated
/// extent of the previous piece; real rows are always a prefix). On a
/// `strided_chain` the rule splits read as DTensor's labels (mesh order) and
/// the FSDP split cuts their concatenation; `start` is then the first run's
/// (DTensor's reported offset), the runs are `shard_at`'s boxes.
DimPiece apply_chain(std::int64_t length, std::span<const DimSplit> chain,
                     std::span<const std::int64_t> coords);

/// `apply_chain` of a `strided_chain` (it calls this): real = the rows of every run,
/// start = the first run's, alloc = real, or FSDP's padded piece of them.
DimPiece strided_piece(std::int64_t length, std::span<const DimSplit> chain,
                       std::span<const std::int64_t> coords);

/// True when a rule split of `chain` has a split_factor > 1: the dim is read as DTensor
/// reads `_StridedShard` labels that are no shard order, its rows several runs.
bool strided_chain(std::span<const DimSplit> chain);

/// The dim the boxes of a piece lie on: a packed param's `parts_dim`, else the one dim
/// whose chain is `strided_chain`, else -1 (one box per piece).
int boxed_dim(const ParamGeometry& geom);

/// The real extent of `apply_chain` (for lints comparing splits).
std::int64_t split_extent(std::int64_t length, const std::vector<DimSplit>& chain,
                          std::span<const std::int64_t> coords);

/// "chunk", "balanced", "pad 64", "chunk, unit 128": how one split cuts.
std::string uneven_text(const DimSplit& split);

/// The row-major flattening of mesh coordinates `coords` on `axes` (mesh axis indices, first
/// slowest) whose sizes are `sizes`: a split's coordinate, a shard class's index.
std::int64_t axes_index(std::span<const int> axes, std::span<const std::int64_t> sizes,
                        std::span<const std::int64_t> coords);

/// The inverse of `axes_index`: sets `coords` on `axes` to the row-major unflattening of
/// `index` (other axes untouched).
void set_axes_coords(std::span<const int> axes, std::span<const std::int64_t> sizes,
                     std::int64_t index, std::span<std::int64_t> coords);

/// The coordinate of split `split` at mesh coordinates `coords`: the row-major
/// flattening of the coordinates on `split.axes`.
std::int64_t split_coord(const DimSplit& split, std::span<const std::int64_t> coords);

/// The rule piece of part `part` of a packed dim at mesh coordinates `coords` (`rule`: the
/// dim's rule splits, FSDP left out): the part through them, or with part_replicas R > 1
/// (one rule split) piece c / R of the part split ways / R, which R consecutive coordinates
/// share (vLLM's num_kv_head_replicas). `start` is relative to the part.
DimPiece packed_part_piece(const ParamGeometry& geom, std::size_t part,
                           std::span<const DimSplit> rule, std::span<const std::int64_t> coords);

/// Mesh coordinates of `rank` (row-major, first axis slowest).
std::vector<std::int64_t> mesh_coords(const Mesh& mesh, std::int64_t rank);

/// Dim `dim` of the piece held at mesh coordinates `coords`: what `shard_at` gives on that dim
/// (`alloc` = padded_shape[dim], `real` = local_shape[dim]) without the other dims or the
/// boxes; `start` is meaningful only off the packed dim. A dim's piece depends only on the
/// coordinates of the axes its own chain names (the memory report compares coordinates by it).
/// Cost O(chain length), x parts on a packed dim.
DimPiece dim_piece_at(const ParamGeometry& geom, std::size_t dim,
                      std::span<const std::int64_t> coords);

/// The piece of `geom` held at mesh coordinates `coords` (one per axis of
/// the param's mesh): nested splits in chain order, offsets summed, empty
/// dims at the sentinel. Cost O(ndim x chain length).
ShardGeom shard_at(const ParamGeometry& geom, std::span<const std::int64_t> coords);

/// Which rule placed a param.
struct RuleRef {
  enum class Kind { Rule, Experts };
  Kind kind = Kind::Rule;
  int index = -1;     ///< index in recipe.rules or recipe.experts
  std::string match;  ///< the match text as written
};

struct PlannedParam {
  std::string name;
  DType dtype = DType::BFloat16;
  Shape global_shape;
  bool requires_grad = true;
  MeshKind mesh = MeshKind::Dense;
  std::vector<ResolvedPlacement> placements;  ///< one per axis of its mesh
  SplitRule uneven = SplitRule::Chunk;
  std::int64_t pad_multiple = 0;  ///< uneven == Pad: the multiple (0 otherwise)
  std::int64_t unit = 1;          ///< the rule's `unit` (1 = none)
  RuleRef rule;
  int stage = 0;
  /// Its model chunk's virtual stage on `stage` (0 without `virtual_stages`):
  /// model chunk stage + virtual_stage x num_stages (Megatron's vp_stage).
  int virtual_stage = 0;
  std::optional<std::size_t> alias_of;    ///< index of the tie source in Plan::params
  std::vector<std::string> stacked_from;  ///< source FQNs by expert index (stacked only)
  /// A pre-stacked expert param (an `experts` entry with `stacked_dim`): the
  /// checkpoint stores the experts as this one tensor, expert e at index e of
  /// `dim` (always 0). `stacked_from` stays empty (there are no per-expert
  /// tensors to load); expert e's FQN, which `explain` and `inspect --match`
  /// accept, is name_before + e + name_after (the entry's `expert_name`).
  struct PreStacked {
    int dim = 0;
    std::int64_t count = 0;  ///< experts: global_shape[dim]
    std::string name_before;
    std::string name_after;
  };
  std::optional<PreStacked> prestacked;
  /// FP8 block scale following its weight (`fp8_scales: follow`): index of
  /// the weight in Plan::params; the rule, mesh, stage and placements are
  /// the weight's, split in whole blocks (src/planner/fp8_scales.cpp).
  std::optional<std::size_t> scale_of;
  /// The fused layout (contract §5.12): the model's `fused:` entry, else the
  /// table of src/core/fused.hpp (set by check_fused); none when the
  /// param is not a known fused tensor.
  std::optional<FusedLayout> fused;
  /// Indexed by attention head (contract §5.13): the model's `head_indexed:`
  /// entry (run_checks falls back to src/core/fused.hpp known_head_indexed).
  std::optional<HeadIndexed> head_indexed;
  /// Megatron's padded vocabulary (rule `vocab_padding`): the model's real
  /// rows on dim 0 and the multiple global_shape[0] was padded up to
  /// (divisible_by x the ways dim 0 is split); 0, 0 = not padded.
  std::int64_t vocab_rows = 0;
  std::int64_t vocab_multiple = 0;
  ParamGeometry geometry;
  SourceLoc loc;
};

/// True for a stacked expert param: stacked by an `experts` entry from
/// per-expert tensors (`stacked_from`) or pre-stacked in the checkpoint
/// (`prestacked`). Its dim 0 is the expert dim.
bool stacked_expert(const PlannedParam& param);

/// The number of experts of a stacked expert param (0 for any other).
std::int64_t expert_count(const PlannedParam& param);

/// The FQN of expert `expert` of a stacked expert param: its source
/// tensor's name, or the pre-stacked param's `expert_name` with {E}
/// substituted. Precondition: 0 <= expert < expert_count(p).
std::string expert_fqn(const PlannedParam& param, std::int64_t expert);

/// True when `param` is packed and its packed dim is split (by a rule or FSDP):
/// its pieces are then several boxes of the global tensor.
bool packed_dim_split(const PlannedParam& param);

/// Ranks that must all-reduce a tied pair's gradients when its ends sit on
/// different pipeline stages: one group per position on the other axes.
struct TieSyncGroups {
  std::string source;
  std::string alias;
  std::vector<std::vector<std::int64_t>> groups;
};

/// One optimizer-state sharding group (src/planner/zero.cpp): the ranks
/// that differ only in their coordinates on `axes` hold the same params and
/// split their fp32 master weights and optimizer state (ZeRO-2: also the
/// grads) into `degree` equal shards; a rank owns shard `index` =
/// row-major flattening of its coordinates on `axes` (first slowest), as
/// Megatron's DistributedOptimizer takes data_parallel_rank's shard of
/// every bucket (distrib_optimizer.py, _build_model_gbuf_range).
struct ZeroGroup {
  MeshKind mesh = MeshKind::Dense;  ///< the mesh whose axes `axes` indexes
  std::vector<int> axes;            ///< indices into that mesh
  std::int64_t degree = 1;          ///< product of their sizes
};

/// The resolved `training.zero` (stage 0: none). Dense params shard over
/// `dense`; stacked experts over `expert` (Megatron's expert data-parallel
/// group: the expert mesh's axes that shard no expert).
struct ZeroPlan {
  int stage = 0;
  ZeroGroup dense;
  ZeroGroup expert;
  /// False when the plan has no stacked experts (`expert` then unused).
  bool has_experts = false;
};

/// One model chunk of a pipeline with virtual stages (Megatron's interleaved
/// schedule, megatron/core/transformer/transformer_layer.py
/// get_transformer_layer_offset: chunk k = vp_stage x pp + pp_rank holds
/// layers [k x L / (pp x vp), (k + 1) x L / (pp x vp))).
struct ModelChunk {
  int stage = 0;          ///< the pipeline stage (pp coordinate) running it
  int virtual_stage = 0;  ///< its position among that stage's chunks
  /// Layer blocks [first_block, end_block) under `stages: auto` (block =
  /// decoder layer, in model order); -1, -1 with explicit stage lists.
  std::int64_t first_block = -1;
  std::int64_t end_block = -1;
};

/// The layout as the activation model sees it (src/core/activations.hpp),
/// resolved by the planner's `resolve_training` pass when the recipe gives a
/// training shape (`training.seq_len`); `arch` is nullopt (with `arch_missing`
/// naming the absent model attribute) when the model lacks a size it needs.
struct TrainingLayout {
  bool active = false;  ///< training.seq_len given
  std::optional<ActivationArch> arch;
  std::string arch_missing;
  SourceLoc arch_missing_loc;  ///< the model's `attributes:` (or its file) when `arch` is nullopt
  ActivationLayout degrees;
  std::int64_t dp = 1;            ///< data-parallel ranks a global batch is split over
  std::int64_t microbatches = 1;  ///< micro-batches per step per data-parallel rank
  std::string microbatches_from;  ///< "pipeline_schedule.microbatches", "global_batch_size", ...
  PipelineScheduleKind schedule = PipelineScheduleKind::OneFOneB;
  DType activation_dtype = DType::BFloat16;
  std::vector<StageLayers> stages;  ///< per pipeline stage
};

struct Plan {
  std::string model_name;
  std::string model_sha256;
  std::string recipe_sha256;
  std::int64_t world_size = 1;
  Mesh dense;
  std::optional<Mesh> expert;
  int pipeline_axis = -1;         ///< index in `dense`, or -1 without a pipeline
  int expert_pipeline_axis = -1;  ///< index of the same axis in `expert`, or -1
  int num_stages = 1;
  /// `pipeline.virtual_stages` (1 = none); model_chunks has num_stages x
  /// virtual_stages entries in model order when it is > 1, else none.
  int virtual_stages = 1;
  /// The chunks sit in a V (the zbv and dualpipev schedules: core/pipeline_chunks.hpp
  /// chunk_place) instead of looped; model_chunks and each param's stage say where.
  bool v_shape = false;
  std::vector<ModelChunk> model_chunks;
  std::vector<PlannedParam> params;  ///< model order; stacked params at their first source
  std::vector<TieSyncGroups> tie_sync;
  std::vector<BufferSpec> buffers;  ///< copied from the recipe, patterns included
  TrainingSpec training;            ///< copied from the recipe (memory report assumptions)
  /// `fsdp.reshard_after_forward`, copied from the recipe (nullopt: unstated).
  std::optional<bool> fsdp_reshard_after_forward;
  ZeroPlan zero;                        ///< optimizer-state sharding (training.zero resolved)
  TrainingLayout training_layout;       ///< the activation model's inputs (resolve_training)
  std::vector<Diagnostic> diagnostics;  ///< warnings kept for the manifest
  /// The params that carry attention head counts, expert ids and vocab
  /// ranges (find_local_attributes; per rank: shardc/local_attributes.hpp).
  LocalAttributeSpec local_attributes;

  /// The mesh a param lives on. Precondition (asserted): an expert param
  /// only in a plan with an expert mesh.
  [[nodiscard]] const Mesh& mesh_of(const PlannedParam& p) const {
    if (p.mesh == MeshKind::Dense) return dense;
    SHARDC_ASSERT(expert.has_value(), p.name + " is on the expert mesh, the plan has none");
    return *expert;
  }
  /// The optimizer-state group of `param`: `zero.expert` for stacked experts
  /// (and the FP8 scales following them), else `zero.dense`.
  [[nodiscard]] const ZeroGroup& zero_group_of(const PlannedParam& param) const;
  /// A rank's shard index in `group` (row-major over its coordinates on group.axes).
  [[nodiscard]] std::int64_t zero_index(const ZeroGroup& group, std::int64_t rank) const;
  /// Pipeline stage of a rank (0 without a pipeline).
  [[nodiscard]] int stage_of_rank(std::int64_t rank) const;
  /// True when `rank` holds `param` (its stage matches).
  [[nodiscard]] bool holds(std::int64_t rank, const PlannedParam& param) const;
};

/// One distinct (local_shape, global_offset) of a param and the ranks that hold it.
struct ShardClass {
  ShardGeom geom;
  RankSet ranks;
};

/// Every distinct shard of `param` with its replica set, ordered by lowest rank.
/// Cost O(shard classes x ndim) plus O(ranks) only for classes that collide
/// (empty shards sharing the sentinel offset).
std::vector<ShardClass> enumerate_shards(const Plan& plan, const PlannedParam& param);

/// Adds the quantities of one held shard of `param` to `out` (size = the
/// `width` given to `rank_sums`).
using ShardQuantities = std::function<void(const PlannedParam& param, const ShardGeom& shard,
                                           std::span<std::int64_t> out)>;

/// Per-rank sums of `width` quantities over every param a rank holds,
/// without a (params x ranks) loop: `fn` runs once per (param, shard class)
/// and params varying over the same axes share one table indexed by
/// (stage, class); each rank then sums one entry per table. An alias on the
/// same stage as its source shares its storage and is skipped (contract §5.5);
/// a cross-stage tie end is a real copy and counted. Returns rank-major
/// sums: out[rank * width + i]. Cost O(params x shard classes + tables x ranks).
std::vector<std::int64_t> rank_sums(const Plan& plan, std::size_t width, const ShardQuantities& fn);

/// Parameter bytes held by every rank (aliases counted once, unpadded and
/// padded). Cost O(params x shard classes + groups x ranks).
struct RankBytes {
  std::vector<std::int64_t> param_bytes;
  std::vector<std::int64_t> padded_param_bytes;
};
RankBytes rank_bytes(const Plan& plan);

}  // namespace shardc
