// Per-rank totals over progressions (difference arrays by stride).
#include "reshard/accumulate.hpp"

namespace shardc::reshard {

void RankAccumulator::add(const Progression& run, std::int64_t value) {
  const std::int64_t stride = run.count == 1 ? 1 : run.stride;
  auto& diffs = diff_[stride];
  if (diffs.empty()) diffs.assign(static_cast<std::size_t>(world_ + stride), 0);
  diffs[static_cast<std::size_t>(run.start)] += value;
  diffs[static_cast<std::size_t>(run.start + run.count * stride)] -= value;
}

std::vector<std::int64_t> RankAccumulator::finish() const {
  std::vector<std::int64_t> out(static_cast<std::size_t>(world_), 0);
  for (const auto& [stride, d] : diff_) {
    std::vector<std::int64_t> acc(d.begin(), d.begin() + world_);
    for (std::int64_t i = 0; i < world_; ++i) {
      const auto at = static_cast<std::size_t>(i);
      if (i >= stride) acc[at] += acc[at - static_cast<std::size_t>(stride)];
      out[at] += acc[at];
    }
  }
  return out;
}

}  // namespace shardc::reshard
