// Geometry helpers for buffer layouts.
#include "planner/buffer_util.hpp"

#include <algorithm>

namespace shardc {

std::vector<std::int64_t> with_split_coord(const DimSplit& split,
                                           std::span<const std::int64_t> coords, std::int64_t k) {
  std::vector<std::int64_t> out(coords.begin(), coords.end());
  set_axes_coords(split.axes, split.axis_sizes, k, out);
  return out;
}

std::int64_t rank_of(const Mesh& mesh, std::span<const std::int64_t> coords) {
  std::int64_t rank = 0;
  for (std::size_t a = 0; a < mesh.axes.size(); ++a) rank = rank * mesh.axes[a].size + coords[a];
  return rank;
}

void mark_gathered(std::vector<int>& undone, const ParamGeometry& geom, int dim, int index) {
  const auto d = static_cast<std::size_t>(dim);
  const int suffix = static_cast<int>(geom.per_dim[d].size()) - index;
  undone[d] = std::max(undone[d], suffix);
}

Shape partial_shape(const ParamGeometry& geom, std::span<const std::int64_t> coords,
                    const std::vector<int>& undone, bool allocated) {
  Shape shape = geom.global_shape;
  bool packed_cut = false;
  for (std::size_t d = 0; d < shape.size(); ++d) {
    const auto& chain = geom.per_dim[d];
    const std::size_t applied = chain.size() - static_cast<std::size_t>(undone[d]);
    if (!geom.parts.empty() && static_cast<std::size_t>(geom.parts_dim) == d) {
      packed_cut = true;
      continue;
    }
    const DimPiece piece =
        apply_chain(shape[d], std::span<const DimSplit>(chain.data(), applied), coords);
    shape[d] = allocated ? piece.alloc : piece.real;
  }
  if (packed_cut) {
    // The packed dim: the geometry with the undone splits removed.
    ParamGeometry cut = geom;
    const auto pd = static_cast<std::size_t>(geom.parts_dim);
    cut.per_dim[pd].resize(cut.per_dim[pd].size() - static_cast<std::size_t>(undone[pd]));
    const ShardGeom sg = shard_at(cut, coords);
    shape[pd] = allocated ? sg.padded_shape[pd] : sg.local_shape[pd];
  }
  return shape;
}

}  // namespace shardc
