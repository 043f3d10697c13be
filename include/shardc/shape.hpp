// Tensor shapes: extents in elements (no domain knowledge; support layer).
#pragma once

#include <cstdint>
#include <vector>

namespace shardc {

/// Shapes are lists of non-negative extents in elements. The front end
/// guarantees every extent is >= 0 and that the product (numel) fits in
/// 2^62, so planner arithmetic on one shape never overflows int64.
using Shape = std::vector<std::int64_t>;

/// Number of elements of a shape (1 for a 0-d shape). Precondition: the
/// front end's bound (product < 2^62) holds.
std::int64_t numel(const Shape& shape);

}  // namespace shardc
