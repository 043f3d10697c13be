// Splitting one tensor dim over n ranks (SPEC §5.1).
#include <algorithm>

#include "shardc/plan.hpp"

namespace shardc {

Piece split_piece(std::int64_t length, std::int64_t ways, std::int64_t k, SplitRule rule) {
  if (rule == SplitRule::Balanced) {
    // hyper-parallel: q, r = divmod(L, n); the first r ranks get one more.
    const std::int64_t q = length / ways;
    const std::int64_t r = length % ways;
    return {k * q + std::min(k, r), q + (k < r ? 1 : 0)};
  }
  // torch.chunk (DTensor Shard, FSDP2): c = ceil(L/n); trailing ranks may be empty.
  // `Even` is checked for divisibility elsewhere and splits the same way.
  const std::int64_t c = length == 0 ? 0 : (length + ways - 1) / ways;
  const std::int64_t start = std::min(k * c, length);
  return {start, std::clamp(length - k * c, std::int64_t{0}, c)};
}

}  // namespace shardc
