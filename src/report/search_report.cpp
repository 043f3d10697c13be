// The page of a layout search (src/report/report.hpp): the ranked table with memory headroom,
// a stacked bar of step-time terms per ranked layout, the planned-but-not-ranked layouts and
// the pruned counts per reason. Every figure is a field of the SearchResult that
// `search --format json` prints; the page only lays them out.
#include <algorithm>
#include <array>
#include <cstdio>

#include "report/html.hpp"
#include "report/report.hpp"

namespace shardc {
namespace {

using report::escape;

std::string fixed_text(double value, int digits) {
  std::array<char, 64> buf{};
  std::snprintf(buf.data(), buf.size(), "%.*f", digits, value);
  return buf.data();
}

// Seconds as a data attribute: enough digits to compare with the JSON's %.6g.
std::string seconds_attr(double value) {
  std::array<char, 64> buf{};
  std::snprintf(buf.data(), buf.size(), "%.9g", value);
  return buf.data();
}

// One segment of a step bar.
struct Term {
  std::string name;
  double seconds = 0;
  const char* colour = "";
};

constexpr std::array<const char*, 8> kCommColours = {"#e15759", "#ff9da7", "#edc948", "#b07aa1",
                                                     "#9c755f", "#bab0ac", "#76b7b2", "#d37295"};

std::vector<Term> step_terms(const StepCost& cost) {
  std::vector<Term> terms = {{"compute", cost.compute, "#4e79a7"},
                             {"recompute", cost.recompute, "#a0cbe8"},
                             {"imbalance", cost.imbalance, "#86bcb6"},
                             {"bubble", cost.bubble, "#f28e2b"}};
  for (std::size_t i = 0; i < cost.comm.size(); ++i) {
    terms.push_back(
        {"comm " + cost.comm[i].axis, cost.comm[i].exposed, kCommColours[i % kCommColours.size()]});
  }
  terms.push_back({"optimizer", cost.optimizer, "#59a14f"});
  return terms;
}

void write_summary(const SearchReportInput& in, std::string& page) {
  const SearchResult& result = *in.result;
  const Hardware& hw = *in.hardware;
  page += "<table aria-label=\"search summary\">\n";
  auto row = [&page](const std::string& key, const std::string& value, const std::string& id = {}) {
    page += "<tr><th scope=\"row\">" + key + "</th><td" + (id.empty() ? "" : " id=\"" + id + "\"") +
            ">" + value + "</td></tr>\n";
  };
  row("model", escape(in.model));
  row("rule set", "<span class=\"mono\">" + escape(in.rules) + "</span>");
  row("world",
      std::to_string(in.world) + " ranks, " + std::to_string(hw.gpus_per_node) + " per node",
      "world");
  row("hardware", escape(hw.name) + ": " + fixed_text(hw.peak_flops / 1e12, 1) +
                      " TFLOP/s BF16 dense × GEMM efficiency " + fixed_text(hw.gemm_efficiency, 2) +
                      ", HBM " + fixed_text(hw.hbm_bytes / 1e9, 0) + " GB, intra-node " +
                      fixed_text(hw.intra_bandwidth / 1e9, 0) + " GB/s, inter-node " +
                      fixed_text(hw.inter_bandwidth / 1e9, 0) + " GB/s per GPU (" +
                      escape(hw.source) + ")");
  page += "<tr><th scope=\"row\">budget</th><td id=\"budget\" data-bytes=\"" +
          std::to_string(in.budget) + "\">" + binary_bytes_text(in.budget) + "</td></tr>\n";
  row("training", "seq_len " + std::to_string(in.seq_len) + ", micro-batch " +
                      std::to_string(in.micro_batch_size) + ", global batch " +
                      std::to_string(in.global_batch_size) + " sequences (" +
                      std::to_string(in.global_batch_size * in.seq_len) + " tokens), optimizer " +
                      escape(in.optimizer) + (in.dtypes.empty() ? "" : ", " + escape(in.dtypes)));
  page += "<tr><th scope=\"row\">layouts</th><td id=\"counts\" data-enumerated=\"" +
          std::to_string(result.enumerated) + "\" data-screened=\"" +
          std::to_string(result.screened) + "\" data-checked=\"" +
          std::to_string(result.checked.size()) + "\">" + std::to_string(result.enumerated) +
          " enumerated, " + std::to_string(result.screened) + " screened, " +
          std::to_string(result.checked.size()) +
          " planned exactly (in order of estimated step time)</td></tr>\n</table>\n";
}

void write_ranked(const SearchReportInput& in, std::string& page) {
  const SearchResult& result = *in.result;
  page +=
      "<section id=\"ranked\" aria-labelledby=\"ranked-h\">\n<h2 id=\"ranked-h\">Ranked "
      "layouts</h2>\n";
  if (result.ranked.empty()) {
    page += "<p id=\"none-ranked\">No valid layout fits the budget (E-SEARCH).";
    if (result.smallest) {
      page += " The smallest memory found: " + binary_bytes_text(result.smallest->peak) +
              " per rank (" + escape(layout_name(result.smallest->layout)) + ").";
    }
    page += "</p>\n</section>\n";
    return;
  }
  page +=
      "<p>Valid layouts that fit, by estimated step time. Peak memory is the planner's exact "
      "figure (<code>shardc memory</code> of the layout's recipe); headroom is the budget "
      "minus the peak.</p>\n<div class=\"scroll\" tabindex=\"0\" role=\"region\" "
      "aria-label=\"ranked layouts\"><table id=\"ranked-table\"><caption>The " +
      std::to_string(result.ranked.size()) +
      " best layouts</caption>\n<thead><tr><th scope=\"col\" class=\"num\">#</th><th "
      "scope=\"col\">layout</th><th scope=\"col\" class=\"num\">peak</th><th scope=\"col\">"
      "headroom</th><th scope=\"col\" class=\"num\">step s</th><th scope=\"col\" class=\"num\">"
      "tokens/s/GPU</th><th scope=\"col\" class=\"num\">MFU</th><th scope=\"col\">dominant</th>"
      "</tr></thead>\n<tbody>\n";
  for (std::size_t i = 0; i < result.ranked.size(); ++i) {
    const CheckedLayout& layout = result.ranked[i];
    const std::int64_t headroom = in.budget - layout.peak;
    const double used =
        in.budget > 0
            ? std::clamp(static_cast<double>(layout.peak) / static_cast<double>(in.budget), 0.0,
                         1.0)
            : 1.0;
    page += "<tr class=\"layout\" data-rank=\"" + std::to_string(i + 1) + "\" data-layout=\"" +
            escape(layout_name(layout.layout)) + "\" data-peak=\"" + std::to_string(layout.peak) +
            "\" data-headroom=\"" + std::to_string(headroom) + "\" data-step=\"" +
            seconds_attr(layout.cost.step) + "\" data-tokens=\"" +
            seconds_attr(layout.cost.tokens_per_second_per_gpu) + "\" data-mfu=\"" +
            seconds_attr(layout.cost.mfu) + "\"><td class=\"num\">" + std::to_string(i + 1) +
            "</td><td class=\"mono\">" + escape(layout_name(layout.layout)) +
            "</td><td class=\"num\">" + binary_bytes_text(layout.peak) +
            "</td><td><svg role=\"img\" aria-label=\"" + fixed_text(100 * used, 0) +
            "% of the budget used\" width=\"120\" height=\"12\">" +
            "<rect width=\"120\" height=\"12\" fill=\"#e6e6e6\"/><rect width=\"" +
            fixed_text(120 * used, 1) + "\" height=\"12\" fill=\"#4e79a7\"/></svg> " +
            binary_bytes_text(headroom) + "</td><td class=\"num\">" +
            fixed_text(layout.cost.step, 3) + "</td><td class=\"num\">" +
            fixed_text(layout.cost.tokens_per_second_per_gpu, 0) + "</td><td class=\"num\">" +
            fixed_text(100 * layout.cost.mfu, 1) + "%</td><td>" + escape(layout.cost.dominant) +
            "</td></tr>\n";
  }
  page += "</tbody></table></div>\n</section>\n";
}

void write_terms(const SearchReportInput& in, std::string& page) {
  const SearchResult& result = *in.result;
  if (result.ranked.empty()) return;
  double top = 0;
  for (const CheckedLayout& layout : result.ranked) {
    double sum = 0;
    for (const Term& term : step_terms(layout.cost)) sum += term.seconds;
    top = std::max(top, sum);
  }
  if (top <= 0) top = 1;
  const int left = 40, bar_h = 22, gap = 10, chart_w = 760;
  const int height = static_cast<int>(result.ranked.size()) * (bar_h + gap) + 30;
  page +=
      "<section id=\"terms\" aria-labelledby=\"terms-h\">\n<h2 id=\"terms-h\">Step time, term by "
      "term</h2>\n<p>Seconds per optimizer step on one rank: compute, recompute, pipeline "
      "imbalance, bubble, each axis's exposed communication, optimizer step (docs/search.md, the "
      "cost "
      "model).</p>\n<div class=\"legend\">";
  std::vector<std::pair<std::string, const char*>> legend;
  for (const CheckedLayout& layout : result.ranked) {
    for (const Term& term : step_terms(layout.cost)) {
      if (std::none_of(legend.begin(), legend.end(),
                       [&term](const auto& entry) { return entry.first == term.name; }))
        legend.emplace_back(term.name, term.colour);
    }
  }
  for (const auto& entry : legend) {
    page += "<span><span class=\"sw\" style=\"background:" + std::string(entry.second) +
            "\"></span>" + escape(entry.first) + "</span>";
  }
  page +=
      "</div>\n<div class=\"scroll\" tabindex=\"0\" role=\"region\" aria-label=\"step terms "
      "chart\"><svg id=\"terms-chart\" role=\"img\" aria-label=\"stacked step-time terms per "
      "ranked layout\" width=\"" +
      std::to_string(left + chart_w + 80) + "\" height=\"" + std::to_string(height) + "\">\n";
  for (std::size_t i = 0; i < result.ranked.size(); ++i) {
    const CheckedLayout& layout = result.ranked[i];
    const int top_y = static_cast<int>(i) * (bar_h + gap) + 4;
    page += "<g class=\"step-bar\" data-rank=\"" + std::to_string(i + 1) + "\" data-step=\"" +
            seconds_attr(layout.cost.step) + "\"><title>#" + std::to_string(i + 1) + " " +
            escape(layout_name(layout.layout)) + ": step " + fixed_text(layout.cost.step, 3) +
            " s</title><text x=\"2\" y=\"" + std::to_string(top_y + 15) + "\">#" +
            std::to_string(i + 1) + "</text>";
    double at = 0;
    for (const Term& term : step_terms(layout.cost)) {
      const double left_x = left + chart_w * at / top;
      const double width = chart_w * term.seconds / top;
      page += "<rect class=\"term\" data-term=\"" + escape(term.name) + "\" data-seconds=\"" +
              seconds_attr(term.seconds) + "\" x=\"" + fixed_text(left_x, 2) + "\" y=\"" +
              std::to_string(top_y) + "\" width=\"" + fixed_text(width, 2) + "\" height=\"" +
              std::to_string(bar_h) + "\" fill=\"" + term.colour + "\"><title>" +
              escape(term.name) + ": " + fixed_text(term.seconds, 3) + " s</title></rect>";
      at += term.seconds;
    }
    page += "<text x=\"" + fixed_text(left + chart_w * at / top + 4, 2) + "\" y=\"" +
            std::to_string(top_y + 15) + "\">" + fixed_text(layout.cost.step, 3) +
            " s</text></g>\n";
  }
  page += "</svg></div>\n";
  // The terms as a table, with each axis's collective and overlap rule.
  page +=
      "<details><summary>The terms: the table</summary>\n<div class=\"scroll\" tabindex=\"0\" "
      "role=\"region\" aria-label=\"step terms table\"><table id=\"terms-table\"><caption>Step "
      "terms per ranked layout (seconds)</caption>\n<thead><tr><th scope=\"col\" "
      "class=\"num\">#</th><th scope=\"col\">term</th><th scope=\"col\" class=\"num\">"
      "seconds</th><th scope=\"col\">detail</th></tr></thead>\n<tbody>\n";
  for (std::size_t i = 0; i < result.ranked.size(); ++i) {
    const StepCost& cost = result.ranked[i].cost;
    auto row = [&](const std::string& term, double seconds, const std::string& detail) {
      page += "<tr><td class=\"num\">" + std::to_string(i + 1) + "</td><td>" + escape(term) +
              "</td><td class=\"num\">" + fixed_text(seconds, 3) + "</td><td>" + escape(detail) +
              "</td></tr>\n";
    };
    row("compute", cost.compute, "");
    row("recompute", cost.recompute, "");
    row("imbalance", cost.imbalance, "the slowest pipeline stage's work above the mean stage's");
    row("bubble", cost.bubble, "");
    for (const AxisCommTime& term : cost.comm) {
      row("comm " + term.axis, term.exposed,
          term.collective + ", " + (term.inter_node ? "inter-node" : "intra-node") + ", " +
              fixed_text(term.bytes / 1e9, 2) + " GB per rank, " + fixed_text(term.seconds, 3) +
              " s before overlap; " + term.overlap);
    }
    row("optimizer", cost.optimizer, "");
  }
  page += "</tbody></table></div></details>\n</section>\n";
}

void write_not_ranked(const SearchReportInput& in, std::string& page) {
  const SearchResult& result = *in.result;
  page +=
      "<section id=\"not-ranked\" aria-labelledby=\"not-ranked-h\">\n<h2 id=\"not-ranked-h\">"
      "Planned but not ranked</h2>\n";
  std::string rows;
  std::int64_t invalid = 0, over = 0;
  for (const CheckedLayout& layout : result.checked) {
    if (layout.valid && layout.fits) continue;
    (layout.valid ? over : invalid) += 1;
    rows += "<tr data-valid=\"" + std::string(layout.valid ? "true" : "false") +
            "\"><td class=\"mono\">" + escape(layout_name(layout.layout)) + "</td><td>" +
            (layout.valid ? "peak " + binary_bytes_text(layout.peak) + ", over the budget by " +
                                binary_bytes_text(layout.peak - in.budget)
                          : escape(layout.first_code) + ": " + escape(layout.first_message)) +
            "</td></tr>\n";
  }
  page += "<p id=\"not-ranked-counts\" data-invalid=\"" + std::to_string(invalid) +
          "\" data-over=\"" + std::to_string(over) + "\">" + std::to_string(invalid) +
          " invalid (the planner's first error), " + std::to_string(over) +
          " over the budget.</p>\n";
  if (!rows.empty()) {
    page +=
        "<div class=\"scroll\" tabindex=\"0\" role=\"region\" aria-label=\"layouts not "
        "ranked\"><table id=\"not-ranked-table\"><caption>Layouts planned exactly but not "
        "ranked</caption>\n<thead><tr><th scope=\"col\">layout</th><th scope=\"col\">why</th>"
        "</tr></thead>\n<tbody>\n" +
        rows + "</tbody></table></div>\n";
  }
  page += "</section>\n";
}

void write_pruned(const SearchReportInput& in, std::string& page) {
  const SearchResult& result = *in.result;
  page +=
      "<section id=\"pruned\" aria-labelledby=\"pruned-h\">\n<h2 id=\"pruned-h\">Pruned before "
      "planning</h2>\n<table id=\"pruned-table\"><caption>Layouts dropped by the screen, per "
      "reason (each named after the planner code it would get)</caption>\n<thead><tr><th "
      "scope=\"col\">reason</th><th scope=\"col\" class=\"num\">layouts</th></tr></thead>\n"
      "<tbody>\n";
  for (int i = 0; i < kScreenReasons; ++i) {
    const std::string reason = screen_reason_text(static_cast<ScreenReason>(i));
    const std::int64_t count = result.pruned[static_cast<std::size_t>(i)];
    page += "<tr><td>" + escape(reason) + "</td><td class=\"num\" data-reason=\"" + escape(reason) +
            "\" data-count=\"" + std::to_string(count) + "\">" + std::to_string(count) +
            "</td></tr>\n";
  }
  page += "</tbody></table>\n</section>\n";
}

}  // namespace

std::string render_search_report_html(const SearchReportInput& in) {
  std::string page = report::page_head("shardc search: " + in.model);
  page += "<h1>shardc search: " + escape(in.model) + " on " + std::to_string(in.world) +
          " ranks</h1>\n";
  write_summary(in, page);
  write_ranked(in, page);
  write_terms(in, page);
  write_not_ranked(in, page);
  write_pruned(in, page);
  page += "<script type=\"application/json\" id=\"report-data\">{\"world\":0}</script>\n";
  page += report::page_tail();
  return page;
}

}  // namespace shardc
