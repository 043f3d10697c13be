// Geometry helpers for buffer layouts.
#include "planner/buffer_util.hpp"

#include <algorithm>

namespace shardc {

std::vector<std::int64_t> with_split_coord(const DimSplit& s, std::span<const std::int64_t> coords,
                                           std::int64_t k) {
  std::vector<std::int64_t> out(coords.begin(), coords.end());
  set_axes_coords(s.axes, s.axis_sizes, k, out);
  return out;
}

std::int64_t rank_of(const Mesh& mesh, std::span<const std::int64_t> coords) {
  std::int64_t r = 0;
  for (std::size_t a = 0; a < mesh.axes.size(); ++a) r = r * mesh.axes[a].size + coords[a];
  return r;
}

void mark_gathered(std::vector<int>& undone, const ParamGeometry& g, int dim, int index) {
  const auto d = static_cast<std::size_t>(dim);
  const int suffix = static_cast<int>(g.per_dim[d].size()) - index;
  undone[d] = std::max(undone[d], suffix);
}

Shape partial_shape(const ParamGeometry& g, std::span<const std::int64_t> coords,
                    const std::vector<int>& undone, bool allocated) {
  Shape shape = g.global_shape;
  bool packed_cut = false;
  for (std::size_t d = 0; d < shape.size(); ++d) {
    const auto& chain = g.per_dim[d];
    const std::size_t n = chain.size() - static_cast<std::size_t>(undone[d]);
    if (!g.parts.empty() && static_cast<std::size_t>(g.parts_dim) == d) {
      packed_cut = true;
      continue;
    }
    const DimPiece p = apply_chain(shape[d], std::span<const DimSplit>(chain.data(), n), coords);
    shape[d] = allocated ? p.alloc : p.real;
  }
  if (packed_cut) {
    // The packed dim: the geometry with the undone splits removed.
    ParamGeometry cut = g;
    const auto pd = static_cast<std::size_t>(g.parts_dim);
    cut.per_dim[pd].resize(cut.per_dim[pd].size() - static_cast<std::size_t>(undone[pd]));
    const ShardGeom sg = shard_at(cut, coords);
    shape[pd] = allocated ? sg.padded_shape[pd] : sg.local_shape[pd];
  }
  return shape;
}

}  // namespace shardc
