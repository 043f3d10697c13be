// assertion_failed: the out-of-line half of SHARDC_ASSERT (src/support/assert.hpp).
#include "support/assert.hpp"

#include <string>

namespace shardc {

void assertion_failed(const char* file, int line, const char* condition,
                      const std::string& message) {
  std::string what = std::string(file) + ":" + std::to_string(line) + ": " + condition;
  if (!message.empty()) what += ": " + message;
  throw InternalError(what);
}

}  // namespace shardc
