// Small methods of the recipe value types (recipe.hpp).
#include "shardc/recipe.hpp"

namespace shardc {

const char* split_rule_name(SplitRule r) {
  switch (r) {
    case SplitRule::Chunk:
      return "chunk";
    case SplitRule::Balanced:
      return "balanced";
    case SplitRule::Even:
      return "even";
  }
  return "chunk";
}

int Mesh::find(std::string_view name) const {
  for (std::size_t i = 0; i < axes.size(); ++i) {
    if (axes[i].name == name) return static_cast<int>(i);
  }
  return -1;
}

std::string Rule::match_text() const {
  std::string out;
  for (std::size_t i = 0; i < match.size(); ++i) {
    if (i > 0) out += ", ";
    out += match[i].text();
  }
  return out;
}

}  // namespace shardc
