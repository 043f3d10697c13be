#include "planner/chain_pieces.hpp"

namespace shardc::passes {

std::vector<DimSplit> rule_splits(const PlannedParam& param, std::size_t dim) {
  std::vector<DimSplit> out;
  for (const DimSplit& split : param.geometry.per_dim[dim])
    if (!split.fsdp && split.ways > 1) out.push_back(split);
  return out;
}

bool for_each_piece(const std::vector<DimSplit>& chain, std::size_t num_axes,
                    std::int64_t max_pieces,
                    const std::function<void(std::span<const std::int64_t>)>& visit) {
  std::vector<int> axes;
  std::vector<std::int64_t> sizes;
  std::int64_t total = 1;
  for (const DimSplit& split : chain)
    for (std::size_t i = 0; i < split.axes.size(); ++i) {
      axes.push_back(split.axes[i]);
      sizes.push_back(split.axis_sizes[i]);
      total *= split.axis_sizes[i];
      if (total > max_pieces) return false;
    }
  std::vector<std::int64_t> coords(num_axes, 0);
  for (std::int64_t k = 0; k < total; ++k) {
    std::int64_t rest = k;
    for (std::size_t i = axes.size(); i-- > 0;) {
      coords[static_cast<std::size_t>(axes[i])] = rest % sizes[i];
      rest /= sizes[i];
    }
    visit(coords);
  }
  return true;
}

}  // namespace shardc::passes
