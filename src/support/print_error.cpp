#include "support/print_error.hpp"

#include <ostream>

namespace shardc {

void print_error(std::ostream& err, std::string_view code, const std::string& message) {
  err << "shardc: error[" << code << "]: " << message << "\n";
}

}  // namespace shardc
