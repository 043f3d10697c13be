// Geometry helpers for buffer layouts.
#include "buffer_util.hpp"

namespace shardc {

std::vector<std::int64_t> with_split_coord(const DimSplit& s, std::span<const std::int64_t> coords,
                                           std::int64_t k) {
  std::vector<std::int64_t> out(coords.begin(), coords.end());
  for (std::size_t i = s.axes.size(); i-- > 0;) {
    out[static_cast<std::size_t>(s.axes[i])] = k % s.axis_sizes[i];
    k /= s.axis_sizes[i];
  }
  return out;
}

std::int64_t rank_of(const Mesh& mesh, std::span<const std::int64_t> coords) {
  std::int64_t r = 0;
  for (std::size_t a = 0; a < mesh.axes.size(); ++a) r = r * mesh.axes[a].size + coords[a];
  return r;
}

Shape partial_shape(const ParamGeometry& g, std::span<const std::int64_t> coords,
                    const std::vector<int>& undone) {
  Shape shape = g.global_shape;
  for (std::size_t d = 0; d < shape.size(); ++d) {
    const auto& chain = g.per_dim[d];
    const std::size_t n = chain.size() - static_cast<std::size_t>(undone[d]);
    std::int64_t len = shape[d];
    for (std::size_t i = 0; i < n; ++i)
      len = split_piece(len, chain[i].ways, split_coord(chain[i], coords), chain[i].rule).size;
    shape[d] = len;
  }
  return shape;
}

}  // namespace shardc
