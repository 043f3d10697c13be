// The parts of a shard class box and a piece's offset in a rank's local tensor (the box
// arithmetic itself is support/box.hpp).
#include <algorithm>

#include "reshard/reshard.hpp"

namespace shardc::reshard {

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
