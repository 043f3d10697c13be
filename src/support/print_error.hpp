// The one spelling of an I/O or usage error line (no domain knowledge: the
// code is the caller's, core/diagnostics.hpp `print_coded_error` names it).
#pragma once

#include <iosfwd>
#include <string>
#include <string_view>

namespace shardc {

/// Prints "shardc: error[<code>]: <message>", the first line of a text
/// diagnostic without a location (I/O and usage problems that are not
/// input diagnostics: no source excerpt, no summary line).
void print_error(std::ostream& err, std::string_view code, const std::string& message);

}  // namespace shardc
