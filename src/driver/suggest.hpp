// "Did you mean" suggestions for unknown names (internal to src/driver).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace shardc::driver {

/// Levenshtein distance, giving up (returning > limit) once it exceeds `limit`.
std::size_t edit_distance(std::string_view source, std::string_view target, std::size_t limit);

/// Up to `max` names close to `query`: names containing it (or contained in
/// it) first, then the smallest edit distances, ties in input order.
std::vector<std::string> closest_names(std::string_view query,
                                       const std::vector<std::string>& names, std::size_t max = 5);

}  // namespace shardc::driver
