#include "backend/render_util.hpp"
#include "core/shard_order.hpp"

namespace shardc::backend {

void write_diagnostic(json::Writer& w, const Diagnostic& d) {
  w.begin_object();
  w.member("code", code_name(d.code)).member("severity", severity_name(d.severity));
  w.member("message", d.message).member("hint", d.hint);
  w.member("file", d.loc.file).member("line", d.loc.line).member("column", d.loc.column);
  w.member("param", d.param).member("rule", d.rule);
  if (!d.ranges.empty()) {
    w.key("expert_ranges").begin_array();
    for (const auto& [start, stop] : d.ranges) {
      w.begin_array().value(start).value(stop).end_array();
    }
    w.end_array();
  }
  w.end_object();
}

void write_mesh_axes(json::Writer& w, const Mesh& mesh) {
  w.begin_array();
  for (const auto& axis : mesh.axes) {
    w.begin_object().member("name", axis.name).member("size", axis.size).end_object();
  }
  w.end_array();
}

std::vector<std::string> placement_labels(const PlannedParam& p) {
  std::vector<std::string> labels;
  labels.reserve(p.placements.size());
  for (const auto& pl : p.placements) labels.push_back(pl.label());
  return labels;
}

std::int64_t bytes_of(std::int64_t numel, DType t) { return numel * element_size(t); }

void write_shard_order(json::Writer& w, const PlannedParam& p, const Mesh& mesh) {
  w.key("shard_order").begin_array();
  for (std::size_t d = 0; d < p.geometry.per_dim.size(); ++d) {
    const auto& chain = p.geometry.per_dim[d];
    if (chain.empty()) continue;
    std::vector<std::int64_t> dims;
    w.begin_object().member("tensor_dim", static_cast<std::int64_t>(d));
    for (const DimSplit& s : chain)
      for (int a : s.axes) dims.push_back(a);
    w.member_ints("mesh_dims", dims);
    w.key("axes").begin_array();
    for (std::int64_t a : dims) w.value(mesh.axes[static_cast<std::size_t>(a)].name);
    w.end_array();
    w.end_object();
  }
  w.end_array();
}

void write_layout_extras(json::Writer& w, const PlannedParam& p, const Mesh& mesh) {
  if (p.uneven == SplitRule::Pad) w.member("pad_multiple", p.pad_multiple);
  if (p.unit > 1) w.member("unit", p.unit);
  bool ordered = false;
  for (std::size_t d = 0; d < p.geometry.per_dim.size(); ++d)
    ordered = ordered || out_of_mesh_order(p.geometry, d);
  if (ordered) write_shard_order(w, p, mesh);
  if (p.geometry.parts.empty() && boxed_dim(p.geometry) >= 0) {
    // _StridedShard labels that are no shard order: the pieces are the labels' runs (boxes).
    w.key("strided_boxes").begin_object().member("dim", boxed_dim(p.geometry)).end_object();
    return;
  }
  if (p.geometry.parts.empty()) return;
  w.key("packed").begin_object();
  w.member("dim", p.geometry.parts_dim);
  w.member_ints("parts", p.geometry.parts);
  if (!p.geometry.part_replicas.empty()) {
    // Parts with their own placement (names first: they say what each replica count is of).
    w.key("names").begin_array();
    for (const std::string& name : p.geometry.part_names) w.value(name);
    w.end_array();
    w.member_ints("replicas", p.geometry.part_replicas);
  }
  w.end_object();
}

void write_boxes(json::Writer& w, const PlannedParam& p, const ShardGeom& g) {
  if (boxed_dim(p.geometry) < 0) return;  // one box per piece: global_offset + local_shape
  w.key("boxes").begin_array();
  for (const ShardBox& b : g.boxes) {
    w.begin_object();
    w.member_ints("global_offset", b.global_offset);
    w.member_ints("local_offset", b.local_offset);
    w.member_ints("shape", b.shape);
    w.end_object();
  }
  w.end_array();
}

void write_model_chunks(json::Writer& w, const Plan& plan, int stage) {
  w.begin_array();
  for (std::size_t k = 0; k < plan.model_chunks.size(); ++k) {
    const ModelChunk& c = plan.model_chunks[k];
    if (stage >= 0 && c.stage != stage) continue;
    w.begin_object()
        .member("model_chunk", static_cast<std::int64_t>(k))
        .member("stage", c.stage)
        .member("virtual_stage", c.virtual_stage)
        .key("layers");
    if (c.first_block >= 0) {
      w.begin_array().value(c.first_block).value(c.end_block).end_array();
    } else {
      w.null();
    }
    w.end_object();
  }
  w.end_array();
}

}  // namespace shardc::backend
