// Small geometry helpers shared by the buffer layouts (internal).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "shardc/plan.hpp"

namespace shardc {

/// `coords` with the axes of `s` set to the row-major unflattening of `k`.
std::vector<std::int64_t> with_split_coord(const DimSplit& s, std::span<const std::int64_t> coords,
                                           std::int64_t k);

/// Global rank of mesh coordinates (row-major).
std::int64_t rank_of(const Mesh& mesh, std::span<const std::int64_t> coords);

/// The local shape at `coords` when the last `undone[d]` splits of each
/// dim's chain are not applied (they were gathered already).
Shape partial_shape(const ParamGeometry& g, std::span<const std::int64_t> coords,
                    const std::vector<int>& undone);

}  // namespace shardc
