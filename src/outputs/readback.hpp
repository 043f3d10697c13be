// A typed view of a compiled OUTDIR, read back for `shardc verify`: the
// parts of plan.json and of rank files that the buffer simulator needs.
// Parsing lives in src/outputs/readback.cpp (simdjson's DOM for plain texts,
// nlohmann/json as the reference that words every error); the structs
// mirror the JSON fields of schemas/plan.schema.json and rank.schema.json,
// except that the buffer layouts, written in the lean form (docs/formats.md
// "Rank files: derived fields"), are expanded here: param indices become names,
// rank lists and run-length split sizes are expanded, and every derived
// field (member shapes, pad shape, offsets, padded_numel, slice-back,
// is_owner, FSDP2 padded/local shapes) is computed from the written ones.
// Every struct compares member-wise (operator==), so tests can check the
// parsers against their reference reader.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/model.hpp"
#include "planner/buffers.hpp"
#include "support/dtype.hpp"
#include "support/limits.hpp"

namespace shardc::readback {

/// Largest world size an output can have (the recipe's mesh bound, 2^31 - 1).
inline constexpr std::int64_t kMaxWorldSize = limits::kMaxWorld;

/// One of a packed shard's `boxes` in plan.json (contract §5.10): `shape`
/// elements at `global_offset` of the global tensor sit at `local_offset` in
/// the rank's local tensor. Elements.
struct PlanBox {
  Shape global_offset;
  Shape local_offset;
  Shape shape;
  bool operator==(const PlanBox&) const = default;
};

/// One entry of a param's `shards` in plan.json.
struct PlanShard {
  std::string ranks;  ///< rank-set text, parsed on use (RankSet::parse)
  Shape local_shape;
  Shape global_offset;
  Shape padded_shape;
  std::vector<PlanBox> boxes;  ///< packed params only (empty otherwise, or for an empty piece)
  bool operator==(const PlanShard&) const = default;
};

struct PlanParam {
  std::string name;
  DType dtype = DType::BFloat16;
  Shape global_shape;
  std::string mesh;  ///< "dense" / "expert"
  /// `placements`: one label per axis of `mesh` (Replicate(), Shard(d), _StridedShard(d, sf=F)).
  std::vector<std::string> placements;
  int stage = 0;
  std::optional<std::string> alias_of;
  /// `stacked_from` of a stacked expert param: its `count`, `first`, `last` and `sources`.
  struct Stacked {
    std::int64_t count = 0;
    std::string first;
    std::string last;
    std::vector<std::string> sources;
    bool operator==(const Stacked&) const = default;
  };
  std::optional<Stacked> stacked_from;
  std::vector<PlanShard> shards;
  std::string uneven;   ///< "chunk", "balanced", "even", "pad"
  bool packed = false;  ///< has `packed` parts or `strided_boxes` (pieces are several boxes)
  std::int64_t vocab_rows = 0;      ///< `vocab_padding.rows` (0 = not a padded vocabulary)
  std::int64_t vocab_multiple = 0;  ///< `vocab_padding.multiple`
  std::string rule;                 ///< `rule.match`: the rule or experts entry ("" when absent)
  bool operator==(const PlanParam&) const = default;
};

struct PlanMeshAxis {
  std::string name;
  std::int64_t size = 1;
  bool operator==(const PlanMeshAxis&) const = default;
};

/// `min` / `median` / `max` of a per-rank byte statistic in plan.json `summary`, with
/// the rank sets (text) that reach min and max.
struct PlanRankStat {
  std::int64_t min = 0;
  std::int64_t max = 0;
  std::string min_ranks;
  std::string max_ranks;
  std::int64_t median = 0;  ///< the lower median (0 when the file has none)
  bool operator==(const PlanRankStat&) const = default;
};

/// One entry of plan.json `diagnostics` (the warnings compile kept).
struct PlanDiagnostic {
  std::string code;  ///< "W-VOCAB"
  std::string severity;
  std::string message;
  std::string hint;
  std::string file;
  std::int64_t line = 0;
  std::int64_t column = 0;
  bool operator==(const PlanDiagnostic&) const = default;
};

/// One stage of `summary.per_rank_memory.stage_activations`.
struct PlanStageActivations {
  int stage = 0;
  std::int64_t layers = 0;
  std::int64_t in_flight = 0;
  std::int64_t per_microbatch_bytes = 0;
  std::int64_t bytes = 0;
  bool operator==(const PlanStageActivations&) const = default;
};

/// plan.json `summary.per_rank_memory`: per kind (memory kinds, the step kinds when
/// activations are counted, then "total", in the file's order) the world's min / median /
/// max, and the activations per stage when counted.
struct PlanMemory {
  std::string not_counted;
  std::vector<std::pair<std::string, PlanRankStat>> kinds;
  std::vector<PlanStageActivations> activations;  ///< empty when not counted
  bool operator==(const PlanMemory&) const = default;
};

struct PlanFile {
  std::int64_t world_size = 1;
  std::string model_sha256;
  std::string recipe_sha256;
  std::vector<PlanMeshAxis> dense;
  std::vector<PlanMeshAxis> expert;          ///< empty without an expert mesh
  std::optional<std::string> pipeline_axis;  ///< `pipeline.axis`; nullopt without a pipeline
  std::int64_t num_stages = 1;
  std::vector<PlanParam> params;
  std::int64_t summary_num_params = 0;  ///< `summary.num_params`
  PlanRankStat per_rank_param_bytes;
  PlanRankStat per_rank_padded_param_bytes;
  std::string model_name;                     ///< `inputs.model.name` ("" when absent)
  int virtual_stages = 1;                     ///< `pipeline.virtual_stages` (1 when absent)
  std::vector<PlanDiagnostic> diagnostics;    ///< `diagnostics` (empty when absent)
  std::optional<PlanMemory> per_rank_memory;  ///< `summary.per_rank_memory` when written
  bool operator==(const PlanFile&) const = default;
};

struct RankParam {
  std::string name;
  DType dtype = DType::BFloat16;
  int stage = 0;
  Shape global_shape;
  Shape local_shape;
  Shape global_offset;
  Shape padded_shape;
  std::int64_t numel = 0;  ///< elements of local_shape, as the file says
  std::int64_t bytes = 0;  ///< bytes of local_shape, as the file says
  bool alias = false;      ///< alias_of non-null: shares its source's storage here
  /// The tie's source FQN: `alias_of`, or `tied_copy_of` (the source on another pipeline
  /// stage: a copy kept in sync, not shared storage); nullopt for an untied param.
  std::optional<std::string> alias_of;
  bool operator==(const RankParam&) const = default;
};

/// `coords` of a rank file on one mesh: axis name -> coordinate, sorted by name.
using RankCoords = std::vector<std::pair<std::string, std::int64_t>>;

/// `totals` of a rank file, as the file says.
struct RankTotals {
  std::int64_t param_bytes = 0;
  std::int64_t padded_param_bytes = 0;
  std::int64_t num_params = 0;
  bool operator==(const RankTotals&) const = default;
};

struct MuonStageParam {
  std::string name;
  int tensor_dim = 0;
  std::vector<std::int64_t> split_sizes;
  std::vector<Shape> rank_shapes;
  Shape pad_shape;
  std::int64_t offset = 0;
  std::int64_t actual_numel = 0;
  std::int64_t padded_numel = 0;
  bool operator==(const MuonStageParam&) const = default;
};

struct MuonStage {
  std::vector<std::string> axes;
  std::vector<std::int64_t> ranks;
  std::int64_t index = 0;
  std::int64_t total_numel = 0;
  std::int64_t gathered_numel = 0;
  std::vector<MuonStageParam> params;
  bool operator==(const MuonStage&) const = default;
};

struct MuonBatch {
  DType dtype = DType::BFloat16;
  std::vector<MuonStage> stages;
  bool operator==(const MuonBatch&) const = default;
};

struct MuonOwner {
  std::string param;
  std::vector<std::int64_t> owner;
  bool is_owner = false;
  bool operator==(const MuonOwner&) const = default;
};

struct MuonSliceBack {
  std::string param;
  std::vector<SliceStep> steps;
  /// Field by field (SliceStep has no operator==).
  bool operator==(const MuonSliceBack& other) const;
};

struct MuonGroup {
  std::string key;
  std::string mesh;
  std::vector<std::string> replicate_axes;
  std::vector<std::int64_t> replicate_coord;
  std::vector<std::string> params;
  std::vector<MuonOwner> owners;
  std::vector<MuonBatch> batches;
  std::vector<MuonSliceBack> slice_back;
  bool operator==(const MuonGroup&) const = default;
};

struct Fsdp2Param {
  std::string name;
  int shard_dim = 0;
  std::int64_t offset = 0;
  std::int64_t padded_numel = 0;
  Shape padded_shape;
  Shape local_shape;
  Shape unsharded_shape;
  bool operator==(const Fsdp2Param&) const = default;
};

struct Fsdp2Unit {
  std::string name;
  std::string mesh;
  bool byte_units = false;
  std::vector<std::int64_t> ranks;
  std::int64_t index = 0;
  std::int64_t total = 0;
  std::int64_t total_bytes = 0;
  std::vector<std::int64_t> output_shape;
  std::vector<Fsdp2Param> params;
  bool operator==(const Fsdp2Unit&) const = default;
};

/// One piece of a flat optimizer buffer (rank file `params` row).
struct FlatEntry {
  std::string name;
  std::int64_t param_offset = 0;
  std::int64_t numel = 0;
  std::int64_t start = 0;
  std::int64_t bucket = 0;
  bool operator==(const FlatEntry&) const = default;
};

/// One owned range (rank file `owned` row): entry index, param offset, numel, buffer start.
struct FlatOwned {
  std::int64_t entry = 0;
  std::int64_t param_offset = 0;
  std::int64_t numel = 0;
  std::int64_t buffer_start = 0;
  bool operator==(const FlatOwned&) const = default;
};

/// One flat optimizer buffer of a rank file (megatron_distopt / deepspeed_zero).
struct FlatBuffer {
  std::string mesh;
  bool expert = false;
  int model_chunk = 0;
  DType param_dtype = DType::BFloat16;
  DType grad_dtype = DType::BFloat16;
  std::vector<std::int64_t> ranks;
  std::int64_t index = 0;
  std::int64_t bucket_size = -1;  ///< -1 = null (one bucket)
  std::int64_t numel = 0;
  std::int64_t shard_numel = 0;
  std::int64_t owned_numel = 0;
  std::vector<std::array<std::int64_t, 3>> buckets;  ///< [start, end, numel_unpadded]
  std::vector<FlatEntry> entries;
  std::vector<FlatOwned> owned;
  bool operator==(const FlatBuffer&) const = default;
};

struct Buffer {
  BufferKind kind = BufferKind::MuonAllGather;
  int zero_stage = 0;                    ///< flat kinds
  bool pad_for_high_nccl_busbw = false;  ///< megatron_distopt
  std::vector<FlatBuffer> flat;          ///< flat kinds
  std::int64_t alignment_bytes = 0;
  std::int64_t max_batch_numel = 0;
  std::vector<MuonGroup> groups;  ///< muon
  std::vector<Fsdp2Unit> units;   ///< fsdp2
  std::vector<std::string> not_communicated;
  bool operator==(const Buffer&) const = default;
};

struct RankFile {
  std::int64_t rank = 0;
  std::int64_t world_size = 0;
  int stage = 0;
  RankCoords dense;
  std::optional<RankCoords> expert;  ///< nullopt when `coords.expert` is null
  std::vector<RankParam> params;
  std::vector<Buffer> buffers;
  RankTotals totals;
  bool operator==(const RankFile&) const = default;
};

/// What a rank file says of its memory (`memory`), read without its params and buffers
/// (`shardc report OUTDIR` reads every rank file for it).
struct RankMemoryFile {
  std::int64_t rank = 0;
  std::int64_t world_size = 0;
  int stage = 0;
  /// params, grads, master_weights, optimizer_state, fsdp2_allgather, muon_allgather.
  std::array<std::int64_t, 6> bytes{};
  bool step = false;  ///< activations counted: the four step kinds below are in the file
  /// activations, fsdp2_reduce_scatter, muon_grad_copy, host (0 unless `step`).
  std::array<std::int64_t, 4> step_bytes{};
  std::int64_t total = 0;
  bool operator==(const RankMemoryFile&) const = default;
};

/// One file listed in manifest.json.
struct ManifestEntry {
  std::string path;        ///< relative to OUTDIR: "plan.json", "ranks/rank-03.json"
  std::int64_t rank = -1;  ///< -1 for plan.json
  std::int64_t bytes = 0;
  std::string sha256;  ///< 64 lowercase hex digits
  bool operator==(const ManifestEntry&) const = default;
};

/// manifest.json (`shardc.manifest/v1`), the commit marker of an OUTDIR.
struct ManifestFile {
  std::int64_t world_size = 1;
  std::string model_sha256;
  std::string recipe_sha256;
  ManifestEntry plan;
  std::string ranks;                      ///< rank-set text of the rank files ("" = none)
  std::vector<ManifestEntry> rank_files;  ///< ascending by rank
  bool operator==(const ManifestFile&) const = default;
};

/// Parses manifest.json and checks it is self-consistent: world_size in
/// [1, 2^31 - 1], `count` = the number of files, each rank in range,
/// strictly ascending, named `ranks/rank_file_name(rank)`, the `ranks` set
/// = the files' ranks (its size checked before it is expanded), sha256 64
/// hex digits, bytes >= 0. nullopt and `error` (with the JSON path) otherwise.
std::optional<ManifestFile> parse_manifest_file(std::string_view text, std::string& error);

/// Parses plan.json; nullopt and `error` (with the JSON path) when malformed.
/// Integers that the format bounds are checked while parsing: world_size
/// and mesh axis sizes in [1, 2^31 - 1], stages and tensor dims 32-bit;
/// meaning (products, cross-file agreement) is verify's job.
std::optional<PlanFile> parse_plan_file(std::string_view text, std::string& error);
/// Parses one rank file; nullopt and `error` when malformed.
std::optional<RankFile> parse_rank_file(std::string_view text, std::string& error);
/// Parses a rank file's `rank`, `world_size`, `stage` and `memory` (every byte figure >= 0,
/// `rank` in [0, world_size)); nullopt and `error` when malformed.
std::optional<RankMemoryFile> parse_rank_memory_file(std::string_view text, std::string& error);

/// The reference reader behind the three parsers above: nlohmann/json's DOM,
/// walked with each value's JSON path. The parsers read a text without
/// escapes or non-ASCII bytes through simdjson's DOM and re-read it with the
/// reference on any error, so their errors are its errors and their results
/// equal its results (the unit tests and the fuzz entry compare the two).
std::optional<ManifestFile> parse_manifest_file_reference(std::string_view text,
                                                          std::string& error);
/// See parse_manifest_file_reference.
std::optional<PlanFile> parse_plan_file_reference(std::string_view text, std::string& error);
/// See parse_manifest_file_reference.
std::optional<RankFile> parse_rank_file_reference(std::string_view text, std::string& error);
/// See parse_manifest_file_reference.
std::optional<RankMemoryFile> parse_rank_memory_file_reference(std::string_view text,
                                                               std::string& error);

/// The first param entry (in `params` order) that differs between two plan.json texts, and
/// its first differing field (keys in `second`'s order, then keys only `first` has), each
/// value as JSON of at most 100 printable characters ("(absent)" when missing). nullopt when
/// either text does not parse, the params lists differ in length or names, or every entry
/// is equal (the difference is elsewhere). For `verify --against`'s mismatch message.
struct FieldDifference {
  std::string param;
  std::string key;
  std::string first;
  std::string second;
};
std::optional<FieldDifference> param_field_difference(std::string_view first_text,
                                                      std::string_view second_text);

}  // namespace shardc::readback
