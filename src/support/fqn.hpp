// The one rule for parameter names (FQNs), whatever their source: model YAML/JSON, safetensors
// headers, the checkpoint index, config.json-derived ties (no domain knowledge).
#pragma once

#include <string_view>

namespace shardc {

/// Why `name` is not a parameter FQN, or an empty view when it is one. An FQN is non-empty
/// valid UTF-8 without whitespace or control characters (so no newline, NUL or terminal
/// escape), made of non-empty `.`-separated segments; `braces` false also refuses `{` and `}`
/// (a literal name: in a model YAML they write a repeat variable such as `{i}`, so a
/// checkpoint name with them could not be written back). The texts are the model front end's
/// E-MODEL wording: "is empty", "is not valid UTF-8", "contains whitespace or a control
/// character", "has an empty segment", "contains `{` or `}`".
std::string_view fqn_problem(std::string_view name, bool braces);

}  // namespace shardc
