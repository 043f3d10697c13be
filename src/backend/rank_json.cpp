// ranks/rank-<r>.json (contract §6.2): everything one rank holds, in model
// order. Cost O(params) for the rank; geometry comes from shard_at.
#include <string>

#include "backend/json_writer.hpp"
#include "backend/memory_json.hpp"
#include "backend/rank_buffers.hpp"
#include "backend/render_util.hpp"
#include "shardc/backend.hpp"

namespace shardc {
namespace {

using backend::bytes_of;
using json::Writer;

struct RankCoords {
  std::vector<std::int64_t> dense;
  std::vector<std::int64_t> expert;
  int stage = 0;
  /// Same as Plan::holds, without recomputing the rank's coordinates.
  [[nodiscard]] bool holds(const Plan& plan, const PlannedParam& p) const {
    return plan.pipeline_axis < 0 || p.stage == stage;
  }
};

struct Totals {
  std::int64_t param_bytes = 0;
  std::int64_t padded_param_bytes = 0;
  std::int64_t num_params = 0;
};

void write_coords(Writer& w, const Mesh& mesh, const std::vector<std::int64_t>& coords) {
  w.begin_object();
  for (std::size_t i = 0; i < mesh.axes.size(); ++i) w.member(mesh.axes[i].name, coords[i]);
  w.end_object();
}

void write_header(Writer& w, const Plan& plan, std::int64_t rank, const RankCoords& c) {
  w.line_break().member("format", "shardc.rank/v1");
  w.line_break().member("rank", rank).member("world_size", plan.world_size);
  w.member("stage", plan.stage_of_rank(rank));
  w.line_break().key("coords").begin_object();
  w.key("dense");
  write_coords(w, plan.dense, c.dense);
  w.key("expert");
  if (plan.expert) {
    write_coords(w, *plan.expert, c.expert);
  } else {
    w.null();
  }
  w.end_object();
}

// The tie source of `p` as this rank sees it: an alias when the rank holds
// the source too (same storage), a tied copy when the source sits on
// another pipeline stage.
void write_alias(Writer& w, const Plan& plan, const RankCoords& c, const PlannedParam& p,
                 bool& counted) {
  counted = true;
  w.key("alias_of");
  if (!p.alias_of) {
    w.null();
    return;
  }
  const PlannedParam& src = plan.params.at(*p.alias_of);
  if (c.holds(plan, src)) {
    w.value(src.name);
    counted = false;
    return;
  }
  w.null().member("tied_copy_of", src.name);
}

void write_param(Writer& w, const Plan& plan, const PlannedParam& p, const RankCoords& c,
                 Totals& totals) {
  const auto& coords = p.mesh == MeshKind::Expert ? c.expert : c.dense;
  const ShardGeom g = shard_at(p.geometry, coords);
  const std::int64_t n = numel(g.local_shape);
  const std::int64_t bytes = bytes_of(n, p.dtype);
  w.begin_object();
  w.member("name", p.name).member("dtype", dtype_name(p.dtype)).member("stage", p.stage);
  w.member_ints("global_shape", p.global_shape);
  w.member_ints("local_shape", g.local_shape).member_ints("global_offset", g.global_offset);
  w.member_ints("padded_shape", g.padded_shape);
  backend::write_boxes(w, p, g);
  w.member("numel", n).member("bytes", bytes);
  bool counted = true;
  write_alias(w, plan, c, p, counted);
  w.end_object();
  if (!counted) return;
  totals.param_bytes += bytes;
  totals.padded_param_bytes += bytes_of(numel(g.padded_shape), p.dtype);
  ++totals.num_params;
}

void write_totals(Writer& w, const Totals& t) {
  w.line_break().key("totals").begin_object();
  w.member("param_bytes", t.param_bytes).member("padded_param_bytes", t.padded_param_bytes);
  w.member("num_params", t.num_params);
  w.end_object();
}

}  // namespace

std::string render_rank_json(const Plan& plan, std::int64_t rank) {
  std::vector<PlannedBuffer> buffers = plan_buffers(plan);
  const MemoryReport m = compute_memory(plan, buffer_rank_bytes(plan, buffers));
  return render_rank_json(plan, buffers, rank, m.ranks.at(static_cast<std::size_t>(rank)));
}

std::string render_rank_json(const Plan& plan, const std::vector<PlannedBuffer>& buffers,
                             std::int64_t rank, const RankMemory& memory) {
  RankCoords c;
  c.dense = mesh_coords(plan.dense, rank);
  if (plan.expert) c.expert = mesh_coords(*plan.expert, rank);
  c.stage = plan.stage_of_rank(rank);
  std::string out;
  out.reserve(1024 + plan.params.size() * 256);
  Writer w(out);
  w.begin_object();
  write_header(w, plan, rank, c);
  Totals totals;
  std::vector<std::int64_t> index(plan.params.size(), -1);
  std::int64_t held = 0;
  w.line_break().key("params").begin_array();
  for (std::size_t i = 0; i < plan.params.size(); ++i) {
    if (!c.holds(plan, plan.params[i])) continue;
    w.line_break();
    write_param(w, plan, plan.params[i], c, totals);
    index[i] = held++;
  }
  if (held > 0) w.line_break();
  w.end_array();
  w.line_break().key("buffers");
  backend::write_rank_buffers(w, plan, buffers, rank, backend::FileIndex(std::move(index)));
  write_totals(w, totals);
  w.line_break().key("memory");
  backend::write_rank_memory(w, memory);
  w.line_break().end_object();
  out += '\n';
  return out;
}

std::string rank_file_name(std::int64_t rank, std::int64_t world_size) {
  const std::string last = std::to_string(world_size > 1 ? world_size - 1 : 0);
  std::string digits = std::to_string(rank);
  if (digits.size() < last.size()) digits.insert(0, last.size() - digits.size(), '0');
  return "rank-" + digits + ".json";
}

}  // namespace shardc
