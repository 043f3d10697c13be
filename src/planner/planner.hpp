// Planner: pure functions from a model and a recipe to a plan (contract §5).
// No I/O. The passes, one file each under src/planner/, and the order
// build_plan runs them in are listed in src/README.md ("Planner passes";
// tools/check-docs keeps that table in step with planner.cpp).
#pragma once

#include <optional>

#include "core/diagnostics.hpp"
#include "core/model.hpp"
#include "core/plan.hpp"
#include "core/recipe.hpp"

namespace shardc {

/// Builds the plan. Every violated check of contract §5.7 is reported to `sink`
/// (all of them, not only the first); warnings are also copied into
/// Plan::diagnostics. Returns nullopt when any error was reported.
std::optional<Plan> build_plan(const Model& model, const Recipe& recipe, DiagnosticSink& sink);

/// As above, but takes `model.params`: their names, shapes and locations
/// move into the plan instead of being copied, and `model.params` is left
/// empty. The rest of `model` (name, digest, attributes, ties) is kept.
std::optional<Plan> build_plan(Model&& model, const Recipe& recipe, DiagnosticSink& sink);

}  // namespace shardc
