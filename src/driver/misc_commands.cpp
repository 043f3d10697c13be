// `shardc schema` and the version string.
#include <ostream>

#include "driver/embedded_schemas.hpp"
#include "driver/session.hpp"

namespace shardc {

const char* version() { return SHARDC_VERSION; }

ExitCode run_schema(const std::string& name, std::ostream& out, std::ostream& err) {
  std::vector<std::string> names;
  for (const auto& schema : driver::embedded_schemas()) {
    if (schema.name == name) {
      out << schema.text;
      if (!schema.text.empty() && schema.text.back() != '\n') out << "\n";
      return ExitCode::Ok;
    }
    names.emplace_back(schema.name);
  }
  std::string valid;
  for (const auto& known : names) valid += (valid.empty() ? "" : ", ") + known;
  driver::print_error(err, "unknown schema '" + name + "'; valid names: " +
                               (valid.empty() ? "(none embedded in this build)" : valid));
  return ExitCode::Usage;
}

}  // namespace shardc
