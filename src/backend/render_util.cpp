#include "backend/render_util.hpp"
#include "core/shard_order.hpp"

namespace shardc::backend {

void write_diagnostic(json::Writer& writer, const Diagnostic& diag) {
  writer.begin_object();
  writer.member("code", code_name(diag.code)).member("severity", severity_name(diag.severity));
  writer.member("message", diag.message).member("hint", diag.hint);
  writer.member("file", diag.loc.file)
      .member("line", diag.loc.line)
      .member("column", diag.loc.column);
  writer.member("param", diag.param).member("rule", diag.rule);
  if (!diag.ranges.empty()) {
    writer.key("expert_ranges").begin_array();
    for (const auto& [start, stop] : diag.ranges) {
      writer.begin_array().value(start).value(stop).end_array();
    }
    writer.end_array();
  }
  writer.end_object();
}

void write_mesh_axes(json::Writer& writer, const Mesh& mesh) {
  writer.begin_array();
  for (const auto& axis : mesh.axes) {
    writer.begin_object().member("name", axis.name).member("size", axis.size).end_object();
  }
  writer.end_array();
}

std::vector<std::string> placement_labels(const PlannedParam& param) {
  std::vector<std::string> labels;
  labels.reserve(param.placements.size());
  for (const auto& pl : param.placements) labels.push_back(pl.label());
  return labels;
}

std::int64_t bytes_of(std::int64_t numel, DType dtype) { return numel * element_size(dtype); }

void write_shard_order(json::Writer& writer, const PlannedParam& param, const Mesh& mesh) {
  writer.key("shard_order").begin_array();
  for (std::size_t d = 0; d < param.geometry.per_dim.size(); ++d) {
    const auto& chain = param.geometry.per_dim[d];
    if (chain.empty()) continue;
    std::vector<std::int64_t> dims;
    writer.begin_object().member("tensor_dim", static_cast<std::int64_t>(d));
    for (const DimSplit& split : chain)
      for (int axis : split.axes) dims.push_back(axis);
    writer.member_ints("mesh_dims", dims);
    writer.key("axes").begin_array();
    for (std::int64_t axis : dims) writer.value(mesh.axes[static_cast<std::size_t>(axis)].name);
    writer.end_array();
    writer.end_object();
  }
  writer.end_array();
}

void write_layout_extras(json::Writer& writer, const PlannedParam& param, const Mesh& mesh) {
  if (param.uneven == SplitRule::Pad) writer.member("pad_multiple", param.pad_multiple);
  if (param.unit > 1) writer.member("unit", param.unit);
  bool ordered = false;
  for (std::size_t d = 0; d < param.geometry.per_dim.size(); ++d)
    ordered = ordered || out_of_mesh_order(param.geometry, d);
  if (ordered) write_shard_order(writer, param, mesh);
  if (param.geometry.parts.empty() && boxed_dim(param.geometry) >= 0) {
    // _StridedShard labels that are no shard order: the pieces are the labels' runs (boxes).
    writer.key("strided_boxes")
        .begin_object()
        .member("dim", boxed_dim(param.geometry))
        .end_object();
    return;
  }
  if (param.geometry.parts.empty()) return;
  writer.key("packed").begin_object();
  writer.member("dim", param.geometry.parts_dim);
  writer.member_ints("parts", param.geometry.parts);
  if (!param.geometry.part_replicas.empty()) {
    // Parts with their own placement (names first: they say what each replica count is of).
    writer.key("names").begin_array();
    for (const std::string& name : param.geometry.part_names) writer.value(name);
    writer.end_array();
    writer.member_ints("replicas", param.geometry.part_replicas);
  }
  writer.end_object();
}

void write_boxes(json::Writer& writer, const PlannedParam& param, const ShardGeom& geom) {
  if (boxed_dim(param.geometry) < 0) return;  // one box per piece: global_offset + local_shape
  writer.key("boxes").begin_array();
  for (const ShardBox& box : geom.boxes) {
    writer.begin_object();
    writer.member_ints("global_offset", box.global_offset);
    writer.member_ints("local_offset", box.local_offset);
    writer.member_ints("shape", box.shape);
    writer.end_object();
  }
  writer.end_array();
}

void write_model_chunks(json::Writer& writer, const Plan& plan, int stage) {
  writer.begin_array();
  for (std::size_t k = 0; k < plan.model_chunks.size(); ++k) {
    const ModelChunk& chunk = plan.model_chunks[k];
    if (stage >= 0 && chunk.stage != stage) continue;
    writer.begin_object()
        .member("model_chunk", static_cast<std::int64_t>(k))
        .member("stage", chunk.stage)
        .member("virtual_stage", chunk.virtual_stage)
        .key("layers");
    if (chunk.first_block >= 0) {
      writer.begin_array().value(chunk.first_block).value(chunk.end_block).end_array();
    } else {
      writer.null();
    }
    writer.end_object();
  }
  writer.end_array();
}

}  // namespace shardc::backend
