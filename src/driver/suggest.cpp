#include "driver/suggest.hpp"

#include <algorithm>
#include <utility>

namespace shardc::driver {

std::vector<std::string> closest_names(std::string_view query,
                                       const std::vector<std::string>& names, std::size_t max) {
  std::vector<std::string> out;
  for (const auto& name : names) {
    if (out.size() >= max) return out;
    if (!query.empty() &&
        (name.find(query) != std::string::npos || query.find(name) != std::string::npos)) {
      out.push_back(name);
    }
  }
  const std::size_t limit = std::max<std::size_t>(3, query.size() / 3);
  std::vector<std::pair<std::size_t, std::size_t>> scored;  // (distance, index)
  for (std::size_t i = 0; i < names.size(); ++i) {
    const std::size_t distance = edit_distance(query, names[i], limit);
    if (distance <= limit) scored.emplace_back(distance, i);
  }
  std::stable_sort(scored.begin(), scored.end(),
                   [](const auto& left, const auto& right) { return left.first < right.first; });
  for (const auto& [distance, i] : scored) {
    if (out.size() >= max) break;
    if (std::find(out.begin(), out.end(), names[i]) == out.end()) out.push_back(names[i]);
  }
  return out;
}

}  // namespace shardc::driver
