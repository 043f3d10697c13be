// The two plans of `shardc reshard` (and `shardc report --reshard`) read or planned
// (internal to src/driver; defined in reshard_command.cpp).
#pragma once

#include <cstddef>
#include <iosfwd>
#include <optional>
#include <string>

#include "driver/session.hpp"
#include "reshard/reshard.hpp"
#include "shardc/driver.hpp"

namespace shardc::driver {

/// Reads an OUTDIR's plan.json (a complete compile: manifest.json, plan.json unchanged) or a
/// plan.json file into a layout; its text goes to `rs.sources`, layout errors to `rs.sink`.
/// nullopt after printing a usage error to `err`.
std::optional<reshard::Layout> load_plan_input(const std::string& input, FileSystem& fs,
                                               Session& rs, std::ostream& err);

/// Plans MODEL RECIPE (`opt.inputs[at]`, `[at + 1]`) in memory; prints its diagnostics when
/// it fails (`code` then says how).
std::optional<reshard::Layout> load_pair(const ReshardOptions& opt, std::size_t at, FileSystem& fs,
                                         Session& rs, std::ostream& out, std::ostream& err,
                                         ExitCode& code);

}  // namespace shardc::driver
