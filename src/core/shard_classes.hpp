// Shard classes of one param (internal to the planner; see shards.cpp).
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "core/plan.hpp"

namespace shardc {

/// The axes of a param's mesh split into varying (they split some dim),
/// the pipeline axis (fixed at the param's stage) and free (replicas).
struct ClassSpace {
  std::vector<std::int64_t> sizes;    ///< per mesh axis
  std::vector<std::int64_t> strides;  ///< row-major rank stride per axis
  std::vector<bool> varying;          ///< axis appears in some DimSplit
  int pipeline_axis = -1;
  std::int64_t num_classes = 1;  ///< product of the varying axes' sizes
};

ClassSpace class_space(const Plan& plan, const PlannedParam& param);

/// The ranks of the class at `coords` (values on varying axes are used,
/// others ignored) for a param on `stage`. Cost O(number of progressions).
RankSet class_ranks(const ClassSpace& cs, std::span<const std::int64_t> coords, int stage);

/// Calls `fn` with full mesh coordinates (free axes 0) for every class, in
/// row-major order over the varying axes (ascending lowest rank).
void for_each_class(const ClassSpace& cs,
                    const std::function<void(std::span<const std::int64_t>)>& fn);

}  // namespace shardc
