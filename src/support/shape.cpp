// numel() of a Shape (contract §3: the front end bounds the product below 2^62).
#include "support/shape.hpp"

#include <algorithm>

#include "support/limits.hpp"

namespace shardc {

std::int64_t numel(const Shape& shape) {
  std::int64_t count = 1;
  for (std::int64_t extent : shape) count *= extent;
  return count;
}

std::optional<std::int64_t> checked_numel(const Shape& shape) {
  std::int64_t count = 1;
  std::int64_t nonzero = 1;
  for (const std::int64_t extent : shape) {
    if (extent < 0) return std::nullopt;
    if (__builtin_mul_overflow(nonzero, std::max<std::int64_t>(extent, 1), &nonzero) ||
        nonzero >= limits::kMaxNumel)
      return std::nullopt;
    count *= extent;
  }
  return count;
}

std::string shape_text(const std::vector<std::int64_t>& shape) {
  std::string text = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

}  // namespace shardc
