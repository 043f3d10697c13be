// Distinct shard enumeration: a param's pieces depend only on the
// coordinates of the axes that split it (its "varying" axes), so each
// combination of those coordinates is one shard class whose replica set is
// a product of progressions over the other ("free") axes.
#include <algorithm>
#include <map>
#include <tuple>
#include <unordered_map>

#include "core/shard_classes.hpp"

namespace shardc {
namespace {

std::vector<std::int64_t> strides_of(const Mesh& mesh) {
  std::vector<std::int64_t> strides(mesh.axes.size(), 1);
  for (std::size_t i = mesh.axes.size(); i-- > 1;) strides[i - 1] = strides[i] * mesh.axes[i].size;
  return strides;
}

}  // namespace

ClassSpace class_space(const Plan& plan, const PlannedParam& param) {
  const Mesh& mesh = plan.mesh_of(param);
  ClassSpace cs;
  cs.strides = strides_of(mesh);
  cs.varying.assign(mesh.axes.size(), false);
  for (const auto& chain : param.geometry.per_dim)
    for (const DimSplit& split : chain)
      for (int axis : split.axes) cs.varying[static_cast<std::size_t>(axis)] = true;
  cs.pipeline_axis =
      param.mesh == MeshKind::Expert ? plan.expert_pipeline_axis : plan.pipeline_axis;
  for (std::size_t a = 0; a < mesh.axes.size(); ++a) {
    cs.sizes.push_back(mesh.axes[a].size);
    if (cs.varying[a]) cs.num_classes *= mesh.axes[a].size;
  }
  return cs;
}

RankSet class_ranks(const ClassSpace& cs, std::span<const std::int64_t> coords, int stage) {
  // Base rank: varying axes at their coordinates, the pipeline axis at the
  // stage, free axes at 0.
  std::int64_t base = 0;
  std::vector<std::size_t> free_axes;
  for (std::size_t a = 0; a < cs.sizes.size(); ++a) {
    if (cs.varying[a]) {
      base += coords[a] * cs.strides[a];
    } else if (static_cast<int>(a) == cs.pipeline_axis) {
      base += stage * cs.strides[a];
    } else if (cs.sizes[a] > 1) {
      free_axes.push_back(a);
    }
  }
  if (free_axes.empty()) return RankSet::from_progressions({{base, 1, 1}});
  // The innermost free axis gives a progression; outer free axes whose stride
  // continues it merge into it; the rest enumerate the progression's bases.
  std::size_t j = free_axes.size() - 1;
  Progression run{0, cs.strides[free_axes[j]], cs.sizes[free_axes[j]]};
  while (j > 0 && cs.strides[free_axes[j - 1]] == run.count * run.stride) {
    --j;
    run.count *= cs.sizes[free_axes[j]];
  }
  std::vector<std::int64_t> bases{base};
  for (std::size_t i = j; i-- > 0;) {
    const std::size_t axis = free_axes[i];
    std::vector<std::int64_t> next;
    next.reserve(bases.size() * static_cast<std::size_t>(cs.sizes[axis]));
    for (std::int64_t c = 0; c < cs.sizes[axis]; ++c)
      for (std::int64_t base_rank : bases) next.push_back(base_rank + c * cs.strides[axis]);
    bases = std::move(next);
  }
  std::sort(bases.begin(), bases.end());
  std::vector<Progression> runs;
  runs.reserve(bases.size());
  for (std::int64_t base_rank : bases) runs.push_back({base_rank, run.stride, run.count});
  return RankSet::from_progressions(std::move(runs));
}

void for_each_class(const ClassSpace& cs,
                    const std::function<void(std::span<const std::int64_t>)>& fn) {
  std::vector<std::int64_t> coords(cs.sizes.size(), 0);
  while (true) {
    fn(coords);
    // Row-major increment over the varying axes (last fastest).
    std::size_t axis = cs.sizes.size();
    while (axis-- > 0) {
      if (!cs.varying[axis]) continue;
      if (++coords[axis] < cs.sizes[axis]) break;
      coords[axis] = 0;
    }
    if (axis == static_cast<std::size_t>(-1)) return;
  }
}

std::vector<ShardClass> enumerate_shards(const Plan& plan, const PlannedParam& param) {
  const ClassSpace cs = class_space(plan, param);
  std::vector<ShardClass> out;
  out.reserve(static_cast<std::size_t>(std::min<std::int64_t>(cs.num_classes, 1 << 20)));
  // Only shards with an empty dim can collide (they share the sentinel offset). The padded
  // shape is part of the key: an empty FSDP shard of a non-empty TP piece still allocates its
  // padded rows, unlike its empty neighbours (reports/plan_shard_padded_class).
  std::map<std::tuple<Shape, Shape, Shape>, std::size_t> empty_index;
  for_each_class(cs, [&](std::span<const std::int64_t> coords) {
    ShardGeom shard = shard_at(param.geometry, coords);
    RankSet ranks = class_ranks(cs, coords, param.stage);
    const bool empty =
        std::find(shard.local_shape.begin(), shard.local_shape.end(), 0) != shard.local_shape.end();
    if (empty) {
      auto [it, fresh] = empty_index.try_emplace(
          {shard.local_shape, shard.global_offset, shard.padded_shape}, out.size());
      if (!fresh) {
        ShardClass& merged = out[it->second];
        merged.ranks = merged.ranks.unite(ranks);
        return;
      }
    }
    out.push_back({std::move(shard), std::move(ranks)});
  });
  return out;
}

}  // namespace shardc
