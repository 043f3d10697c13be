// JSON Schemas compiled into the binary (internal to src/driver). The
// table is generated at build time from schemas/*.schema.json by
// cmake/embed_schemas.cmake.
#pragma once

#include <span>
#include <string_view>

namespace shardc::driver {

struct EmbeddedSchema {
  std::string_view name;  ///< file name without ".schema.json", e.g. "plan"
  std::string_view text;
};

/// Every embedded schema, sorted by name.
std::span<const EmbeddedSchema> embedded_schemas();

}  // namespace shardc::driver
