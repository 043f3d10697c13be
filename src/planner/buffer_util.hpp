// Small geometry helpers shared by the buffer layouts (internal).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/plan.hpp"

namespace shardc {

/// `coords` with the axes of `split` set to the row-major unflattening of `k`.
std::vector<std::int64_t> with_split_coord(const DimSplit& split,
                                           std::span<const std::int64_t> coords, std::int64_t k);

/// Global rank of mesh coordinates (row-major).
std::int64_t rank_of(const Mesh& mesh, std::span<const std::int64_t> coords);

/// Marks split (dim, index) as gathered: every split at or after `index` in
/// that dim's chain is undone (splits after it are innermost, gathered
/// before it, or one-way splits the muon stages skip, which must be undone
/// with it: the chain is undone as a suffix, never by counting stages).
void mark_gathered(std::vector<int>& undone, const ParamGeometry& geom, int dim, int index);

/// The local shape at `coords` when the last `undone[d]` splits of each
/// dim's chain are not applied (they were gathered already): the real
/// extents, or the allocated ones (pad rows, FSDP2 padding) with `allocated`.
Shape partial_shape(const ParamGeometry& geom, std::span<const std::int64_t> coords,
                    const std::vector<int>& undone, bool allocated = false);

}  // namespace shardc
