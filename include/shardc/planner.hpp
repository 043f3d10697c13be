// Planner: pure functions from a model and a recipe to a plan (SPEC §5).
// No I/O. Passes, one file each under src/planner/: experts (EP stacking),
// rules (rule resolution), placements (normalize + label), split (§5.1),
// geometry (nesting and offsets, §5.2), fsdp (§5.3), tied (§5.5),
// stages (§5.6), checks (heads, experts divisibility, lints), shards
// (distinct shard enumeration), rank_bytes (per-rank totals).
#pragma once

#include <optional>

#include "shardc/diagnostics.hpp"
#include "shardc/model.hpp"
#include "shardc/plan.hpp"
#include "shardc/recipe.hpp"

namespace shardc {

/// Builds the plan. Every violated check of SPEC §5.7 is reported to `sink`
/// (all of them, not only the first); warnings are also copied into
/// Plan::diagnostics. Returns nullopt when any error was reported.
std::optional<Plan> build_plan(const Model& model, const Recipe& recipe, DiagnosticSink& sink);

}  // namespace shardc
