// The page of one plan (src/report/report.hpp): summary, memory by stage and kind, the
// meshes as grids, the selected rank's memory, params and buffers, the largest params, the
// diagnostics with their source lines.
#include <algorithm>
#include <numeric>
#include <sstream>

#include "report/html.hpp"
#include "report/report.hpp"
#include "support/dtype.hpp"

namespace shardc {
namespace {

using report::escape;
using report::shape_text;

// Kinds stacked in the memory bars, and their colours (with the legend's text on white).
constexpr std::array<const char*, 5> kBarKinds = {"params", "grads", "master_weights",
                                                  "optimizer_state", "step peak"};
constexpr std::array<const char*, 5> kBarColours = {"#4e79a7", "#f28e2b", "#59a14f", "#b07aa1",
                                                    "#9c755f"};

std::int64_t numel_of(const Shape& shape) {
  return std::accumulate(
      shape.begin(), shape.end(), std::int64_t{1},
      [](std::int64_t product, std::int64_t extent) { return product * extent; });
}

std::string mesh_text(const Mesh& mesh) {
  std::string text;
  for (const MeshAxis& axis : mesh.axes)
    text += (text.empty() ? "" : " × ") + axis.name + "=" + std::to_string(axis.size);
  return text;
}

// The bar segments of one rank's memory: the four state kinds, then the rest of the total
// (all-gather buffers, activations: the max(...) term of the total, src/memory/memory.hpp).
std::array<std::int64_t, 5> bar_segments(const RankMemory& rm) {
  std::array<std::int64_t, 5> seg{};
  std::int64_t state = 0;
  for (std::size_t k = 0; k < 4; ++k) state += seg[k] = rm.bytes[k];
  seg[4] = std::max<std::int64_t>(0, rm.total - state);
  return seg;
}

void write_summary(const PlanReportInput& in, std::string& html) {
  const Plan& plan = *in.plan;
  html += "<p class=\"meta\">" + escape(in.title) + "</p>\n<table aria-label=\"plan summary\">\n";
  auto row = [&html](const std::string& key, const std::string& value, const std::string& id = {}) {
    html += "<tr><th scope=\"row\">" + key + "</th><td" + (id.empty() ? "" : " id=\"" + id + "\"") +
            ">" + value + "</td></tr>\n";
  };
  row("model", escape(plan.model_name));
  row("world", std::to_string(plan.world_size) + " ranks", "world");
  row("dense mesh", escape(mesh_text(plan.dense)));
  if (plan.expert) row("expert mesh", escape(mesh_text(*plan.expert)));
  row("pipeline stages",
      std::to_string(plan.num_stages) +
          (plan.virtual_stages > 1 ? " (" + std::to_string(plan.virtual_stages) + " virtual each)"
                                   : ""));
  row("params", std::to_string(in.num_params));
  if (in.memory) {
    const MemoryReport& memory = *in.memory;
    row("peak memory", binary_bytes_text(memory.peak) + " on rank(s) " +
                           escape(memory.peak_ranks.to_string()) + " (stage " +
                           std::to_string(plan.stage_of_rank(memory.peak_ranks.first())) + ", " +
                           escape(rank_coords_text(plan, memory.peak_ranks.first())) + ")");
    if (in.budget) {
      row("budget", binary_bytes_text(*in.budget) +
                        (memory.peak <= *in.budget
                             ? ": fits, headroom " + binary_bytes_text(*in.budget - memory.peak)
                             : ": exceeded by " + binary_bytes_text(memory.peak - *in.budget)));
    }
  }
  html += "</table>\n";
}

// What the page's source does not hold (an OUTDIR), said once near the top.
void write_notes(const PlanReportInput& in, std::string& html) {
  if (in.notes.empty()) return;
  html += "<ul id=\"notes\" aria-label=\"what this page's source does not hold\">\n";
  for (const std::string& note : in.notes) html += "<li>" + escape(note) + "</li>\n";
  html += "</ul>\n";
}

// An OUTDIR's plan.json `summary.per_rank_memory`: the world's min / median / max per kind.
void write_plan_memory(const PlanReportInput& in, std::string& html) {
  if (!in.plan_memory) return;
  const readback::PlanMemory& pm = *in.plan_memory;
  html +=
      "<table id=\"plan-memory\"><caption>Memory over all ranks, as plan.json's "
      "<code>summary.per_rank_memory</code> says it (not counted: " +
      escape(pm.not_counted) +
      ")</caption>\n<thead><tr><th scope=\"col\">kind</th><th scope=\"col\" class=\"num\">min"
      "</th><th scope=\"col\" class=\"num\">median</th><th scope=\"col\" class=\"num\">max</th>"
      "<th scope=\"col\">max on ranks</th></tr></thead>\n<tbody>\n";
  for (const auto& [kind, stat] : pm.kinds) {
    html += "<tr><td>" + escape(kind) + "</td>";
    const std::array<std::pair<const char*, std::int64_t>, 3> vs = {
        {{"min", stat.min}, {"median", stat.median}, {"max", stat.max}}};
    for (const auto& [name, value] : vs) {
      html += "<td class=\"num\" data-kind=\"" + escape(kind) + "\" data-stat=\"" + name +
              "\" data-bytes=\"" + std::to_string(value) + "\">" + binary_bytes_text(value) +
              "</td>";
    }
    html += "<td class=\"mono\">" + escape(stat.max_ranks) + "</td></tr>\n";
  }
  html += "</tbody></table>\n";
}

// The classes of `stage` ordered by total, and the classes at the lower median and the ends.
struct StageBars {
  int stage = 0;
  std::array<const MemoryClass*, 3> at{};  // min, median, max total
};

std::vector<StageBars> stage_bars(const Plan& plan, const MemoryReport& memory) {
  std::vector<StageBars> out;
  for (int s = 0; s < plan.num_stages; ++s) {
    std::vector<const MemoryClass*> cs;
    std::int64_t count = 0;
    for (const MemoryClass& memory_class : memory.classes) {
      if (memory_class.stage != s) continue;
      cs.push_back(&memory_class);
      count += memory_class.count;
    }
    if (cs.empty()) continue;
    std::stable_sort(cs.begin(), cs.end(), [](const MemoryClass* left, const MemoryClass* right) {
      return left->memory.total < right->memory.total;
    });
    StageBars bar;
    bar.stage = s;
    bar.at[0] = cs.front();
    bar.at[2] = cs.back();
    // The lower median, as stage_memory takes it: rank (count - 1) / 2 in total order.
    std::int64_t seen = 0;
    for (const MemoryClass* memory_class : cs) {
      seen += memory_class->count;
      if (seen > (count - 1) / 2) {
        bar.at[1] = memory_class;
        break;
      }
    }
    out.push_back(bar);
  }
  return out;
}

void write_memory(const PlanReportInput& in, std::string& html) {
  const Plan& plan = *in.plan;
  html +=
      "<section id=\"memory\" aria-labelledby=\"memory-h\">\n<h2 id=\"memory-h\">Memory per "
      "rank</h2>\n";
  if (!in.memory) {
    html +=
        "<p>The memory classes were not formed for this plan (the diagnostics or the notes "
        "say why).</p>\n";
    write_plan_memory(in, html);
    html += "</section>\n";
    return;
  }
  const MemoryReport& memory = *in.memory;
  const std::vector<StageBars> bars = stage_bars(plan, memory);
  std::int64_t top = 1;
  for (const StageBars& bar : bars) top = std::max(top, bar.at[2]->memory.total);
  if (in.budget) top = std::max(top, *in.budget);
  // Bars narrow with the stage count, so a 16-stage chart fits the page's width.
  const int stages = std::max<int>(1, static_cast<int>(bars.size()));
  const int bar_w = std::clamp((900 / stages - 10) * 10 / 36, 5, 22), gap = std::max(1, bar_w / 5);
  const int group_gap = std::max(8, bar_w), chart_h = 240, left = 70;
  const int group_w = 3 * bar_w + 2 * gap;
  const int width = left + static_cast<int>(bars.size()) * (group_w + group_gap) + 10;
  const int height = chart_h + 50;
  html +=
      "<p>Per pipeline stage, the ranks with the smallest, the median and the largest total "
      "(<code>shardc memory</code>'s figures: the memory classes of the memory engine). " +
      std::string(memory.activations_counted
                      ? "Activations are counted (the recipe gives a training shape): the last "
                        "segment is the step peak, activations and buffers alive together."
                      : "Activations are not counted (no training shape in the recipe): the last "
                        "segment is the larger of the FSDP2 and muon all-gather buffers.") +
      "</p>\n<div class=\"legend\">";
  for (std::size_t k = 0; k < kBarKinds.size(); ++k) {
    html += "<span><span class=\"sw\" style=\"background:" + std::string(kBarColours[k]) +
            "\"></span>" + kBarKinds[k] + "</span>";
  }
  html +=
      "</div>\n<div class=\"scroll\" tabindex=\"0\" role=\"region\" aria-label=\"memory chart\">"
      "<svg id=\"memory-chart\" role=\"img\" aria-label=\"stacked memory bars per stage: min, "
      "median and max rank\" width=\"" +
      std::to_string(width) + "\" height=\"" + std::to_string(height) + "\">\n";
  auto y_of = [&](std::int64_t bytes) {
    return static_cast<double>(chart_h) - static_cast<double>(chart_h - 10) *
                                              static_cast<double>(bytes) / static_cast<double>(top);
  };
  for (int t = 0; t <= 4; ++t) {
    const std::int64_t tick = top / 4 * t;
    const double tick_y = y_of(tick);
    html += "<line x1=\"" + std::to_string(left - 4) + "\" x2=\"" + std::to_string(width) +
            "\" y1=\"" + std::to_string(tick_y) + "\" y2=\"" + std::to_string(tick_y) +
            "\" stroke=\"#ddd\"/><text x=\"2\" y=\"" + std::to_string(tick_y + 4) + "\">" +
            escape(binary_bytes_text(tick)) + "</text>\n";
  }
  if (in.budget) {
    const double budget_y = y_of(*in.budget);
    html += "<line x1=\"" + std::to_string(left) + "\" x2=\"" + std::to_string(width) + "\" y1=\"" +
            std::to_string(budget_y) + "\" y2=\"" + std::to_string(budget_y) +
            "\" stroke=\"#b00020\" stroke-dasharray=\"4 3\"/><text x=\"" +
            std::to_string(left + 2) + "\" y=\"" + std::to_string(budget_y - 3) + "\">budget " +
            binary_bytes_text(*in.budget) + "</text>\n";
  }
  const char* which[3] = {"min", "median", "max"};
  constexpr std::array<const char*, 3> kStatMarks = {"n", "m", "x"};
  int group_x = left;
  for (const StageBars& bar : bars) {
    for (int i = 0; i < 3; ++i) {
      const MemoryClass& memory_class = *bar.at[static_cast<std::size_t>(i)];
      const auto seg = bar_segments(memory_class.memory);
      std::int64_t base = 0;
      const int bx = group_x + i * (bar_w + gap);
      html += "<g class=\"bar\" data-stage=\"" + std::to_string(bar.stage) + "\" data-stat=\"" +
              which[i] + "\" data-rank=\"" + std::to_string(memory_class.ranks.first()) +
              "\" data-bytes=\"" + std::to_string(memory_class.memory.total) + "\"><title>stage " +
              std::to_string(bar.stage) + " " + which[i] + ": rank " +
              std::to_string(memory_class.ranks.first()) + ", " +
              binary_bytes_text(memory_class.memory.total) + "</title>";
      for (std::size_t k = 0; k < seg.size(); ++k) {
        if (seg[k] == 0) continue;
        const double y1 = y_of(base + seg[k]), y0 = y_of(base);
        html += "<rect x=\"" + std::to_string(bx) + "\" y=\"" + std::to_string(y1) + "\" width=\"" +
                std::to_string(bar_w) + "\" height=\"" + std::to_string(y0 - y1) + "\" fill=\"" +
                kBarColours[k] + "\"/>";
        base += seg[k];
      }
      if (bar_w >= 10) {
        html += "<text x=\"" + std::to_string(bx + 2) + "\" y=\"" + std::to_string(chart_h + 14) +
                "\">" + std::string(kStatMarks[static_cast<std::size_t>(i)]) + "</text>";
      }
      html += "</g>\n";
    }
    html += "<text x=\"" + std::to_string(group_x) + "\" y=\"" + std::to_string(chart_h + 30) +
            "\">" + (group_w >= 40 ? "stage " : "") + std::to_string(bar.stage) + "</text>\n";
    group_x += group_w + group_gap;
  }
  html += "</svg></div>\n<p>n / m / x: min, median, max rank of the stage.</p>\n";
  // The peak, named.
  const std::int64_t pr = memory.peak_ranks.first();
  html += "<p id=\"peak\" data-bytes=\"" + std::to_string(memory.peak) + "\" data-ranks=\"" +
          escape(memory.peak_ranks.to_string()) + "\" data-stage=\"" +
          std::to_string(memory.peak_stage) +
          "\"><strong>Peak</strong>: " + binary_bytes_text(memory.peak) + " on rank(s) " +
          escape(memory.peak_ranks.to_string()) + "; rank " + std::to_string(pr) + " is stage " +
          std::to_string(plan.stage_of_rank(pr)) + ", " + escape(rank_coords_text(plan, pr)) +
          ".</p>\n";
  // The statistics table: stage_memory, as `memory --format json` prints it.
  html +=
      "<details><summary>Memory per stage and kind: the table</summary>\n"
      "<div class=\"scroll\" tabindex=\"0\" role=\"region\" aria-label=\"memory table\">"
      "<table id=\"memory-table\"><caption>Memory per stage and kind (min / median / max over "
      "the stage's ranks)</caption>\n<thead><tr><th scope=\"col\">stage</th><th scope=\"col\" "
      "class=\"num\">ranks</th><th scope=\"col\">kind</th><th scope=\"col\" class=\"num\">min</th>"
      "<th scope=\"col\" class=\"num\">median</th><th scope=\"col\" class=\"num\">max</th></tr>"
      "</thead>\n<tbody>\n";
  for (const StageMemory& per_stage : stage_memory(plan, memory)) {
    auto row = [&](const std::string& kind, const KindStats& st, bool first) {
      html += "<tr><td>" + (first ? std::to_string(per_stage.stage) : std::string()) +
              "</td><td class=\"num\">" +
              (first ? std::to_string(per_stage.num_ranks) : std::string()) + "</td><td>" + kind +
              "</td>";
      const std::array<std::pair<const char*, std::int64_t>, 3> vs = {
          {{"min", st.min}, {"median", st.median}, {"max", st.max}}};
      for (const auto& [stat, value] : vs) {
        html += "<td class=\"num\" data-stage=\"" + std::to_string(per_stage.stage) +
                "\" data-kind=\"" + kind + "\" data-stat=\"" + stat + "\" data-bytes=\"" +
                std::to_string(value) + "\">" + binary_bytes_text(value) + "</td>";
      }
      html += "</tr>\n";
    };
    for (std::size_t k = 0; k < kMemoryKinds; ++k)
      row(memory_kind_name(static_cast<MemoryKind>(k)), per_stage.kinds[k], k == 0);
    if (memory.activations_counted) {
      for (std::size_t k = 0; k < kStepKindNames.size(); ++k)
        row(kStepKindNames[k], per_stage.step[k], false);
    }
    row("total", per_stage.total, false);
  }
  html += "</tbody></table></div></details>\n";
  if (memory.activations_counted) {
    html +=
        "<table id=\"activations\"><caption>Activations per stage</caption><thead><tr><th "
        "scope=\"col\">stage</th><th scope=\"col\" class=\"num\">layers</th><th scope=\"col\" "
        "class=\"num\">per micro-batch</th><th scope=\"col\" class=\"num\">in flight</th><th "
        "scope=\"col\" class=\"num\">activations</th></tr></thead><tbody>\n";
    for (const StageActivations& sa : memory.stage_activations) {
      html += "<tr><td>" + std::to_string(sa.stage) + "</td><td class=\"num\">" +
              std::to_string(sa.layers) + "</td><td class=\"num\">" +
              binary_bytes_text(sa.per_microbatch_bytes) + "</td><td class=\"num\">" +
              std::to_string(sa.in_flight) + "</td><td class=\"num\" data-bytes=\"" +
              std::to_string(sa.bytes) + "\">" + binary_bytes_text(sa.bytes) + "</td></tr>\n";
    }
    html += "</tbody></table>\n";
  } else if (!memory.activations_note.empty()) {
    html += "<p>Activations: " + escape(memory.activations_note) + "</p>\n";
  }
  write_plan_memory(in, html);
  html += "</section>\n";
}

// One mesh as a grid: ranks row-major, the trailing axes as columns (at most 128 of them),
// filled by stage as runs of equal stage per row; peak ranks outlined.
void write_grid(const Plan& plan, const Mesh& mesh, const char* id, const MemoryReport* memory,
                std::string& html) {
  const std::size_t axes_count = mesh.axes.size();
  std::size_t split = axes_count;
  std::int64_t cols = 1;
  while (split > 0 && cols * mesh.axes[split - 1].size <= 128) cols *= mesh.axes[--split].size;
  // An axis that does not fit whole is cut: `inner` consecutive coordinates of it (the
  // largest divisor of its size keeping the row at most 128 ranks) go on one row.
  std::int64_t inner = 1;
  if (split > 0 && cols < 128) {
    const std::int64_t size = mesh.axes[split - 1].size;
    for (std::int64_t k = 128 / cols; k > 1; --k) {
      if (size % k == 0) {
        inner = k;
        break;
      }
    }
  }
  cols *= inner;
  std::string layout;
  if (cols == 1 && plan.world_size > 1) {  // an axis of a prime size above 128: wrap it
    cols = std::min<std::int64_t>(128, plan.world_size);
    layout = "ranks in order, " + std::to_string(cols) + " per row";
  } else {
    std::string rows_text, cols_text;
    for (std::size_t i = 0; i < axes_count; ++i) {
      const std::string axis = mesh.axes[i].name + " (" + std::to_string(mesh.axes[i].size) + ")";
      if (i + 1 == split && inner > 1) {
        rows_text += (rows_text.empty() ? "" : " × ") + axis + " / " + std::to_string(inner);
        cols_text += (cols_text.empty() ? "" : " × ") + std::to_string(inner) + " of " + axis;
        continue;
      }
      std::string& text = i < split ? rows_text : cols_text;
      text += (text.empty() ? "" : " × ") + axis;
    }
    layout = "rows: " + (rows_text.empty() ? std::string("one") : rows_text) +
             "; columns: " + (cols_text.empty() ? std::string("one") : cols_text);
  }
  const std::int64_t rows = (plan.world_size + cols - 1) / cols;
  const std::int64_t cell = std::clamp<std::int64_t>(960 / cols, 6, 22);
  const std::string sid(id);
  html += "<h3 id=\"" + sid + "-h\">" + (sid == "dense" ? "Dense mesh" : "Expert mesh") + ": " +
          escape(mesh_text(mesh)) + "</h3>\n<p>" + escape(layout) + "; rank = row × " +
          std::to_string(cols) + " + column. Colour: pipeline stage" +
          (memory ? "; outlined: peak-memory ranks" : "") + ". Click a rank to select it.</p>\n";
  html += "<div class=\"scroll\" tabindex=\"0\" role=\"region\" aria-label=\"" + sid +
          " mesh grid\"><svg class=\"grid\" id=\"grid-" + sid + "\" role=\"img\" aria-label=\"" +
          sid + " mesh: " + std::to_string(plan.world_size) + " ranks, " + escape(layout) +
          "\" data-cols=\"" + std::to_string(cols) + "\" data-cell=\"" + std::to_string(cell) +
          "\" width=\"" + std::to_string(cols * cell) + "\" height=\"" +
          std::to_string(rows * cell) + "\">\n<defs><pattern id=\"cells-" + sid + "\" width=\"" +
          std::to_string(cell) + "\" height=\"" + std::to_string(cell) +
          "\" patternUnits=\"userSpaceOnUse\"><path d=\"M " + std::to_string(cell) + " 0 L 0 0 0 " +
          std::to_string(cell) +
          "\" fill=\"none\" stroke=\"#fff\" stroke-width=\"1\"/></pattern></defs>\n";
  auto runs = [&](const std::function<std::optional<int>(std::int64_t)>& key,
                  const std::function<void(std::int64_t, std::int64_t, std::int64_t, int)>& emit) {
    for (std::int64_t r = 0; r < rows; ++r) {
      std::int64_t column = 0;
      while (column < cols && r * cols + column < plan.world_size) {
        const std::optional<int> k = key(r * cols + column);
        std::int64_t run_end = column + 1;
        while (run_end < cols && r * cols + run_end < plan.world_size &&
               key(r * cols + run_end) == k)
          ++run_end;
        if (k) emit(r, column, run_end, *k);
        column = run_end;
      }
    }
  };
  runs([&](std::int64_t rank) { return std::optional<int>(plan.stage_of_rank(rank)); },
       [&](std::int64_t row, std::int64_t first, std::int64_t end, int stage) {
         html += "<rect class=\"cell\" x=\"" + std::to_string(first * cell) + "\" y=\"" +
                 std::to_string(row * cell) + "\" width=\"" + std::to_string((end - first) * cell) +
                 "\" height=\"" + std::to_string(cell) + "\" fill=\"" +
                 report::stage_colour(stage) + "\" data-stage=\"" + std::to_string(stage) +
                 "\"/>\n";
       });
  html += "<rect width=\"" + std::to_string(cols * cell) + "\" height=\"" +
          std::to_string(rows * cell) + "\" fill=\"url(#cells-" + sid +
          ")\" pointer-events=\"none\"/>\n";
  if (memory) {
    runs(
        [&](std::int64_t rank) {
          return memory->peak_ranks.contains(rank) ? std::optional<int>(1) : std::nullopt;
        },
        [&](std::int64_t row, std::int64_t first, std::int64_t end, int) {
          html += "<rect class=\"peak\" x=\"" + std::to_string(first * cell + 1) + "\" y=\"" +
                  std::to_string(row * cell + 1) + "\" width=\"" +
                  std::to_string((end - first) * cell - 2) + "\" height=\"" +
                  std::to_string(cell - 2) +
                  "\" fill=\"none\" stroke=\"#b00020\" stroke-width=\"1\" "
                  "pointer-events=\"none\"/>\n";
        });
  }
  html += "<rect class=\"sel\" width=\"" + std::to_string(cell) + "\" height=\"" +
          std::to_string(cell) +
          "\" fill=\"none\" stroke=\"#000\" stroke-width=\"2.5\" visibility=\"hidden\" "
          "pointer-events=\"none\"/>\n</svg></div>\n";
}

void write_meshes(const PlanReportInput& in, std::string& html) {
  const Plan& plan = *in.plan;
  html +=
      "<section id=\"meshes\" aria-labelledby=\"meshes-h\">\n<h2 id=\"meshes-h\">Meshes</h2>\n"
      "<div class=\"legend\">";
  for (int s = 0; s < std::min(plan.num_stages, 64); ++s) {
    html += "<span><span class=\"sw\" style=\"background:" + report::stage_colour(s) +
            "\"></span>stage " + std::to_string(s) + "</span>";
  }
  html += "</div>\n";
  write_grid(plan, plan.dense, "dense", in.memory, html);
  if (plan.expert) write_grid(plan, *plan.expert, "expert", in.memory, html);
  html += "</section>\n";
}

// One embedded rank's params table and buffers; `hidden` until the script selects the rank
// (without memory classes there is no rank selection: every embedded rank is shown).
void write_rank_detail(const ReportRank& rr, bool hidden, std::string& html) {
  std::vector<const ReportRankParam*> rows;
  rows.reserve(rr.params.size());
  for (const ReportRankParam& param : rr.params) rows.push_back(&param);
  std::stable_sort(rows.begin(), rows.end(),
                   [](const ReportRankParam* one, const ReportRankParam* other) {
                     return one->bytes > other->bytes;
                   });
  std::int64_t total = 0;
  for (const ReportRankParam* listed : rows)
    total += listed->shares_storage_with ? 0 : listed->bytes;
  const std::string rank = std::to_string(rr.rank);
  html += "<div class=\"rank-detail\" data-rank=\"" + rank + (hidden ? "\" hidden>" : "\">") +
          "\n<div class=\"scroll\" "
          "tabindex=\"0\" role=\"region\" aria-label=\"params of rank " +
          rank + "\"><table class=\"rank-params\" data-rank=\"" + rank + "\" data-count=\"" +
          std::to_string(rows.size()) + "\" data-bytes=\"" + std::to_string(total) +
          "\"><caption>Params of rank " + rank + ": " + std::to_string(rows.size()) + ", " +
          binary_bytes_text(total) +
          " (local shapes, aliases sharing storage counted once; largest first" +
          (rows.size() > kMaxRankRows ? ", the first " + std::to_string(kMaxRankRows) + " listed"
                                      : std::string()) +
          ")</caption>\n<thead><tr><th scope=\"col\">param</th><th scope=\"col\">dtype</th><th "
          "scope=\"col\">global shape</th><th scope=\"col\">local shape</th><th scope=\"col\">"
          "global offset</th><th scope=\"col\">padded shape</th><th scope=\"col\" class=\"num\">"
          "bytes</th></tr></thead>\n<tbody>\n";
  std::int64_t rest = 0;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const ReportRankParam& row = *rows[i];
    if (i >= kMaxRankRows) {
      rest += row.shares_storage_with ? 0 : row.bytes;
      continue;
    }
    html += "<tr><td class=\"mono\">" + escape(row.name) +
            (row.shares_storage_with
                 ? " <em>(alias of " + escape(*row.shares_storage_with) + ", shared storage)</em>"
                 : std::string()) +
            "</td><td>" + escape(row.dtype) + "</td><td>" + shape_text(row.global_shape) +
            "</td><td>" + shape_text(row.local_shape) + "</td><td>" +
            shape_text(row.global_offset) + "</td><td>" + shape_text(row.padded_shape) +
            "</td><td class=\"num\" data-bytes=\"" + std::to_string(row.bytes) + "\">" +
            binary_bytes_text(row.bytes) + "</td></tr>\n";
  }
  if (rows.size() > kMaxRankRows) {
    html += "<tr><td colspan=\"6\">… and " + std::to_string(rows.size() - kMaxRankRows) +
            " more params</td><td class=\"num\">" + binary_bytes_text(rest) + "</td></tr>\n";
  }
  html += "</tbody></table></div>\n";
  if (!rr.buffers_text.empty()) {
    html += "<h3>Buffers of rank " + rank +
            " (FSDP2 units, muon groups, flat buffers)</h3>\n"
            "<pre class=\"rank-buffers\" tabindex=\"0\">" +
            escape(rr.buffers_text) + "</pre>\n";
  } else {
    html +=
        "<p>The recipe plans no buffer layouts (no FSDP2 units, muon groups or flat "
        "buffers).</p>\n";
  }
  html += "</div>\n";
}

void write_rank_section(const PlanReportInput& in, std::string& html) {
  const Plan& plan = *in.plan;
  html += "<section id=\"rank\" aria-labelledby=\"rank-h\">\n<h2 id=\"rank-h\">One rank</h2>\n";
  if (!in.memory) {
    html += "<p>No memory classes: rank selection is off.</p>\n";
  } else {
    html += "<p><label for=\"rank-input\">Rank (0 to " + std::to_string(plan.world_size - 1) +
            ")</label> <input id=\"rank-input\" type=\"number\" min=\"0\" max=\"" +
            std::to_string(plan.world_size - 1) +
            "\" step=\"1\"> <span id=\"rank-summary\" aria-live=\"polite\"></span></p>\n"
            "<table><caption>Memory of the selected rank</caption><thead><tr><th scope=\"col\">kind"
            "</th><th scope=\"col\" class=\"num\">bytes</th></tr></thead><tbody id=\"rank-memory\">"
            "</tbody></table>\n";
  }
  std::string listed;
  for (const ReportRank& rr : in.ranks)
    listed += (listed.empty() ? "" : ", ") + std::to_string(rr.rank);
  html += "<p id=\"rank-no-detail\">Params tables and buffers are in this page for ranks " +
          (listed.empty() ? std::string("none") : listed) +
          " (the peak rank and each stage's first rank unless <code>--ranks</code> says "
          "otherwise).</p>\n";
  for (const ReportRank& rr : in.ranks) write_rank_detail(rr, in.memory != nullptr, html);
  html += "</section>\n";
}

void write_largest(const PlanReportInput& in, std::string& html) {
  html +=
      "<section id=\"largest\" aria-labelledby=\"largest-h\">\n<h2 id=\"largest-h\">Largest "
      "params</h2>\n<div class=\"scroll\" tabindex=\"0\" role=\"region\" aria-label=\"largest "
      "params\"><table id=\"largest-params\"><caption>The " +
      std::to_string(in.largest.size()) + " largest of " + std::to_string(in.num_params) +
      " params (global bytes) and their placements</caption>\n<thead><tr><th scope=\"col\">"
      "param</th><th scope=\"col\">dtype</th><th scope=\"col\">global shape</th><th scope=\"col\""
      " class=\"num\">bytes</th><th scope=\"col\">mesh</th><th scope=\"col\">placements</th><th "
      "scope=\"col\">stage</th><th scope=\"col\">rule</th><th scope=\"col\" class=\"num\">shard "
      "classes</th></tr></thead>\n<tbody>\n";
  for (const ReportParam& param : in.largest) {
    html += "<tr><td class=\"mono\">" + escape(param.name) + "</td><td>" + escape(param.dtype) +
            "</td><td>" + shape_text(param.global_shape) + "</td><td class=\"num\" data-bytes=\"" +
            std::to_string(param.bytes) + "\">" + binary_bytes_text(param.bytes) + "</td><td>" +
            escape(param.mesh) + "</td><td class=\"mono\">" + escape(param.placements) +
            "</td><td>" + std::to_string(param.stage) + "</td><td class=\"mono\">" +
            escape(param.rule) + "</td><td class=\"num\">" + std::to_string(param.shard_classes) +
            "</td></tr>\n";
  }
  html += "</tbody></table></div>\n</section>\n";
}

// The source line of `loc` with a caret under its column, or empty.
std::string excerpt(const SourceMap& sources, const SourceLoc& loc) {
  if (loc.line <= 0) return {};
  const auto it = sources.find(loc.file.str());
  if (it == sources.end()) return {};
  const std::string& text = it->second;
  std::size_t start = 0;
  for (int l = 1; l < loc.line; ++l) {
    start = text.find('\n', start);
    if (start == std::string::npos) return {};
    ++start;
  }
  const std::size_t end = std::min(text.find('\n', start), text.size());
  std::string line = text.substr(start, std::min<std::size_t>(end - start, 400));
  const std::string number = std::to_string(loc.line);
  std::string out = number + " | " + line + "\n";
  if (loc.column > 0) {
    out += std::string(number.size(), ' ') + " | " +
           std::string(static_cast<std::size_t>(std::min(loc.column - 1, 400)), ' ') + "^";
  }
  return out;
}

void write_diagnostics(const PlanReportInput& in, std::string& html) {
  const DiagnosticSink& sink = *in.diagnostics;
  html +=
      "<section id=\"diagnostics\" aria-labelledby=\"diagnostics-h\">\n<h2 "
      "id=\"diagnostics-h\">Diagnostics</h2>\n<p>" +
      std::to_string(sink.error_count()) + " errors, " + std::to_string(sink.warning_count()) +
      " warnings" +
      (sink.dropped() ? " (" + std::to_string(sink.dropped()) + " not stored, over the limit)"
                      : std::string()) +
      ".</p>\n";
  for (const Diagnostic& diag : sink.items()) {
    const std::string where = diag.loc.file.empty()
                                  ? std::string("(no file)")
                                  : diag.loc.file.str() + ":" + std::to_string(diag.loc.line) +
                                        ":" + std::to_string(diag.loc.column);
    const std::string sev = severity_name(diag.severity);
    html += "<div class=\"diag " + sev + "\" data-code=\"" + std::string(code_name(diag.code)) +
            "\"><div><span class=\"mono loc\">" + escape(where) + "</span>: <strong>" + sev + "[" +
            std::string(code_name(diag.code)) + "]</strong>: " + escape(diag.message) + "</div>";
    const std::string ex = excerpt(*in.sources, diag.loc);
    if (!ex.empty()) html += "<pre tabindex=\"0\">" + escape(ex) + "</pre>";
    if (!diag.hint.empty()) html += "<div>hint: " + escape(diag.hint) + "</div>";
    html += "</div>\n";
  }
  html += "</section>\n";
}

void write_data(const PlanReportInput& in, std::string& html) {
  html += "<script type=\"application/json\" id=\"report-data\">";
  if (!in.plan || !in.memory) {
    html += "{\"world\":0}</script>\n";
    return;
  }
  const Plan& plan = *in.plan;
  const MemoryReport& memory = *in.memory;
  auto axes = [&](const Mesh& mesh) {
    std::string json = "[";
    for (std::size_t i = 0; i < mesh.axes.size(); ++i) {
      json += (i ? "," : "") + std::string("[") + report::json_string(mesh.axes[i].name) + "," +
              std::to_string(mesh.axes[i].size) + "]";
    }
    return json + "]";
  };
  html += "{\"world\":" + std::to_string(plan.world_size) + ",\"dense\":" + axes(plan.dense) +
          ",\"expert\":" + (plan.expert ? axes(*plan.expert) : std::string("null")) +
          ",\"kinds\":[";
  for (std::size_t k = 0; k < kMemoryKinds; ++k)
    html += (k ? ",\"" : "\"") + std::string(memory_kind_name(static_cast<MemoryKind>(k))) + "\"";
  if (memory.activations_counted) {
    for (const char* name : kStepKindNames) html += ",\"" + std::string(name) + "\"";
  }
  html += "],\"classes\":[";
  std::vector<std::int32_t> rank_class(static_cast<std::size_t>(plan.world_size), 0);
  for (std::size_t c = 0; c < memory.classes.size(); ++c) {
    const MemoryClass& mc = memory.classes[c];
    const RankMemory& rm = mc.memory;
    html +=
        (c ? ",{" : "{") + std::string("\"stage\":") + std::to_string(mc.stage) + ",\"bytes\":[";
    for (std::size_t k = 0; k < kMemoryKinds; ++k)
      html += (k ? "," : "") + std::to_string(rm.bytes[k]);
    if (memory.activations_counted) {
      for (std::int64_t bytes :
           {rm.activations, rm.fsdp2_reduce_scatter, rm.muon_grad_copy, rm.host})
        html += "," + std::to_string(bytes);
    }
    html += "],\"total\":" + std::to_string(rm.total) + "}";
    for (const Progression& run : mc.ranks.runs()) {
      for (std::int64_t i = 0; i < run.count; ++i)
        rank_class[static_cast<std::size_t>(run.start + i * run.stride)] =
            static_cast<std::int32_t>(c);
    }
  }
  html += "],\"rank_class\":[";
  for (std::size_t r = 0; r < rank_class.size(); ++r)
    html += (r ? "," : "") + std::to_string(rank_class[r]);
  html += "],\"initial_rank\":" +
          std::to_string(in.ranks.empty() ? memory.peak_ranks.first() : in.ranks.front().rank) +
          "}</script>\n";
}

}  // namespace

