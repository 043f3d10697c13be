// Per-rank totals added over progressions (internal to src/reshard): one
// difference array per distinct stride, so adding a run costs O(1) and
// finishing costs O(world x distinct strides).
#pragma once

#include <cstdint>
#include <map>
#include <vector>

#include "support/rank_set.hpp"

namespace shardc::reshard {

class RankAccumulator {
 public:
  explicit RankAccumulator(std::int64_t world) : world_(world) {}

  /// Adds `value` to every rank of `run` (all ranks < world).
  void add(const Progression& run, std::int64_t value);
  void add(const RankSet& ranks, std::int64_t value) {
    for (const auto& run : ranks.runs()) add(run, value);
  }
  /// Per-rank sums, size world.
  [[nodiscard]] std::vector<std::int64_t> finish() const;

 private:
  std::int64_t world_;
  std::map<std::int64_t, std::vector<std::int64_t>> diff_;  // by stride
};

}  // namespace shardc::reshard
