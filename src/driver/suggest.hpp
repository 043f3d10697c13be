// "Did you mean" suggestions for unknown names (internal to src/driver).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "support/edit_distance.hpp"

namespace shardc::driver {

/// Levenshtein distance (support/edit_distance.hpp).
using shardc::edit_distance;

/// Up to `max` names close to `query`: names containing it (or contained in
/// it) first, then the smallest edit distances, ties in input order.
std::vector<std::string> closest_names(std::string_view query,
                                       const std::vector<std::string>& names, std::size_t max = 5);

}  // namespace shardc::driver
