// The communication report as JSON: `shardc cost --format json`
// (schemas/cost.schema.json, src/comm/comm.hpp).
#include "backend/backend.hpp"
#include "backend/json_writer.hpp"
#include "backend/memory_json.hpp"
#include "comm/comm.hpp"

namespace shardc {

namespace {

void write_stats(json::Writer& writer, const ByteStats& stats) {
  writer.begin_object()
      .member("min", stats.min)
      .member("median", stats.median)
      .member("max", stats.max);
  writer.end_object();
}

}  // namespace

std::string render_cost_json(const Plan& plan, const CommReport& report) {
  using json::Writer;
  std::string out;
  Writer writer(out);
  writer.begin_object();
  backend::write_report_head(writer, plan, "shardc.cost/v1");
  const CommLayout& layout = report.layout;
  writer.line_break().key("assumptions").begin_object();
  writer.member("reshard_after_forward", layout.reshards());
  writer.member("reshard_after_forward_from", layout.reshard_after_forward_from);
  writer.member("tp_inputs", layout.tp_per_linear ? "per_linear" : "fused");
  writer.member("loss_parallel", layout.loss_parallel)
      .member("vocab_parallel", layout.vocab_parallel);
  writer.member("microbatches", layout.microbatches).member("ep", layout.ep);
  if (report.ranks_per_node > 0) {
    writer.member("ranks_per_node", report.ranks_per_node);
  } else {
    writer.member_null("ranks_per_node");
  }
  writer.end_object();
  writer.line_break().member(
      "bytes_moved",
      "bytes each rank sends per step (ring algorithm: all-gather and "
      "reduce-scatter (n-1)/n B, all-reduce 2(n-1)/n B, all-to-all (n-1)/n B, "
      "send/recv B; B = the collective's full buffer)");
  writer.line_break().key("groups").begin_array();
  for (std::size_t r = 0; r < kCommRoles; ++r) {
    const CommGroup& group = report.groups.group[r];
    if (group.size <= 1) continue;
    writer.begin_object().member("role", comm_role_name(static_cast<CommRole>(r)));
    writer.member("axes", group.axes)
        .member("size", group.size)
        .member("crosses_nodes", group.crosses_nodes);
    writer.end_object();
  }
  writer.end_array();
  writer.line_break().key("per_step").begin_object();
  for (std::size_t c = 0; c < kCollectives; ++c) {
    writer.key(collective_name(static_cast<Collective>(c)));
    write_stats(writer, report.per_collective[c]);
  }
  writer.key("total");
  write_stats(writer, report.total);
  writer.end_object();
  writer.line_break().key("by_axis").begin_array();
  for (const CommStats& role_stats : report.stats) {
    writer.line_break().begin_object().member("role", comm_role_name(role_stats.role));
    writer.member("axes", role_stats.axes)
        .member("collective", collective_name(role_stats.collective));
    writer.member("group_size", role_stats.group_size)
        .member("crosses_nodes", role_stats.crosses_nodes);
    writer.member("min", role_stats.min)
        .member("median", role_stats.median)
        .member("max", role_stats.max)
        .end_object();
  }
  writer.end_array();
  const std::int64_t first = report.peak_ranks.empty() ? 0 : report.peak_ranks.first();
  writer.line_break().key("peak").begin_object().member("bytes", report.peak);
  writer.member("ranks", report.peak_ranks.to_string()).member("rank", first);
  writer.member("stage", static_cast<std::int64_t>(plan.stage_of_rank(first)));
  writer.member("coords", rank_coords_text(plan, first)).end_object();
  writer.line_break().key("classes").begin_array();
  for (const CommClass& comm_class : report.classes) {
    writer.line_break().begin_object().member("ranks", comm_class.ranks.to_string());
    writer.member("count", comm_class.count)
        .member("stage", static_cast<std::int64_t>(comm_class.comm.stage));
    writer.member("bytes", comm_class.comm.bytes).key("terms").begin_array();
    for (const CommTerm& term : comm_class.comm.terms) {
      writer.line_break().begin_object().member("name", term.name);
      writer.member("role", comm_role_name(term.role))
          .member("collective", collective_name(term.collective));
      writer.member("calls", term.calls)
          .member("buffer_bytes", term.buffer_bytes)
          .member("bytes", term.bytes);
      writer.member("group_size", term.group_size).member("crosses_nodes", term.crosses_nodes);
      writer.member("formula", term.formula).member("source", term.source).end_object();
    }
    writer.end_array().end_object();
  }
  writer.end_array();
  writer.line_break().end_object();
  out += "\n";
  return out;
}

}  // namespace shardc
