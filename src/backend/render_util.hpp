// Helpers shared by the back end's renderers (internal to src/backend).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "backend/json_writer.hpp"
#include "shardc/diagnostics.hpp"
#include "shardc/plan.hpp"

namespace shardc::backend {

/// One diagnostic as a JSON object: code, severity, message, hint, file,
/// line, column, param, rule, and `expert_ranges` when it carries ranges.
void write_diagnostic(json::Writer& w, const Diagnostic& d);

/// Writes `{"name":..., "size":...}` for every axis of `mesh`.
void write_mesh_axes(json::Writer& w, const Mesh& mesh);

/// Placement labels of a param, one per axis of its mesh.
std::vector<std::string> placement_labels(const PlannedParam& p);

/// Bytes of `numel` elements of `t`.
std::int64_t bytes_of(std::int64_t numel, DType t);

}  // namespace shardc::backend
