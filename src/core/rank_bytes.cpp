// Per-rank sums of shard quantities (parameter bytes, memory kinds) without
// a (params x ranks) loop: params that vary over the same axes share one
// table indexed by (stage, class); each rank then sums one entry per table.
#include <map>
#include <utility>

#include "core/shard_classes.hpp"

namespace shardc {
namespace {

struct Table {
  MeshKind mesh = MeshKind::Dense;
  ClassSpace cs;
  std::vector<std::int64_t> values;  // [(stage * classes + class) * width + i]
};

std::int64_t class_index(const ClassSpace& cs, std::span<const std::int64_t> coords) {
  std::int64_t k = 0;
  for (std::size_t a = 0; a < cs.sizes.size(); ++a)
    if (cs.varying[a]) k = k * cs.sizes[a] + coords[a];
  return k;
}

// True when the alias shares storage with its source on the same ranks.
bool counted_once(const Plan& plan, const PlannedParam& param) {
  return param.alias_of && plan.params[*param.alias_of].stage == param.stage;
}

}  // namespace

std::vector<std::int64_t> rank_sums(const Plan& plan, std::size_t width,
                                    const ShardQuantities& fn) {
  std::map<std::pair<int, std::vector<bool>>, Table> tables;
  const auto stages = static_cast<std::size_t>(plan.num_stages);
  for (const PlannedParam& param : plan.params) {
    if (counted_once(plan, param)) continue;
    ClassSpace cs = class_space(plan, param);
    auto key = std::make_pair(static_cast<int>(param.mesh), cs.varying);
    auto [it, fresh] = tables.try_emplace(std::move(key));
    Table& table = it->second;
    if (fresh) {
      table.mesh = param.mesh;
      table.cs = cs;
      table.values.assign(stages * static_cast<std::size_t>(cs.num_classes) * width, 0);
    }
    const auto base =
        static_cast<std::size_t>(param.stage) * static_cast<std::size_t>(cs.num_classes);
    for_each_class(cs, [&](std::span<const std::int64_t> coords) {
      const ShardGeom shard = shard_at(param.geometry, coords);
      const auto k = (base + static_cast<std::size_t>(class_index(cs, coords))) * width;
      fn(param, shard, std::span<std::int64_t>(table.values).subspan(k, width));
    });
  }
  const auto world = static_cast<std::size_t>(plan.world_size);
  std::vector<std::int64_t> out(world * width, 0);
  for (const auto& [key, t] : tables) {
    const Mesh& mesh = t.mesh == MeshKind::Expert ? *plan.expert : plan.dense;
    std::vector<std::int64_t> coords(mesh.axes.size(), 0);
    for (std::size_t r = 0; r < world; ++r) {
      // Odometer over mesh coordinates, rank-major (no division per rank).
      const auto stage = static_cast<std::size_t>(
          t.cs.pipeline_axis >= 0 ? coords[static_cast<std::size_t>(t.cs.pipeline_axis)] : 0);
      const auto k = (stage * static_cast<std::size_t>(t.cs.num_classes) +
                      static_cast<std::size_t>(class_index(t.cs, coords))) *
                     width;
      for (std::size_t i = 0; i < width; ++i) out[r * width + i] += t.values[k + i];
      for (std::size_t a = coords.size(); a-- > 0;) {
        if (++coords[a] < mesh.axes[a].size) break;
        coords[a] = 0;
      }
    }
  }
  return out;
}

RankBytes rank_bytes(const Plan& plan) {
  const std::vector<std::int64_t> sums = rank_sums(
      plan, 2, [](const PlannedParam& param, const ShardGeom& shard, std::span<std::int64_t> out) {
        const std::int64_t esize = element_size(param.dtype);
        out[0] += numel(shard.local_shape) * esize;
        out[1] += numel(shard.padded_shape) * esize;
      });
  RankBytes out;
  const auto world = static_cast<std::size_t>(plan.world_size);
  out.param_bytes.resize(world);
  out.padded_param_bytes.resize(world);
  for (std::size_t r = 0; r < world; ++r) {
    out.param_bytes[r] = sums[2 * r];
    out.padded_param_bytes[r] = sums[2 * r + 1];
  }
  return out;
}

}  // namespace shardc
