// The page inputs of a compiled OUTDIR (src/report/report.hpp): what plan.json and the rank
// files hold, as read back by src/outputs (readback.hpp), turned into the rows and memory
// classes the plan page renders. Nothing here reads a file; the driver reads and checks them.
#include <algorithm>
#include <map>
#include <numeric>
#include <tuple>

#include "report/report.hpp"
#include "support/byte_size.hpp"
#include "support/dtype.hpp"

namespace shardc {
namespace {

Mesh mesh_of_axes(const std::vector<readback::PlanMeshAxis>& axes) {
  Mesh mesh;
  for (const readback::PlanMeshAxis& a : axes) {
    MeshAxis axis;
    axis.name = a.name;
    axis.size = a.size;
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
  for (const readback::Buffer& b : file.buffers) {
    text += std::string(buffer_kind_name(b.kind)) + ":";
    if (!b.units.empty()) {
      text += " " + std::to_string(b.units.size()) + " FSDP2 units\n";
      for (const readback::Fsdp2Unit& u : b.units) {
        text += "  unit " + u.name + " (mesh " + u.mesh + ", index " + std::to_string(u.index) +
                " of " + std::to_string(u.ranks.size()) +
                " ranks): " + std::to_string(u.params.size()) + " params, " +
                std::to_string(u.total) + (u.byte_units ? " bytes" : " elements") + " per rank, " +
                binary_bytes_text(u.total_bytes) + "\n";
      }
    } else if (!b.groups.empty()) {
      text += " " + std::to_string(b.groups.size()) + " muon groups\n";
      for (const readback::MuonGroup& g : b.groups) {
        text += "  group " + g.key + " (mesh " + g.mesh + "): " + std::to_string(g.params.size()) +
                " params, " + std::to_string(g.batches.size()) + " batches\n";
      }
    } else if (!b.flat.empty()) {
      text += " ZeRO stage " + std::to_string(b.zero_stage) + ", " + std::to_string(b.flat.size()) +
              " flat buffers\n";
      for (const readback::FlatBuffer& f : b.flat) {
        text += "  mesh " + f.mesh + (f.expert ? " (experts)" : "") + ", chunk " +
                std::to_string(f.model_chunk) + ", " + std::string(dtype_name(f.param_dtype)) +
                " params / " + std::string(dtype_name(f.grad_dtype)) +
                " grads: " + std::to_string(f.numel) + " elements, shard " +
                std::to_string(f.shard_numel) + ", owned " + std::to_string(f.owned_numel) + ", " +
                std::to_string(f.entries.size()) + " entries\n";
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
  MemoryReport m;
  // Classes: ranks of one stage with equal figures, ordered by their lowest rank.
  using Key =
      std::tuple<int, std::array<std::int64_t, 6>, std::array<std::int64_t, 4>, std::int64_t>;
  std::map<Key, std::size_t> index;
  std::vector<std::vector<std::int64_t>> members;
  for (const readback::RankMemoryFile& f : files) {
    const Key key{f.stage, f.bytes, f.step_bytes, f.total};
    auto [it, added] = index.emplace(key, m.classes.size());
    if (added) {
      MemoryClass c;
      c.stage = f.stage;
      c.memory = rank_memory(f);
      m.classes.push_back(std::move(c));
      members.emplace_back();
    }
    members[it->second].push_back(f.rank);
    m.activations_counted = m.activations_counted || f.step;
  }
  std::vector<std::int64_t> peak_ranks;
  for (std::size_t c = 0; c < m.classes.size(); ++c) {
    MemoryClass& mc = m.classes[c];
    std::sort(members[c].begin(), members[c].end());
    mc.ranks = RankSet::from_sorted(members[c]);
    mc.count = static_cast<std::int64_t>(members[c].size());
    m.peak = std::max(m.peak, mc.memory.total);
  }
  for (const readback::RankMemoryFile& f : files) {
    if (f.total == m.peak) peak_ranks.push_back(f.rank);
  }
  std::sort(peak_ranks.begin(), peak_ranks.end());
  m.peak_ranks = RankSet::from_sorted(peak_ranks);
  for (const readback::RankMemoryFile& f : files) {
    if (!peak_ranks.empty() && f.rank == peak_ranks.front()) m.peak_stage = f.stage;
  }
  for (const readback::PlanStageActivations& a : activations) {
    StageActivations sa;
    sa.stage = a.stage;
    sa.layers = a.layers;
    sa.in_flight = a.in_flight;
    sa.per_microbatch_bytes = a.per_microbatch_bytes;
    sa.bytes = a.bytes;
    m.stage_activations.push_back(std::move(sa));
  }
  return m;
}

std::vector<ReportParam> largest_params(const readback::PlanFile& file) {
  auto global_bytes = [&](std::size_t i) {
    return shape_numel(file.params[i].global_shape) * element_size(file.params[i].dtype);
  };
  std::vector<std::size_t> order(file.params.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  const std::size_t shown = std::min(kMaxLargestParams, order.size());
  std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(shown), order.end(),
                    [&](std::size_t left, std::size_t right) {
                      const std::int64_t left_bytes = global_bytes(left);
                      const std::int64_t right_bytes = global_bytes(right);
                      return left_bytes != right_bytes ? left_bytes > right_bytes : left < right;
                    });
  std::vector<ReportParam> rows;
  rows.reserve(shown);
  for (std::size_t i = 0; i < shown; ++i) {
    const readback::PlanParam& p = file.params[order[i]];
    const std::vector<readback::PlanMeshAxis>& axes = p.mesh == "expert" ? file.expert : file.dense;
    ReportParam row;
    row.name = p.name;
    row.dtype = dtype_name(p.dtype);
    row.global_shape = p.global_shape;
    row.bytes = global_bytes(order[i]);
    row.mesh = p.mesh;
    for (std::size_t a = 0; a < p.placements.size() && a < axes.size(); ++a)
      row.placements += (a ? ", " : "") + axes[a].name + ": " + p.placements[a];
    row.stage = p.stage;
    row.rule = p.rule;
    row.shard_classes = static_cast<std::int64_t>(p.shards.size());
    rows.push_back(std::move(row));
  }
  return rows;
}

ReportRank report_rank(const readback::RankFile& file) {
  ReportRank rr;
  rr.rank = file.rank;
  rr.params.reserve(file.params.size());
  for (const readback::RankParam& p : file.params) {
    ReportRankParam row;
    row.name = p.name;
    row.dtype = dtype_name(p.dtype);
    row.global_shape = p.global_shape;
    row.local_shape = p.local_shape;
    row.global_offset = p.global_offset;
    row.padded_shape = p.padded_shape;
    row.bytes = p.bytes;
    if (p.alias && p.alias_of) row.shares_storage_with = *p.alias_of;
    rr.params.push_back(std::move(row));
  }
  rr.buffers_text = buffers_summary(file);
  return rr;
}

}  // namespace shardc
