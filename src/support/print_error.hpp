// The one spelling of an I/O or usage error line (no domain knowledge).
#pragma once

#include <iosfwd>
#include <string>

namespace shardc {

/// Prints "shardc: error: <message>" (I/O and usage problems that are not
/// input diagnostics).
void print_error(std::ostream& err, const std::string& message);

}  // namespace shardc
