// Levenshtein distance (src/support/edit_distance.hpp).
#include "support/edit_distance.hpp"

#include <algorithm>
#include <vector>

namespace shardc {

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

}  // namespace shardc
