// The pieces a dim's rule splits cut (internal to src/planner): the walk
// W-FUSED-SPLIT (fused_check.cpp) and W-ACTIVATION-SPLIT (activation_split.cpp)
// both compare piece by piece.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "core/plan.hpp"

namespace shardc::passes {

/// The rule splits of dim `dim` of `param`: FSDP splits (storage only) and
/// 1-way splits left out.
std::vector<DimSplit> rule_splits(const PlannedParam& param, std::size_t dim);

/// Calls `visit` with the mesh coordinates (`num_axes` of them; axes the
/// chain does not split stay 0) of every piece `chain` cuts, in the row-major
/// order of the chain's axes flattened (the first split's first axis
/// outermost). Returns false, without calling `visit`, when the chain cuts
/// more than `max_pieces` pieces.
bool for_each_piece(const std::vector<DimSplit>& chain, std::size_t num_axes,
                    std::int64_t max_pieces,
                    const std::function<void(std::span<const std::int64_t>)>& visit);

}  // namespace shardc::passes
