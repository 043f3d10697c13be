// The communication report as JSON: `shardc cost --format json`
// (schemas/cost.schema.json, src/comm/comm.hpp).
#include "backend/backend.hpp"
#include "backend/json_writer.hpp"
#include "backend/memory_json.hpp"
#include "comm/comm.hpp"

namespace shardc {

namespace {

void write_stats(json::Writer& w, const ByteStats& s) {
  w.begin_object().member("min", s.min).member("median", s.median).member("max", s.max);
  w.end_object();
}

}  // namespace

std::string render_cost_json(const Plan& plan, const CommReport& report) {
  using json::Writer;
  std::string out;
  Writer w(out);
  w.begin_object();
  backend::write_report_head(w, plan, "shardc.cost/v1");
  const CommLayout& l = report.layout;
  w.line_break().key("assumptions").begin_object();
  w.member("reshard_after_forward", l.reshards());
  w.member("reshard_after_forward_from",
           l.reshard_after_forward ? "--reshard-after-forward" : "torchtitan default");
  w.member("tp_inputs", l.tp_per_linear ? "per_linear" : "fused");
  w.member("loss_parallel", l.loss_parallel).member("vocab_parallel", l.vocab_parallel);
  w.member("microbatches", l.microbatches).member("ep", l.ep);
  if (report.ranks_per_node > 0) {
    w.member("ranks_per_node", report.ranks_per_node);
  } else {
    w.member_null("ranks_per_node");
  }
  w.end_object();
  w.line_break().member("bytes_moved",
                        "bytes each rank sends per step (ring algorithm: all-gather and "
                        "reduce-scatter (n-1)/n B, all-reduce 2(n-1)/n B, all-to-all (n-1)/n B, "
                        "send/recv B; B = the collective's full buffer)");
  w.line_break().key("groups").begin_array();
  for (std::size_t r = 0; r < kCommRoles; ++r) {
    const CommGroup& g = report.groups.group[r];
    if (g.size <= 1) continue;
    w.begin_object().member("role", comm_role_name(static_cast<CommRole>(r)));
    w.member("axes", g.axes).member("size", g.size).member("crosses_nodes", g.crosses_nodes);
    w.end_object();
  }
  w.end_array();
  w.line_break().key("per_step").begin_object();
  for (std::size_t c = 0; c < kCollectives; ++c) {
    w.key(collective_name(static_cast<Collective>(c)));
    write_stats(w, report.per_collective[c]);
  }
  w.key("total");
  write_stats(w, report.total);
  w.end_object();
  w.line_break().key("by_axis").begin_array();
  for (const CommStats& s : report.stats) {
    w.line_break().begin_object().member("role", comm_role_name(s.role));
    w.member("axes", s.axes).member("collective", collective_name(s.collective));
    w.member("group_size", s.group_size).member("crosses_nodes", s.crosses_nodes);
    w.member("min", s.min).member("median", s.median).member("max", s.max).end_object();
  }
  w.end_array();
  const std::int64_t first = report.peak_ranks.empty() ? 0 : report.peak_ranks.first();
  w.line_break().key("peak").begin_object().member("bytes", report.peak);
  w.member("ranks", report.peak_ranks.to_string()).member("rank", first);
  w.member("stage", static_cast<std::int64_t>(plan.stage_of_rank(first)));
  w.member("coords", rank_coords_text(plan, first)).end_object();
  w.line_break().key("classes").begin_array();
  for (const CommClass& c : report.classes) {
    w.line_break().begin_object().member("ranks", c.ranks.to_string());
    w.member("count", c.count).member("stage", static_cast<std::int64_t>(c.comm.stage));
    w.member("bytes", c.comm.bytes).key("terms").begin_array();
    for (const CommTerm& t : c.comm.terms) {
      w.line_break().begin_object().member("name", t.name);
      w.member("role", comm_role_name(t.role)).member("collective", collective_name(t.collective));
      w.member("calls", t.calls).member("buffer_bytes", t.buffer_bytes).member("bytes", t.bytes);
      w.member("group_size", t.group_size).member("crosses_nodes", t.crosses_nodes);
      w.member("formula", t.formula).member("source", t.source).end_object();
    }
    w.end_array().end_object();
  }
  w.end_array();
  w.line_break().end_object();
  out += "\n";
  return out;
}

}  // namespace shardc
