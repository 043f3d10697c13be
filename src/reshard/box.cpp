// Box arithmetic for resharding: numel, intersection, relative offsets.
#include <algorithm>

#include "shardc/reshard.hpp"

namespace shardc::reshard {

std::int64_t numel(const Box& b) {
  std::int64_t n = 1;
  for (const std::int64_t e : b.shape) n *= e;
  return n;
}

std::optional<Box> intersect(const Box& a, const Box& b) {
  if (a.offset.size() != b.offset.size() || a.shape.size() != a.offset.size() ||
      b.shape.size() != b.offset.size())
    return std::nullopt;
  Box out;
  out.offset.resize(a.offset.size());
  out.shape.resize(a.offset.size());
  for (std::size_t d = 0; d < a.offset.size(); ++d) {
    const std::int64_t lo = std::max(a.offset[d], b.offset[d]);
    const std::int64_t hi = std::min(a.offset[d] + a.shape[d], b.offset[d] + b.shape[d]);
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

void for_each_part(const ShardClassBox& c, const std::function<void(std::size_t, const Box&)>& fn) {
  if (c.parts.empty()) return fn(0, c.box);
  for (std::size_t i = 0; i < c.parts.size(); ++i) fn(i, c.parts[i].box);
}

Shape local_offset_in(const Box& piece, const ShardClassBox& c, std::size_t part) {
  if (c.parts.empty()) return offset_within(piece, c.box);
  const ShardPart& p = c.parts[part];
  Shape out = offset_within(piece, p.box);
  for (std::size_t d = 0; d < out.size() && d < p.local_offset.size(); ++d)
    out[d] += p.local_offset[d];
  return out;
}

}  // namespace shardc::reshard
