// Nesting and offsets (SPEC §5.2): a rank's piece of a param from its split
// chains and mesh coordinates.
#include "shardc/plan.hpp"

namespace shardc {

std::vector<std::int64_t> mesh_coords(const Mesh& mesh, std::int64_t rank) {
  std::vector<std::int64_t> coords(mesh.axes.size(), 0);
  for (std::size_t i = mesh.axes.size(); i-- > 0;) {
    coords[i] = rank % mesh.axes[i].size;
    rank /= mesh.axes[i].size;
  }
  return coords;
}

std::int64_t split_coord(const DimSplit& s, std::span<const std::int64_t> coords) {
  std::int64_t k = 0;
  for (std::size_t i = 0; i < s.axes.size(); ++i)
    k = k * s.axis_sizes[i] + coords[static_cast<std::size_t>(s.axes[i])];
  return k;
}

ShardGeom shard_at(const ParamGeometry& geom, std::span<const std::int64_t> coords) {
  const std::size_t ndim = geom.global_shape.size();
  ShardGeom g;
  g.local_shape = geom.global_shape;
  g.global_offset.assign(ndim, 0);
  g.padded_shape = geom.global_shape;
  for (std::size_t d = 0; d < ndim; ++d) {
    std::int64_t length = geom.global_shape[d];
    std::int64_t offset = 0;
    for (const DimSplit& s : geom.per_dim[d]) {
      const std::int64_t k = split_coord(s, coords);
      if (s.fsdp) g.padded_shape[d] = length == 0 ? 0 : (length + s.ways - 1) / s.ways;
      const Piece p = split_piece(length, s.ways, k, s.rule);
      offset += p.start;
      length = p.size;
    }
    g.local_shape[d] = length;
    if (geom.per_dim[d].empty() || !geom.per_dim[d].back().fsdp) g.padded_shape[d] = length;
    g.global_offset[d] = length == 0 ? geom.global_shape[d] : offset;
  }
  return g;
}

}  // namespace shardc
