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

std::string stats_row(const char* what, std::vector<std::int64_t> per_rank) {
  std::sort(per_rank.begin(), per_rank.end());
  if (per_rank.empty()) return {};
  const std::array<std::pair<const char*, std::int64_t>, 3> vs = {
      {{"min", per_rank.front()},
       {"median", per_rank[(per_rank.size() - 1) / 2]},
       {"max", per_rank.back()}}};
  std::string html = "<tr><th scope=\"row\">" + std::string(what) + "</th>";
  for (const auto& [stat, value] : vs) {
    html += "<td class=\"num\" data-kind=\"" + std::string(what) + "\" data-stat=\"" + stat +
            "\" data-bytes=\"" + std::to_string(value) + "\">" + binary_bytes_text(value) + "</td>";
  }
  return html + "</tr>\n";
}

// White to dark blue; text on a cell is drawn black on light cells and white on dark ones.
std::string heat_colour(double shade) {
  const int red = static_cast<int>(std::lround(255 - shade * (255 - 8)));
  const int green = static_cast<int>(std::lround(255 - shade * (255 - 48)));
  const int blue = static_cast<int>(std::lround(255 - shade * (255 - 107)));
  return "rgb(" + std::to_string(red) + "," + std::to_string(green) + "," + std::to_string(blue) +
         ")";
}

}  // namespace

std::string render_reshard_report_html(const ReshardReportInput& in) {
  const reshard::Layout& from = *in.a;
  const reshard::Layout& to = *in.b;
  const reshard::Result& result = *in.result;
  const reshard::Totals& totals = result.totals;
  std::string html = report::page_head("shardc report: reshard " + from.label + " -> " + to.label);
  html += "<h1>shardc report: reshard</h1>\n<table aria-label=\"reshard summary\">\n";
  auto row = [&html](const std::string& key, const std::string& value, const std::string& id) {
    html += "<tr><th scope=\"row\">" + key + "</th><td id=\"" + id + "\">" + value + "</td></tr>\n";
  };
  row("from (A)", escape(from.label) + ", " + std::to_string(from.world_size) + " ranks", "plan-a");
  row("to (B)", escape(to.label) + ", " + std::to_string(to.world_size) + " ranks", "plan-b");
  if (in.options.ranks_per_node)
    row("ranks per node", std::to_string(*in.options.ranks_per_node), "ranks-per-node");
  row("params",
      std::to_string(totals.params) + " transferred, " + std::to_string(totals.shared_aliases) +
          " tied aliases sharing storage; " + std::to_string(totals.pieces) + " pieces",
      "params");
  html += "<tr><th scope=\"row\">destination bytes</th><td id=\"dest-bytes\" data-bytes=\"" +
          std::to_string(totals.dest_bytes) + "\">" + binary_bytes_text(totals.dest_bytes) +
          "</td></tr>\n";
  html += "<tr><th scope=\"row\">moved bytes</th><td id=\"moved-bytes\" data-bytes=\"" +
          std::to_string(totals.moved_bytes) + "\">" + binary_bytes_text(totals.moved_bytes) +
          "</td></tr>\n";
  html += "<tr><th scope=\"row\">already in place</th><td id=\"in-place-bytes\" data-bytes=\"" +
          std::to_string(totals.in_place_bytes) + "\">" + binary_bytes_text(totals.in_place_bytes) +
          "</td></tr>\n";
  html +=
      "</table>\n<table id=\"reshard-stats\"><caption>Per destination rank</caption><thead><tr>"
      "<th scope=\"col\">bytes</th><th scope=\"col\" class=\"num\">min</th><th scope=\"col\" "
      "class=\"num\">median</th><th scope=\"col\" class=\"num\">max</th></tr></thead><tbody>\n" +
      stats_row("destination", result.dest_bytes) + stats_row("moved", result.moved_bytes) +
      stats_row("in place", result.in_place_bytes) + "</tbody></table>\n";

  // The heatmap: bytes each destination group reads from each source group (moved reads only).
  const std::int64_t src_group = group_size(from.world_size, in.options);
  const std::int64_t dst_group = group_size(to.world_size, in.options);
  const std::int64_t src_n = (from.world_size + src_group - 1) / src_group;
  const std::int64_t dst_n = (to.world_size + dst_group - 1) / dst_group;
  std::vector<std::int64_t> cells(static_cast<std::size_t>(src_n * dst_n), 0);
  std::vector<std::int64_t> all(static_cast<std::size_t>(to.world_size));
  for (std::int64_t i = 0; i < to.world_size; ++i) all[static_cast<std::size_t>(i)] = i;
  reshard::for_each_rank_reads(
      from, to, result, all, in.options,
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
  auto group_text = [](std::int64_t group, std::int64_t size, std::int64_t world) {
    const std::int64_t first = group * size, last = std::min(world, first + size) - 1;
    return first == last ? std::to_string(first)
                         : std::to_string(first) + "-" + std::to_string(last);
  };
  html +=
      "<section id=\"heatmap\" aria-labelledby=\"heatmap-h\">\n<h2 id=\"heatmap-h\">Bytes moved "
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
    const int column_x = left + static_cast<int>(s) * cell + cell / 2;
    html += "<text transform=\"translate(" + std::to_string(column_x + 4) + "," +
            std::to_string(head - 4) + ") rotate(-60)\">" +
            group_text(s, src_group, from.world_size) + "</text>\n";
  }
  for (std::int64_t d = 0; d < dst_n; ++d) {
    const int row_y = head + static_cast<int>(d) * cell;
    html += "<text x=\"4\" y=\"" + std::to_string(row_y + cell / 2 + 4) + "\">" +
            group_text(d, dst_group, to.world_size) + "</text>\n";
    for (std::int64_t s = 0; s < src_n; ++s) {
      const std::int64_t bytes = cells[static_cast<std::size_t>(d * src_n + s)];
      html += "<rect class=\"heat\" x=\"" + std::to_string(left + static_cast<int>(s) * cell) +
              "\" y=\"" + std::to_string(row_y) + "\" width=\"" + std::to_string(cell - 1) +
              "\" height=\"" + std::to_string(cell - 1) + "\" fill=\"" +
              heat_colour(static_cast<double>(bytes) / static_cast<double>(top)) +
              "\" data-dst=\"" + std::to_string(d) + "\" data-src=\"" + std::to_string(s) +
              "\" data-bytes=\"" + std::to_string(bytes) + "\"><title>B ranks " +
              group_text(d, dst_group, to.world_size) + " read " + binary_bytes_text(bytes) +
              " from A ranks " + group_text(s, src_group, from.world_size) + "</title></rect>\n";
    }
  }
  html +=
      "</svg></div>\n</section>\n<script type=\"application/json\" id=\"report-data\">"
      "{\"world\":0}</script>\n";
  html += report::page_tail();
  return html;
}

}  // namespace shardc
