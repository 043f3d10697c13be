// A typed view of a compiled OUTDIR, read back for `shardc verify`: the
// parts of plan.json and of rank files that the buffer simulator needs.
// Parsing (nlohmann/json) lives in src/backend/readback.cpp; the structs
// mirror the JSON fields of schemas/plan.schema.json and rank.schema.json.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "shardc/buffers.hpp"
#include "shardc/dtype.hpp"
#include "shardc/model.hpp"

namespace shardc::readback {

/// One entry of a param's `shards` in plan.json.
struct PlanShard {
  std::string ranks;  ///< rank-set text, parsed on use (RankSet::parse)
  Shape local_shape;
  Shape global_offset;
  Shape padded_shape;
};

struct PlanParam {
  std::string name;
  DType dtype = DType::BFloat16;
  Shape global_shape;
  std::string mesh;  ///< "dense" / "expert"
  int stage = 0;
  std::optional<std::string> alias_of;
  std::vector<PlanShard> shards;
};

struct PlanMeshAxis {
  std::string name;
  std::int64_t size = 1;
};

struct PlanFile {
  std::int64_t world_size = 1;
  std::vector<PlanMeshAxis> dense;
  std::vector<PlanMeshAxis> expert;  ///< empty without an expert mesh
  std::vector<PlanParam> params;
};

struct RankParam {
  std::string name;
  Shape local_shape;
  Shape global_offset;
  Shape padded_shape;
  bool alias = false;  ///< alias_of non-null: shares its source's storage here
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
};

struct MuonStage {
  std::vector<std::string> axes;
  std::vector<std::int64_t> ranks;
  std::int64_t index = 0;
  std::int64_t total_numel = 0;
  std::int64_t gathered_numel = 0;
  std::vector<MuonStageParam> params;
};

struct MuonBatch {
  DType dtype = DType::BFloat16;
  std::vector<MuonStage> stages;
};

struct MuonOwner {
  std::string param;
  std::vector<std::int64_t> owner;
  bool is_owner = false;
};

struct MuonSliceBack {
  std::string param;
  std::vector<SliceStep> steps;
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
};

struct Fsdp2Param {
  std::string name;
  int shard_dim = 0;
  std::int64_t offset = 0;
  std::int64_t padded_numel = 0;
  Shape padded_shape;
  Shape local_shape;
  Shape unsharded_shape;
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
};

struct Buffer {
  BufferKind kind = BufferKind::MuonAllGather;
  std::int64_t alignment_bytes = 0;
  std::int64_t max_batch_numel = 0;
  std::vector<MuonGroup> groups;  ///< muon
  std::vector<Fsdp2Unit> units;   ///< fsdp2
  std::vector<std::string> not_communicated;
};

struct RankFile {
  std::int64_t rank = 0;
  int stage = 0;
  std::vector<RankParam> params;
  std::vector<Buffer> buffers;
};

/// Parses plan.json; nullopt and `error` (with the JSON path) when malformed.
std::optional<PlanFile> parse_plan_file(std::string_view text, std::string& error);
/// Parses one rank file; nullopt and `error` when malformed.
std::optional<RankFile> parse_rank_file(std::string_view text, std::string& error);

}  // namespace shardc::readback
