// The page of a reshard (src/report/report.hpp): the planner's totals, per-rank
// statistics and a heatmap of bytes moved between source and destination rank groups.
#include <algorithm>
#include <cmath>

#include "report/html.hpp"
#include "report/report.hpp"

namespace shardc {
namespace {

using report::escape;

// Ranks per heatmap group on a side of `world` ranks: nodes when they fit, else an even cut.
std::int64_t group_size(std::int64_t world, const reshard::Options& opt) {
  if (opt.ranks_per_node &&
      (world + *opt.ranks_per_node - 1) / *opt.ranks_per_node <= kMaxHeatmapGroups)
    return *opt.ranks_per_node;
  return std::max<std::int64_t>(1, (world + kMaxHeatmapGroups - 1) / kMaxHeatmapGroups);
}

std::string stats_row(const char* what, std::vector<std::int64_t> v) {
  std::sort(v.begin(), v.end());
  if (v.empty()) return {};
  const std::array<std::pair<const char*, std::int64_t>, 3> vs = {
      {{"min", v.front()}, {"median", v[(v.size() - 1) / 2]}, {"max", v.back()}}};
  std::string h = "<tr><th scope=\"row\">" + std::string(what) + "</th>";
  for (const auto& [stat, x] : vs) {
    h += "<td class=\"num\" data-kind=\"" + std::string(what) + "\" data-stat=\"" + stat +
         "\" data-bytes=\"" + std::to_string(x) + "\">" + binary_bytes_text(x) + "</td>";
  }
  return h + "</tr>\n";
}

// White to dark blue; text on a cell is drawn black on light cells and white on dark ones.
std::string heat_colour(double t) {
  const int r = static_cast<int>(std::lround(255 - t * (255 - 8)));
  const int g = static_cast<int>(std::lround(255 - t * (255 - 48)));
  const int b = static_cast<int>(std::lround(255 - t * (255 - 107)));
  return "rgb(" + std::to_string(r) + "," + std::to_string(g) + "," + std::to_string(b) + ")";
}

}  // namespace

std::string render_reshard_report_html(const ReshardReportInput& in) {
  const reshard::Layout& a = *in.a;
  const reshard::Layout& b = *in.b;
  const reshard::Result& r = *in.result;
  const reshard::Totals& t = r.totals;
  std::string h = report::page_head("shardc report: reshard " + a.label + " -> " + b.label);
  h += "<h1>shardc report: reshard</h1>\n<table aria-label=\"reshard summary\">\n";
  auto row = [&h](const std::string& key, const std::string& value, const std::string& id) {
    h += "<tr><th scope=\"row\">" + key + "</th><td id=\"" + id + "\">" + value + "</td></tr>\n";
  };
  row("from (A)", escape(a.label) + ", " + std::to_string(a.world_size) + " ranks", "plan-a");
  row("to (B)", escape(b.label) + ", " + std::to_string(b.world_size) + " ranks", "plan-b");
  if (in.options.ranks_per_node)
    row("ranks per node", std::to_string(*in.options.ranks_per_node), "ranks-per-node");
  row("params",
      std::to_string(t.params) + " transferred, " + std::to_string(t.shared_aliases) +
          " tied aliases sharing storage; " + std::to_string(t.pieces) + " pieces",
      "params");
  h += "<tr><th scope=\"row\">destination bytes</th><td id=\"dest-bytes\" data-bytes=\"" +
       std::to_string(t.dest_bytes) + "\">" + binary_bytes_text(t.dest_bytes) + "</td></tr>\n";
  h += "<tr><th scope=\"row\">moved bytes</th><td id=\"moved-bytes\" data-bytes=\"" +
       std::to_string(t.moved_bytes) + "\">" + binary_bytes_text(t.moved_bytes) + "</td></tr>\n";
  h += "<tr><th scope=\"row\">already in place</th><td id=\"in-place-bytes\" data-bytes=\"" +
       std::to_string(t.in_place_bytes) + "\">" + binary_bytes_text(t.in_place_bytes) +
       "</td></tr>\n";
  h += "</table>\n<table id=\"reshard-stats\"><caption>Per destination rank</caption><thead><tr>"
       "<th scope=\"col\">bytes</th><th scope=\"col\" class=\"num\">min</th><th scope=\"col\" "
       "class=\"num\">median</th><th scope=\"col\" class=\"num\">max</th></tr></thead><tbody>\n" +
       stats_row("destination", r.dest_bytes) + stats_row("moved", r.moved_bytes) +
       stats_row("in place", r.in_place_bytes) + "</tbody></table>\n";

  // The heatmap: bytes each destination group reads from each source group (moved reads only).
  const std::int64_t src_group = group_size(a.world_size, in.options);
  const std::int64_t dst_group = group_size(b.world_size, in.options);
  const std::int64_t src_n = (a.world_size + src_group - 1) / src_group;
  const std::int64_t dst_n = (b.world_size + dst_group - 1) / dst_group;
  std::vector<std::int64_t> cells(static_cast<std::size_t>(src_n * dst_n), 0);
  std::vector<std::int64_t> all(static_cast<std::size_t>(b.world_size));
  for (std::int64_t i = 0; i < b.world_size; ++i) all[static_cast<std::size_t>(i)] = i;
  reshard::for_each_rank_reads(
      a, b, r, all, in.options,
      [&](std::int64_t dst, const std::vector<reshard::RankParamReads>& reads) {
        for (const reshard::RankParamReads& pr : reads) {
          for (const reshard::Read& rd : pr.reads) {
            if (rd.src == dst) continue;
            cells[static_cast<std::size_t>((dst / dst_group) * src_n + rd.src / src_group)] +=
                rd.bytes;
          }
        }
      });
  const std::int64_t top = std::max<std::int64_t>(1, *std::max_element(cells.begin(), cells.end()));
  const int cell = 22, left = 120, head = 60;
  const int width = left + static_cast<int>(src_n) * cell + 10;
  const int height = head + static_cast<int>(dst_n) * cell + 10;
  auto group_text = [](std::int64_t g, std::int64_t size, std::int64_t world) {
    const std::int64_t first = g * size, last = std::min(world, first + size) - 1;
    return first == last ? std::to_string(first)
                         : std::to_string(first) + "-" + std::to_string(last);
  };
  h += "<section id=\"heatmap\" aria-labelledby=\"heatmap-h\">\n<h2 id=\"heatmap-h\">Bytes moved "
       "between rank groups</h2>\n<p>Rows: destination (B) rank groups of " +
       std::to_string(dst_group) + " ranks; columns: source (A) rank groups of " +
       std::to_string(src_group) +
       " ranks. A cell is the bytes the row's ranks read from the column's ranks (in-place "
       "reads excluded); darker is more, on a linear scale up to " +
       binary_bytes_text(top) +
       ".</p>\n<div class=\"scroll\" tabindex=\"0\" role=\"region\" "
       "aria-label=\"reshard heatmap\"><svg id=\"heatmap-svg\" role=\"img\" aria-label=\"heatmap "
       "of bytes moved from " +
       std::to_string(src_n) + " source groups to " + std::to_string(dst_n) +
       " destination groups\" width=\"" + std::to_string(width) + "\" height=\"" +
       std::to_string(height) + "\">\n";
  for (std::int64_t s = 0; s < src_n; ++s) {
    const int x = left + static_cast<int>(s) * cell + cell / 2;
    h += "<text transform=\"translate(" + std::to_string(x + 4) + "," + std::to_string(head - 4) +
         ") rotate(-60)\">" + group_text(s, src_group, a.world_size) + "</text>\n";
  }
  for (std::int64_t d = 0; d < dst_n; ++d) {
    const int y = head + static_cast<int>(d) * cell;
    h += "<text x=\"4\" y=\"" + std::to_string(y + cell / 2 + 4) + "\">" +
         group_text(d, dst_group, b.world_size) + "</text>\n";
    for (std::int64_t s = 0; s < src_n; ++s) {
      const std::int64_t v = cells[static_cast<std::size_t>(d * src_n + s)];
      h += "<rect class=\"heat\" x=\"" + std::to_string(left + static_cast<int>(s) * cell) +
           "\" y=\"" + std::to_string(y) + "\" width=\"" + std::to_string(cell - 1) +
           "\" height=\"" + std::to_string(cell - 1) + "\" fill=\"" +
           heat_colour(static_cast<double>(v) / static_cast<double>(top)) + "\" data-dst=\"" +
           std::to_string(d) + "\" data-src=\"" + std::to_string(s) + "\" data-bytes=\"" +
           std::to_string(v) + "\"><title>B ranks " + group_text(d, dst_group, b.world_size) +
           " read " + binary_bytes_text(v) + " from A ranks " +
           group_text(s, src_group, a.world_size) + "</title></rect>\n";
    }
  }
  h += "</svg></div>\n</section>\n<script type=\"application/json\" id=\"report-data\">"
       "{\"world\":0}</script>\n";
  h += report::page_tail();
  return h;
}

}  // namespace shardc
