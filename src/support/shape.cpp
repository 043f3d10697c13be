// numel() of a Shape (contract §3: the front end bounds the product below 2^62).
#include "shardc/shape.hpp"

#include <algorithm>

#include "shardc/limits.hpp"

namespace shardc {

std::int64_t numel(const Shape& shape) {
  std::int64_t n = 1;
  for (std::int64_t extent : shape) n *= extent;
  return n;
}

std::optional<std::int64_t> checked_numel(const Shape& shape) {
  std::int64_t n = 1;
  std::int64_t nonzero = 1;
  for (const std::int64_t extent : shape) {
    if (extent < 0) return std::nullopt;
    if (__builtin_mul_overflow(nonzero, std::max<std::int64_t>(extent, 1), &nonzero) ||
        nonzero >= limits::kMaxNumel)
      return std::nullopt;
    n *= extent;
  }
  return n;
}

}  // namespace shardc
