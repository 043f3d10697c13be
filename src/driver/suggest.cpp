#include "driver/suggest.hpp"

#include <algorithm>
#include <utility>

namespace shardc::driver {

std::size_t edit_distance(std::string_view source, std::string_view target, std::size_t limit) {
  const std::size_t diff =
      source.size() > target.size() ? source.size() - target.size() : target.size() - source.size();
  if (diff > limit) return limit + 1;
  std::vector<std::size_t> row(target.size() + 1);
  for (std::size_t j = 0; j <= target.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= source.size(); ++i) {
    std::size_t diag = row[0];
    row[0] = i;
    std::size_t best = row[0];
    for (std::size_t j = 1; j <= target.size(); ++j) {
      const std::size_t up = row[j];
      row[j] = std::min({up + 1, row[j - 1] + 1, diag + (source[i - 1] == target[j - 1] ? 0 : 1)});
      diag = up;
      best = std::min(best, row[j]);
    }
    if (best > limit) return limit + 1;
  }
  return row[target.size()];
}

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
