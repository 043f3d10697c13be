// UTF-8 validation (no domain knowledge).
#pragma once

#include <string>
#include <string_view>

namespace shardc {

/// True when `text` is well-formed UTF-8 (no overlongs, no surrogates, <= U+10FFFF).
bool is_valid_utf8(std::string_view text);

/// `text` with malformed UTF-8 bytes and control characters written as
/// `\xNN`, so messages built from hostile input stay printable and valid
/// in JSON output.
std::string printable(std::string_view text);

}  // namespace shardc
