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

/// Both plans of a reshard and the transfers between them; `code` is Ok when all three are set.
struct PlannedReshard {
  ExitCode code = ExitCode::Ok;
  std::optional<reshard::Layout> from;
  std::optional<reshard::Layout> to;
  std::optional<reshard::Result> result;
};

/// Loads `opt.inputs` (PLAN_A PLAN_B, or MODEL_A RECIPE_A MODEL_B RECIPE_B planned in memory)
/// and plans the transfers (`opt.ranks_per_node`). A wrong input count is a usage error naming
/// `command`; diagnostics are printed (to `err` as text, else to `out`) and say the exit code.
PlannedReshard plan_reshard_inputs(const ReshardOptions& opt, const std::string& command,
                                   FileSystem& fs, Session& session, std::ostream& out,
                                   std::ostream& err);

}  // namespace shardc::driver
