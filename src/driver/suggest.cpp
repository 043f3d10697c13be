#include "driver/suggest.hpp"

#include <algorithm>
#include <utility>

namespace shardc::driver {

std::size_t edit_distance(std::string_view a, std::string_view b, std::size_t limit) {
  const std::size_t diff = a.size() > b.size() ? a.size() - b.size() : b.size() - a.size();
  if (diff > limit) return limit + 1;
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diag = row[0];
    row[0] = i;
    std::size_t best = row[0];
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t up = row[j];
      row[j] = std::min({up + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
      best = std::min(best, row[j]);
    }
    if (best > limit) return limit + 1;
  }
  return row[b.size()];
}

std::vector<std::string> closest_names(std::string_view query,
                                       const std::vector<std::string>& names, std::size_t max) {
  std::vector<std::string> out;
  for (const auto& n : names) {
    if (out.size() >= max) return out;
    if (!query.empty() &&
        (n.find(query) != std::string::npos || query.find(n) != std::string::npos)) {
      out.push_back(n);
    }
  }
  const std::size_t limit = std::max<std::size_t>(3, query.size() / 3);
  std::vector<std::pair<std::size_t, std::size_t>> scored;  // (distance, index)
  for (std::size_t i = 0; i < names.size(); ++i) {
    const std::size_t d = edit_distance(query, names[i], limit);
    if (d <= limit) scored.emplace_back(d, i);
  }
  std::stable_sort(scored.begin(), scored.end(),
                   [](const auto& x, const auto& y) { return x.first < y.first; });
  for (const auto& [d, i] : scored) {
    if (out.size() >= max) break;
    if (std::find(out.begin(), out.end(), names[i]) == out.end()) out.push_back(names[i]);
  }
  return out;
}

}  // namespace shardc::driver
