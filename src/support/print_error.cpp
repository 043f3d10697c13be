#include "support/print_error.hpp"

#include <ostream>

namespace shardc {

void print_error(std::ostream& err, const std::string& message) {
  err << "shardc: error: " << message << "\n";
}

}  // namespace shardc
