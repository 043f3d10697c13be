// Readable messages for YAML syntax errors whose yaml-cpp wording is
// generic ("end of map not found", "illegal block entry"): a tab in the
// indentation, or a key indented less than the block above it (a dedent
// slip that detached it from its parent). Internal to src/frontend.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace shardc::fe {

struct YamlErrorHelp {
  int line = 0;    ///< 1-based
  int column = 0;  ///< 1-based
  std::string message;
  std::string hint;
};

/// Explains the yaml-cpp error `what` reported at 0-based (`line`, `column`)
/// of `text`; nullopt when no better explanation is found (the caller keeps
/// yaml-cpp's message). A tab in the indentation of a line up to the error
/// line wins ("a tab ..."); else a key on the error line indented less than
/// the previous line's keys is named with the parent it lost.
std::optional<YamlErrorHelp> explain_yaml_error(std::string_view text, int line, int column,
                                                std::string_view what);

}  // namespace shardc::fe
