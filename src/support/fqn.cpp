// fqn_problem: the parameter-name rule of every reader (src/support/fqn.hpp).
#include "support/fqn.hpp"

#include <algorithm>

#include "support/utf8.hpp"

namespace shardc {

std::string_view fqn_problem(std::string_view name, bool braces) {
  if (name.empty()) return "is empty";
  if (!is_valid_utf8(name)) return "is not valid UTF-8";
  if (std::any_of(name.begin(), name.end(), [](char ch) {
        const auto code = static_cast<unsigned char>(ch);
        return code <= 0x20 || code == 0x7F;
      }))
    return "contains whitespace or a control character";
  if (name.front() == '.' || name.back() == '.' || name.find("..") != std::string_view::npos)
    return "has an empty segment";
  if (!braces && name.find_first_of("{}") != std::string_view::npos) return "contains `{` or `}`";
  return {};
}

}  // namespace shardc
