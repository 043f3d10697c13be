// The page inputs of a compiled OUTDIR (src/report/report.hpp): what plan.json and the rank
// files hold, as read back by src/outputs (readback.hpp), turned into the rows and memory
// classes the plan page renders. Nothing here reads a file; the driver reads and checks them.
#include <algorithm>
#include <map>
#include <numeric>
#include <tuple>

#include "report/html.hpp"
#include "report/report.hpp"
#include "support/byte_size.hpp"
#include "support/dtype.hpp"

namespace shardc {
namespace {

Mesh mesh_of_axes(const std::vector<readback::PlanMeshAxis>& axes) {
  Mesh mesh;
  for (const readback::PlanMeshAxis& read_axis : axes) {
    MeshAxis axis;
    axis.name = read_axis.name;
    axis.size = read_axis.size;
    mesh.axes.push_back(std::move(axis));
  }
  return mesh;
}

std::int64_t shape_numel(const Shape& shape) {
  return std::accumulate(shape.begin(), shape.end(), std::int64_t{1},
                         [](std::int64_t acc, std::int64_t extent) { return acc * extent; });
}

// A rank's memory as its file says it: the RankMemory fields the files carry.
RankMemory rank_memory(const readback::RankMemoryFile& file) {
  RankMemory rm;
  for (std::size_t k = 0; k < kMemoryKinds; ++k) rm.bytes[k] = file.bytes[k];
  rm.total = file.total;
  rm.activations = file.step_bytes[0];
  rm.fsdp2_reduce_scatter = file.step_bytes[1];
  rm.muon_grad_copy = file.step_bytes[2];
  rm.host = file.step_bytes[3];
  return rm;
}

// One line per buffer layout of a rank file, and one per unit, group or flat buffer.
std::string buffers_summary(const readback::RankFile& file) {
  std::string text;
  for (const readback::Buffer& buffer : file.buffers) {
    text += std::string(buffer_kind_name(buffer.kind)) + ":";
    if (!buffer.units.empty()) {
      text += " " + std::to_string(buffer.units.size()) + " FSDP2 units\n";
      for (const readback::Fsdp2Unit& unit : buffer.units) {
        text += "  unit " + unit.name + " (mesh " + unit.mesh + ", index " +
                std::to_string(unit.index) + " of " + std::to_string(unit.ranks.size()) +
                " ranks): " + std::to_string(unit.params.size()) + " params, " +
                std::to_string(unit.total) + (unit.byte_units ? " bytes" : " elements") +
                " per rank, " + binary_bytes_text(unit.total_bytes) + "\n";
      }
    } else if (!buffer.groups.empty()) {
      text += " " + std::to_string(buffer.groups.size()) + " muon groups\n";
      for (const readback::MuonGroup& group : buffer.groups) {
        text += "  group " + group.key + " (mesh " + group.mesh +
                "): " + std::to_string(group.params.size()) + " params, " +
                std::to_string(group.batches.size()) + " batches\n";
      }
    } else if (!buffer.flat.empty()) {
      text += " ZeRO stage " + std::to_string(buffer.zero_stage) + ", " +
              std::to_string(buffer.flat.size()) + " flat buffers\n";
      for (const readback::FlatBuffer& flat_buffer : buffer.flat) {
        text += "  mesh " + flat_buffer.mesh + (flat_buffer.expert ? " (experts)" : "") +
                ", chunk " + std::to_string(flat_buffer.model_chunk) + ", " +
                std::string(dtype_name(flat_buffer.param_dtype)) + " params / " +
                std::string(dtype_name(flat_buffer.grad_dtype)) +
                " grads: " + std::to_string(flat_buffer.numel) + " elements, shard " +
                std::to_string(flat_buffer.shard_numel) + ", owned " +
                std::to_string(flat_buffer.owned_numel) + ", " +
                std::to_string(flat_buffer.entries.size()) + " entries\n";
      }
    } else {
      text += " nothing on this rank\n";
    }
  }
  return text;
}

}  // namespace

Plan plan_outline(const readback::PlanFile& file) {
  Plan plan;
  plan.model_name = file.model_name;
  plan.model_sha256 = file.model_sha256;
  plan.recipe_sha256 = file.recipe_sha256;
  plan.world_size = file.world_size;
  plan.dense = mesh_of_axes(file.dense);
  if (!file.expert.empty()) plan.expert = mesh_of_axes(file.expert);
  if (file.pipeline_axis) {
    plan.pipeline_axis = plan.dense.find(*file.pipeline_axis);
    if (plan.expert) plan.expert_pipeline_axis = plan.expert->find(*file.pipeline_axis);
  }
  plan.num_stages = static_cast<int>(file.num_stages);
  plan.virtual_stages = file.virtual_stages;
  return plan;
}

MemoryReport memory_of_rank_files(const std::vector<readback::RankMemoryFile>& files,
                                  const std::vector<readback::PlanStageActivations>& activations) {
  MemoryReport memory;
  // Classes: ranks of one stage with equal figures, ordered by their lowest rank.
  using Key =
      std::tuple<int, std::array<std::int64_t, 6>, std::array<std::int64_t, 4>, std::int64_t>;
  std::map<Key, std::size_t> index;
  std::vector<std::vector<std::int64_t>> members;
  for (const readback::RankMemoryFile& rank_file : files) {
    const Key key{rank_file.stage, rank_file.bytes, rank_file.step_bytes, rank_file.total};
    auto [it, added] = index.emplace(key, memory.classes.size());
    if (added) {
      MemoryClass added_class;
      added_class.stage = rank_file.stage;
      added_class.memory = rank_memory(rank_file);
      memory.classes.push_back(std::move(added_class));
      members.emplace_back();
    }
    members[it->second].push_back(rank_file.rank);
    memory.activations_counted = memory.activations_counted || rank_file.step;
  }
  std::vector<std::int64_t> peak_ranks;
  for (std::size_t class_index = 0; class_index < memory.classes.size(); ++class_index) {
    MemoryClass& mc = memory.classes[class_index];
    std::sort(members[class_index].begin(), members[class_index].end());
    mc.ranks = RankSet::from_sorted(members[class_index]);
    mc.count = static_cast<std::int64_t>(members[class_index].size());
    memory.peak = std::max(memory.peak, mc.memory.total);
  }
  for (const readback::RankMemoryFile& rank_file : files) {
    if (rank_file.total == memory.peak) peak_ranks.push_back(rank_file.rank);
  }
  std::sort(peak_ranks.begin(), peak_ranks.end());
  memory.peak_ranks = RankSet::from_sorted(peak_ranks);
  for (const readback::RankMemoryFile& rank_file : files) {
    if (!peak_ranks.empty() && rank_file.rank == peak_ranks.front())
      memory.peak_stage = rank_file.stage;
  }
  for (const readback::PlanStageActivations& read : activations) {
    StageActivations sa;
    sa.stage = read.stage;
    sa.layers = read.layers;
    sa.in_flight = read.in_flight;
    sa.per_microbatch_bytes = read.per_microbatch_bytes;
    sa.bytes = read.bytes;
    memory.stage_activations.push_back(std::move(sa));
  }
  return memory;
}

std::vector<ReportParam> largest_params(const readback::PlanFile& file) {
  auto global_bytes = [&](std::size_t i) {
    return shape_numel(file.params[i].global_shape) * element_size(file.params[i].dtype);
  };
  const std::vector<std::size_t> order =
      report::largest_first(file.params.size(), kMaxLargestParams, global_bytes);
  std::vector<ReportParam> rows;
  rows.reserve(order.size());
  for (std::size_t i = 0; i < order.size(); ++i) {
    const readback::PlanParam& param = file.params[order[i]];
    const std::vector<readback::PlanMeshAxis>& axes =
        param.mesh == "expert" ? file.expert : file.dense;
    ReportParam row;
    row.name = param.name;
    row.dtype = dtype_name(param.dtype);
    row.global_shape = param.global_shape;
    row.bytes = global_bytes(order[i]);
    row.mesh = param.mesh;
    for (std::size_t axis = 0; axis < param.placements.size() && axis < axes.size(); ++axis)
      row.placements += (axis ? ", " : "") + axes[axis].name + ": " + param.placements[axis];
    row.stage = param.stage;
    row.rule = param.rule;
    row.shard_classes = static_cast<std::int64_t>(param.shards.size());
    rows.push_back(std::move(row));
  }
  return rows;
}

ReportRank report_rank(const readback::RankFile& file) {
  ReportRank rr;
  rr.rank = file.rank;
  rr.params.reserve(file.params.size());
  for (const readback::RankParam& param : file.params) {
    ReportRankParam row;
    row.name = param.name;
    row.dtype = dtype_name(param.dtype);
    row.global_shape = param.global_shape;
    row.local_shape = param.local_shape;
    row.global_offset = param.global_offset;
    row.padded_shape = param.padded_shape;
    row.bytes = param.bytes;
    if (param.alias && param.alias_of) row.shares_storage_with = *param.alias_of;
    rr.params.push_back(std::move(row));
  }
  rr.buffers_text = buffers_summary(file);
  return rr;
}

}  // namespace shardc
