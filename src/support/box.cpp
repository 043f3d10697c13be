#include "support/box.hpp"

#include <algorithm>

namespace shardc {

std::int64_t numel(const Box& box) { return numel(box.shape); }

bool is_empty(const Box& box) {
  return std::any_of(box.shape.begin(), box.shape.end(),
                     [](std::int64_t extent) { return extent == 0; });
}

std::optional<Box> intersect(const Box& first, const Box& second) {
  if (first.offset.size() != second.offset.size() || first.shape.size() != first.offset.size() ||
      second.shape.size() != second.offset.size())
    return std::nullopt;
  Box out;
  out.offset.resize(first.offset.size());
  out.shape.resize(first.offset.size());
  for (std::size_t d = 0; d < first.offset.size(); ++d) {
    const std::int64_t lo = std::max(first.offset[d], second.offset[d]);
    const std::int64_t hi =
        std::min(first.offset[d] + first.shape[d], second.offset[d] + second.shape[d]);
    if (hi <= lo) return std::nullopt;
    out.offset[d] = lo;
    out.shape[d] = hi - lo;
  }
  return out;
}

Shape offset_within(const Box& inner, const Box& outer) {
  Shape out(inner.offset.size());
  for (std::size_t d = 0; d < out.size(); ++d) out[d] = inner.offset[d] - outer.offset[d];
  return out;
}

std::string box_text(const Box& box) {
  return shape_text(box.offset) + " + " + shape_text(box.shape);
}

}  // namespace shardc
