// The parts of a shard class box and a piece's offset in a rank's local tensor (the box
// arithmetic itself is support/box.hpp).
#include <algorithm>

#include "reshard/reshard.hpp"

namespace shardc::reshard {

void for_each_part(const ShardClassBox& shard_class,
                   const std::function<void(std::size_t, const Box&)>& fn) {
  if (shard_class.parts.empty()) return fn(0, shard_class.box);
  for (std::size_t i = 0; i < shard_class.parts.size(); ++i) fn(i, shard_class.parts[i].box);
}

Shape local_offset_in(const Box& piece, const ShardClassBox& shard_class, std::size_t part) {
  if (shard_class.parts.empty()) return offset_within(piece, shard_class.box);
  const ShardPart& shard_part = shard_class.parts[part];
  Shape out = offset_within(piece, shard_part.box);
  for (std::size_t d = 0; d < out.size() && d < shard_part.local_offset.size(); ++d)
    out[d] += shard_part.local_offset[d];
  return out;
}

}  // namespace shardc::reshard