std::vector<ReportParam> largest_params(const Plan& plan) {
  auto global_bytes = [&](std::size_t i) {
    return numel_of(plan.params[i].global_shape) * element_size(plan.params[i].dtype);
  };
  const std::vector<std::size_t> order =
      report::largest_first(plan.params.size(), kMaxLargestParams, global_bytes);
  std::vector<ReportParam> rows;
  rows.reserve(order.size());
  for (std::size_t i = 0; i < order.size(); ++i) {
    const PlannedParam& param = plan.params[order[i]];
    const Mesh& mesh = plan.mesh_of(param);
    ReportParam row;
    row.name = param.name;
    row.dtype = dtype_name(param.dtype);
    row.global_shape = param.global_shape;
    row.bytes = global_bytes(order[i]);
    row.mesh = mesh_kind_name(param.mesh);
    for (std::size_t a = 0; a < param.placements.size() && a < mesh.axes.size(); ++a)
      row.placements += (a ? ", " : "") + mesh.axes[a].name + ": " + param.placements[a].label();
    row.stage = param.stage;
    row.rule = param.rule.match;
    row.shard_classes = static_cast<std::int64_t>(enumerate_shards(plan, param).size());
    rows.push_back(std::move(row));
  }
  return rows;
}

std::vector<ReportRankParam> rank_params(const Plan& plan, std::int64_t rank) {
  std::vector<ReportRankParam> rows;
  for (const PlannedParam& param : plan.params) {
    if (!plan.holds(rank, param)) continue;
    const ShardGeom geom = shard_at(param.geometry, mesh_coords(plan.mesh_of(param), rank));
    ReportRankParam row;
    row.name = param.name;
    row.dtype = dtype_name(param.dtype);
    row.global_shape = param.global_shape;
    row.local_shape = geom.local_shape;
    row.global_offset = geom.global_offset;
    row.padded_shape = geom.padded_shape;
    row.bytes = numel_of(geom.local_shape) * element_size(param.dtype);
    if (param.alias_of && plan.params[*param.alias_of].stage == param.stage)
      row.shares_storage_with = plan.params[*param.alias_of].name;
    rows.push_back(std::move(row));
  }
  return rows;
}

std::string render_plan_report_html(const PlanReportInput& in) {
  const std::string name = in.plan ? in.plan->model_name : in.title;
  std::string html = report::page_head("shardc report: " + name);
  html += "<h1>shardc report: " + escape(name) + "</h1>\n";
  if (in.plan) {
    write_summary(in, html);
    write_notes(in, html);
    write_memory(in, html);
    write_meshes(in, html);
    write_rank_section(in, html);
    write_largest(in, html);
  } else {
    html += "<p class=\"meta\">" + escape(in.title) +
            "</p>\n<p>The inputs were not planned: the diagnostics below say why.</p>\n";
  }
  write_diagnostics(in, html);
  write_data(in, html);
  html += report::page_tail();
  return html;
}

}  // namespace shardc
