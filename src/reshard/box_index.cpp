// Grid index over a param's shard-class boxes (see box_index.hpp).
#include "reshard/box_index.hpp"

#include <algorithm>

namespace shardc::reshard {

BoxIndex::BoxIndex(std::vector<Box> boxes) : boxes_(std::move(boxes)) {
  std::size_t ndim = 0;
  bool any = false;
  for (const Box& box : boxes_) {
    if (numel(box) == 0) continue;
    if (!any) ndim = box.offset.size(), any = true;
    if (box.offset.size() != ndim) grid_ = false;
  }
  if (!any || !grid_) return;
  dims_.assign(ndim, {});
  std::size_t nonempty = 0;
  for (std::size_t i = 0; i < boxes_.size(); ++i) {
    const Box& box = boxes_[i];
    if (numel(box) == 0) continue;
    ++nonempty;
    for (std::size_t d = 0; d < ndim; ++d)
      dims_[d].push_back({box.offset[d], box.offset[d] + box.shape[d]});
    if (!by_offset_.emplace(box.offset, i).second) grid_ = false;  // two boxes, one offset
  }
  std::size_t cells = 1;
  for (auto& iv : dims_) {
    std::sort(iv.begin(), iv.end(), [](const Interval& left, const Interval& right) {
      return left.start != right.start ? left.start < right.start : left.end < right.end;
    });
    iv.erase(std::unique(iv.begin(), iv.end(),
                         [](const Interval& left, const Interval& right) {
                           return left.start == right.start && left.end == right.end;
                         }),
             iv.end());
    for (std::size_t k = 1; k < iv.size(); ++k)
      if (iv[k].start < iv[k - 1].end) grid_ = false;  // overlapping or same start, other end
    cells = std::min<std::size_t>(cells * iv.size(), std::size_t{1} << 62);
  }
  // Every box is one cell; a grid has a box in every cell.
  if (cells != nonempty) grid_ = false;
}

void BoxIndex::for_each_meeting_brute(
    const Box& box, const std::function<void(std::size_t, const Box&)>& fn) const {
  for (std::size_t i = 0; i < boxes_.size(); ++i)
    if (auto met = intersect(boxes_[i], box)) fn(i, *met);
}

void BoxIndex::for_each_meeting(const Box& box,
                                const std::function<void(std::size_t, const Box&)>& fn) const {
  if (!grid_) return for_each_meeting_brute(box, fn);
  if (box.offset.size() != dims_.size()) return;
  const std::size_t ndim = dims_.size();
  std::vector<std::size_t> lo(ndim), hi(ndim);
  for (std::size_t d = 0; d < ndim; ++d) {
    const auto& iv = dims_[d];
    const std::int64_t b0 = box.offset[d], b1 = box.offset[d] + box.shape[d];
    if (b1 <= b0) return;
    lo[d] = static_cast<std::size_t>(
        std::partition_point(iv.begin(), iv.end(),
                             [&](const Interval& interval) { return interval.end <= b0; }) -
        iv.begin());
    hi[d] = static_cast<std::size_t>(
        std::partition_point(iv.begin(), iv.end(),
                             [&](const Interval& interval) { return interval.start < b1; }) -
        iv.begin());
    if (lo[d] >= hi[d]) return;
  }
  std::vector<std::size_t> at = lo;
  Shape offset(ndim);
  while (true) {
    for (std::size_t d = 0; d < ndim; ++d) offset[d] = dims_[d][at[d]].start;
    const auto it = by_offset_.find(offset);
    if (it != by_offset_.end())
      if (auto met = intersect(boxes_[it->second], box)) fn(it->second, *met);
    std::size_t d = ndim;
    while (d > 0) {
      --d;
      if (++at[d] < hi[d]) break;
      at[d] = lo[d];
      if (d == 0) return;
    }
    if (ndim == 0) return;
  }
}

}  // namespace shardc::reshard
