// Tensor shapes: extents in elements (no domain knowledge; support layer).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace shardc {

/// Shapes are lists of non-negative extents in elements. The front end
/// guarantees every extent is >= 0 and that the product (numel) fits in
/// 2^62, so planner arithmetic on one shape never overflows int64.
using Shape = std::vector<std::int64_t>;

/// Number of elements of a shape (1 for a 0-d shape). Precondition: the
/// front end's bound (product < 2^62) holds.
std::int64_t numel(const Shape& shape);

/// numel of a shape read from an untrusted file (plan.json, a rank file): nullopt when an
/// extent is negative or the product of the non-zero extents reaches 2^62 (limits::kMaxNumel,
/// docs/limits.md), so no product of its extents can wrap. Zeros count as 1 in the
/// bound: [0, 2^62] is refused like [1, 2^62].
std::optional<std::int64_t> checked_numel(const Shape& shape);

/// "[4096, 1024]" ("[]" for a 0-d shape): the one spelling of a shape (or of
/// any list of extents) in messages and text output.
std::string shape_text(const std::vector<std::int64_t>& shape);

/// `value` rounded up to a multiple of `multiple`; `value` itself when
/// `multiple` <= 1. Precondition: value >= 0 and the result fits in int64.
[[nodiscard]] constexpr std::int64_t round_up(std::int64_t value, std::int64_t multiple) {
  return multiple <= 1 ? value : (value + multiple - 1) / multiple * multiple;
}

}  // namespace shardc
