// Finds the boxes of A's shard classes (their parts) that meet a B box
// (internal to src/reshard). A plan's non-empty class boxes of one param
// form a grid:
// each mesh axis splits at most one dim, so per dim the distinct intervals
// partition the extent and every combination is a class. The index keeps
// per dim the sorted distinct intervals and a map from offset tuple to
// class; a query walks only the intervals that overlap. When the boxes are
// not a grid (not produced by shardc, but cheap to support) every class is
// tested.
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <vector>

#include "reshard/reshard.hpp"

namespace shardc::reshard {

class BoxIndex {
 public:
  /// Indexes `boxes` (copied; empty ones are never found).
  explicit BoxIndex(std::vector<Box> boxes);

  /// Calls `fn(box index, intersection)` for every box meeting `box`, in
  /// index order for the brute-force path and in row-major offset order for
  /// the grid path.
  void for_each_meeting(const Box& box,
                        const std::function<void(std::size_t, const Box&)>& fn) const;
  /// Same, testing every box (the fallback; also used to cross-check).
  void for_each_meeting_brute(const Box& box,
                              const std::function<void(std::size_t, const Box&)>& fn) const;
  [[nodiscard]] bool is_grid() const { return grid_; }

 private:
  struct Interval {
    std::int64_t start = 0;
    std::int64_t end = 0;
  };
  std::vector<Box> boxes_;
  std::vector<std::vector<Interval>> dims_;  // per dim, sorted, disjoint
  std::map<Shape, std::size_t> by_offset_;
  bool grid_ = true;
};

}  // namespace shardc::reshard
