// Helpers shared by the back end's renderers (internal to src/backend).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "backend/json_writer.hpp"
#include "core/diagnostics.hpp"
#include "core/plan.hpp"

namespace shardc::backend {

/// One diagnostic as a JSON object: code, severity, message, hint, file,
/// line, column, param, rule, and `expert_ranges` when it carries ranges.
void write_diagnostic(json::Writer& writer, const Diagnostic& diag);

/// Writes `{"name":..., "size":...}` for every axis of `mesh`.
void write_mesh_axes(json::Writer& writer, const Mesh& mesh);

/// Placement labels of a param, one per axis of its mesh.
std::vector<std::string> placement_labels(const PlannedParam& param);

/// The layout extras of a param, only when present (so unpadded, unpacked
/// params keep their bytes): `pad_multiple` (uneven pad), `unit` (> 1),
/// `packed: {dim, parts}`.
void write_layout_extras(json::Writer& writer, const PlannedParam& param, const Mesh& mesh);
/// `shard_order` (only for a param whose rule's shard_order left mesh order,
/// docs/shard-order.md): DTensorSpec.shard_order, one entry per split tensor
/// dim in dim order, `mesh_dims` (indices into `mesh`) and `axes` (their
/// names) in execution order, FSDP's split last.
void write_shard_order(json::Writer& writer, const PlannedParam& param, const Mesh& mesh);

/// `"boxes": [{global_offset, local_offset, shape}, ...]` of a packed
/// param's piece; nothing for unpacked params.
void write_boxes(json::Writer& writer, const PlannedParam& param, const ShardGeom& geom);

/// The model chunks of a pipeline with virtual stages (plan.model_chunks):
/// `[{"model_chunk": k, "stage": s, "virtual_stage": v, "layers": [first,
/// end] | null}, ...]`, all of them (stage < 0) or those of one stage, in
/// virtual-stage order (the order the interleaved schedule runs them).
void write_model_chunks(json::Writer& writer, const Plan& plan, int stage);

/// Bytes of `numel` elements of `dtype`.
std::int64_t bytes_of(std::int64_t numel, DType dtype);

}  // namespace shardc::backend
