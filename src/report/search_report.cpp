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
                             {"bubble", cost.bubble, "#f28e2b"}};
  for (std::size_t i = 0; i < cost.comm.size(); ++i) {
    terms.push_back(
        {"comm " + cost.comm[i].axis, cost.comm[i].exposed, kCommColours[i % kCommColours.size()]});
  }
  terms.push_back({"optimizer", cost.optimizer, "#59a14f"});
  return terms;
}

void write_summary(const SearchReportInput& in, std::string& h) {
  const SearchResult& r = *in.result;
  const Hardware& hw = *in.hardware;
  h += "<table aria-label=\"search summary\">\n";
  auto row = [&h](const std::string& key, const std::string& value, const std::string& id = {}) {
    h += "<tr><th scope=\"row\">" + key + "</th><td" + (id.empty() ? "" : " id=\"" + id + "\"") +
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
  h += "<tr><th scope=\"row\">budget</th><td id=\"budget\" data-bytes=\"" +
       std::to_string(in.budget) + "\">" + binary_bytes_text(in.budget) + "</td></tr>\n";
  row("training", "seq_len " + std::to_string(in.seq_len) + ", micro-batch " +
                      std::to_string(in.micro_batch_size) + ", global batch " +
                      std::to_string(in.global_batch_size) + " sequences (" +
                      std::to_string(in.global_batch_size * in.seq_len) + " tokens), optimizer " +
                      escape(in.optimizer));
  h += "<tr><th scope=\"row\">layouts</th><td id=\"counts\" data-enumerated=\"" +
       std::to_string(r.enumerated) + "\" data-screened=\"" + std::to_string(r.screened) +
       "\" data-checked=\"" + std::to_string(r.checked.size()) + "\">" +
       std::to_string(r.enumerated) + " enumerated, " + std::to_string(r.screened) + " screened, " +
       std::to_string(r.checked.size()) +
       " planned exactly (in order of estimated step time)</td></tr>\n</table>\n";
}

void write_ranked(const SearchReportInput& in, std::string& h) {
  const SearchResult& r = *in.result;
  h += "<section id=\"ranked\" aria-labelledby=\"ranked-h\">\n<h2 id=\"ranked-h\">Ranked "
       "layouts</h2>\n";
  if (r.ranked.empty()) {
    h += "<p id=\"none-ranked\">No valid layout fits the budget (E-SEARCH).";
    if (r.smallest) {
      h += " The smallest memory found: " + binary_bytes_text(r.smallest->peak) + " per rank (" +
           escape(layout_name(r.smallest->layout)) + ").";
    }
    h += "</p>\n</section>\n";
    return;
  }
  h += "<p>Valid layouts that fit, by estimated step time. Peak memory is the planner's exact "
       "figure (<code>shardc memory</code> of the layout's recipe); headroom is the budget "
       "minus the peak.</p>\n<div class=\"scroll\" tabindex=\"0\" role=\"region\" "
       "aria-label=\"ranked layouts\"><table id=\"ranked-table\"><caption>The " +
       std::to_string(r.ranked.size()) +
       " best layouts</caption>\n<thead><tr><th scope=\"col\" class=\"num\">#</th><th "
       "scope=\"col\">layout</th><th scope=\"col\" class=\"num\">peak</th><th scope=\"col\">"
       "headroom</th><th scope=\"col\" class=\"num\">step s</th><th scope=\"col\" class=\"num\">"
       "tokens/s/GPU</th><th scope=\"col\" class=\"num\">MFU</th><th scope=\"col\">dominant</th>"
       "</tr></thead>\n<tbody>\n";
  for (std::size_t i = 0; i < r.ranked.size(); ++i) {
    const CheckedLayout& c = r.ranked[i];
    const std::int64_t headroom = in.budget - c.peak;
    const double used =
        in.budget > 0
            ? std::clamp(static_cast<double>(c.peak) / static_cast<double>(in.budget), 0.0, 1.0)
            : 1.0;
    h += "<tr class=\"layout\" data-rank=\"" + std::to_string(i + 1) + "\" data-layout=\"" +
         escape(layout_name(c.layout)) + "\" data-peak=\"" + std::to_string(c.peak) +
         "\" data-headroom=\"" + std::to_string(headroom) + "\" data-step=\"" +
         seconds_attr(c.cost.step) + "\" data-tokens=\"" +
         seconds_attr(c.cost.tokens_per_second_per_gpu) + "\" data-mfu=\"" +
         seconds_attr(c.cost.mfu) + "\"><td class=\"num\">" + std::to_string(i + 1) +
         "</td><td class=\"mono\">" + escape(layout_name(c.layout)) + "</td><td class=\"num\">" +
         binary_bytes_text(c.peak) + "</td><td><svg role=\"img\" aria-label=\"" +
         fixed_text(100 * used, 0) + "% of the budget used\" width=\"120\" height=\"12\">" +
         "<rect width=\"120\" height=\"12\" fill=\"#e6e6e6\"/><rect width=\"" +
         fixed_text(120 * used, 1) + "\" height=\"12\" fill=\"#4e79a7\"/></svg> " +
         binary_bytes_text(headroom) + "</td><td class=\"num\">" + fixed_text(c.cost.step, 3) +
         "</td><td class=\"num\">" + fixed_text(c.cost.tokens_per_second_per_gpu, 0) +
         "</td><td class=\"num\">" + fixed_text(100 * c.cost.mfu, 1) + "%</td><td>" +
         escape(c.cost.dominant) + "</td></tr>\n";
  }
  h += "</tbody></table></div>\n</section>\n";
}

void write_terms(const SearchReportInput& in, std::string& h) {
  const SearchResult& r = *in.result;
  if (r.ranked.empty()) return;
  double top = 0;
  for (const CheckedLayout& c : r.ranked) {
    double sum = 0;
    for (const Term& t : step_terms(c.cost)) sum += t.seconds;
    top = std::max(top, sum);
  }
  if (top <= 0) top = 1;
  const int left = 40, bar_h = 22, gap = 10, chart_w = 760;
  const int height = static_cast<int>(r.ranked.size()) * (bar_h + gap) + 30;
  h += "<section id=\"terms\" aria-labelledby=\"terms-h\">\n<h2 id=\"terms-h\">Step time, term by "
       "term</h2>\n<p>Seconds per optimizer step on one rank: compute, recompute, pipeline "
       "bubble, each axis's exposed communication, optimizer step (docs/search.md, the cost "
       "model).</p>\n<div class=\"legend\">";
  std::vector<std::pair<std::string, const char*>> legend;
  for (const CheckedLayout& c : r.ranked) {
    for (const Term& t : step_terms(c.cost)) {
      if (std::none_of(legend.begin(), legend.end(),
                       [&t](const auto& entry) { return entry.first == t.name; }))
        legend.emplace_back(t.name, t.colour);
    }
  }
  for (const auto& entry : legend) {
    h += "<span><span class=\"sw\" style=\"background:" + std::string(entry.second) + "\"></span>" +
         escape(entry.first) + "</span>";
  }
  h += "</div>\n<div class=\"scroll\" tabindex=\"0\" role=\"region\" aria-label=\"step terms "
       "chart\"><svg id=\"terms-chart\" role=\"img\" aria-label=\"stacked step-time terms per "
       "ranked layout\" width=\"" +
       std::to_string(left + chart_w + 80) + "\" height=\"" + std::to_string(height) + "\">\n";
  for (std::size_t i = 0; i < r.ranked.size(); ++i) {
    const CheckedLayout& c = r.ranked[i];
    const int y = static_cast<int>(i) * (bar_h + gap) + 4;
    h += "<g class=\"step-bar\" data-rank=\"" + std::to_string(i + 1) + "\" data-step=\"" +
         seconds_attr(c.cost.step) + "\"><title>#" + std::to_string(i + 1) + " " +
         escape(layout_name(c.layout)) + ": step " + fixed_text(c.cost.step, 3) +
         " s</title><text x=\"2\" y=\"" + std::to_string(y + 15) + "\">#" + std::to_string(i + 1) +
         "</text>";
    double at = 0;
    for (const Term& t : step_terms(c.cost)) {
      const double x = left + chart_w * at / top;
      const double w = chart_w * t.seconds / top;
      h += "<rect class=\"term\" data-term=\"" + escape(t.name) + "\" data-seconds=\"" +
           seconds_attr(t.seconds) + "\" x=\"" + fixed_text(x, 2) + "\" y=\"" + std::to_string(y) +
           "\" width=\"" + fixed_text(w, 2) + "\" height=\"" + std::to_string(bar_h) +
           "\" fill=\"" + t.colour + "\"><title>" + escape(t.name) + ": " +
           fixed_text(t.seconds, 3) + " s</title></rect>";
      at += t.seconds;
    }
    h += "<text x=\"" + fixed_text(left + chart_w * at / top + 4, 2) + "\" y=\"" +
         std::to_string(y + 15) + "\">" + fixed_text(c.cost.step, 3) + " s</text></g>\n";
  }
  h += "</svg></div>\n";
  // The terms as a table, with each axis's collective and overlap rule.
  h += "<details><summary>The terms: the table</summary>\n<div class=\"scroll\" tabindex=\"0\" "
       "role=\"region\" aria-label=\"step terms table\"><table id=\"terms-table\"><caption>Step "
       "terms per ranked layout (seconds)</caption>\n<thead><tr><th scope=\"col\" "
       "class=\"num\">#</th><th scope=\"col\">term</th><th scope=\"col\" class=\"num\">"
       "seconds</th><th scope=\"col\">detail</th></tr></thead>\n<tbody>\n";
  for (std::size_t i = 0; i < r.ranked.size(); ++i) {
    const StepCost& k = r.ranked[i].cost;
    auto row = [&](const std::string& term, double seconds, const std::string& detail) {
      h += "<tr><td class=\"num\">" + std::to_string(i + 1) + "</td><td>" + escape(term) +
           "</td><td class=\"num\">" + fixed_text(seconds, 3) + "</td><td>" + escape(detail) +
           "</td></tr>\n";
    };
    row("compute", k.compute, "");
    row("recompute", k.recompute, "");
    row("bubble", k.bubble, "");
    for (const AxisCommTime& t : k.comm) {
      row("comm " + t.axis, t.exposed,
          t.collective + ", " + (t.inter_node ? "inter-node" : "intra-node") + ", " +
              fixed_text(t.bytes / 1e9, 2) + " GB per rank, " + fixed_text(t.seconds, 3) +
              " s before overlap; " + t.overlap);
    }
    row("optimizer", k.optimizer, "");
  }
  h += "</tbody></table></div></details>\n</section>\n";
}

void write_not_ranked(const SearchReportInput& in, std::string& h) {
  const SearchResult& r = *in.result;
  h += "<section id=\"not-ranked\" aria-labelledby=\"not-ranked-h\">\n<h2 id=\"not-ranked-h\">"
       "Planned but not ranked</h2>\n";
  std::string rows;
  std::int64_t invalid = 0, over = 0;
  for (const CheckedLayout& c : r.checked) {
    if (c.valid && c.fits) continue;
    (c.valid ? over : invalid) += 1;
    rows += "<tr data-valid=\"" + std::string(c.valid ? "true" : "false") +
            "\"><td class=\"mono\">" + escape(layout_name(c.layout)) + "</td><td>" +
            (c.valid ? "peak " + binary_bytes_text(c.peak) + ", over the budget by " +
                           binary_bytes_text(c.peak - in.budget)
                     : escape(c.first_code) + ": " + escape(c.first_message)) +
            "</td></tr>\n";
  }
  h += "<p id=\"not-ranked-counts\" data-invalid=\"" + std::to_string(invalid) + "\" data-over=\"" +
       std::to_string(over) + "\">" + std::to_string(invalid) +
       " invalid (the planner's first error), " + std::to_string(over) + " over the budget.</p>\n";
  if (!rows.empty()) {
    h += "<div class=\"scroll\" tabindex=\"0\" role=\"region\" aria-label=\"layouts not "
         "ranked\"><table id=\"not-ranked-table\"><caption>Layouts planned exactly but not "
         "ranked</caption>\n<thead><tr><th scope=\"col\">layout</th><th scope=\"col\">why</th>"
         "</tr></thead>\n<tbody>\n" +
         rows + "</tbody></table></div>\n";
  }
  h += "</section>\n";
}

void write_pruned(const SearchReportInput& in, std::string& h) {
  const SearchResult& r = *in.result;
  h += "<section id=\"pruned\" aria-labelledby=\"pruned-h\">\n<h2 id=\"pruned-h\">Pruned before "
       "planning</h2>\n<table id=\"pruned-table\"><caption>Layouts dropped by the screen, per "
       "reason (each named after the planner code it would get)</caption>\n<thead><tr><th "
       "scope=\"col\">reason</th><th scope=\"col\" class=\"num\">layouts</th></tr></thead>\n"
       "<tbody>\n";
  for (int i = 0; i < kScreenReasons; ++i) {
    const std::string reason = screen_reason_text(static_cast<ScreenReason>(i));
    const std::int64_t count = r.pruned[static_cast<std::size_t>(i)];
    h += "<tr><td>" + escape(reason) + "</td><td class=\"num\" data-reason=\"" + escape(reason) +
         "\" data-count=\"" + std::to_string(count) + "\">" + std::to_string(count) +
         "</td></tr>\n";
  }
  h += "</tbody></table>\n</section>\n";
}

}  // namespace

std::string render_search_report_html(const SearchReportInput& in) {
  std::string h = report::page_head("shardc search: " + in.model);
  h += "<h1>shardc search: " + escape(in.model) + " on " + std::to_string(in.world) +
       " ranks</h1>\n";
  write_summary(in, h);
  write_ranked(in, h);
  write_terms(in, h);
  write_not_ranked(in, h);
  write_pruned(in, h);
  h += "<script type=\"application/json\" id=\"report-data\">{\"world\":0}</script>\n";
  h += report::page_tail();
  return h;
}

}  // namespace shardc
