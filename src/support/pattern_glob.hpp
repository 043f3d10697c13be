// Single-segment glob matching (`*`, `?`, `[abc]`, `[a-z]`, `[!a]`).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace shardc {

/// `glob` is a validated segment glob (see Pattern::compile). `*` never
/// crosses a dot because `text` is one segment.
bool glob_match(std::string_view glob, std::string_view text);

/// `glob[open]` is '['. Sets `end` to the index after the closing ']'.
/// false and `error` set when the class is unclosed or has an inverted range.
bool glob_class_end(std::string_view glob, std::size_t open, std::size_t& end, std::string& error);

}  // namespace shardc
