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

std::int64_t numel_of(const Shape& s) {
  return std::accumulate(s.begin(), s.end(), std::int64_t{1},
                         [](std::int64_t a, std::int64_t b) { return a * b; });
}

std::string mesh_text(const Mesh& mesh) {
  std::string s;
  for (const MeshAxis& a : mesh.axes)
    s += (s.empty() ? "" : " × ") + a.name + "=" + std::to_string(a.size);
  return s;
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

void write_summary(const PlanReportInput& in, std::string& h) {
  const Plan& plan = *in.plan;
  h += "<p class=\"meta\">" + escape(in.title) + "</p>\n<table aria-label=\"plan summary\">\n";
  auto row = [&h](const std::string& key, const std::string& value, const std::string& id = {}) {
    h += "<tr><th scope=\"row\">" + key + "</th><td" + (id.empty() ? "" : " id=\"" + id + "\"") +
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
    const MemoryReport& m = *in.memory;
    row("peak memory", binary_bytes_text(m.peak) + " on rank(s) " +
                           escape(m.peak_ranks.to_string()) + " (stage " +
                           std::to_string(plan.stage_of_rank(m.peak_ranks.first())) + ", " +
                           escape(rank_coords_text(plan, m.peak_ranks.first())) + ")");
    if (in.budget) {
      row("budget",
          binary_bytes_text(*in.budget) +
              (m.peak <= *in.budget ? ": fits, headroom " + binary_bytes_text(*in.budget - m.peak)
                                    : ": exceeded by " + binary_bytes_text(m.peak - *in.budget)));
    }
  }
  h += "</table>\n";
}

// What the page's source does not hold (an OUTDIR), said once near the top.
void write_notes(const PlanReportInput& in, std::string& h) {
  if (in.notes.empty()) return;
  h += "<ul id=\"notes\" aria-label=\"what this page's source does not hold\">\n";
  for (const std::string& note : in.notes) h += "<li>" + escape(note) + "</li>\n";
  h += "</ul>\n";
}

// An OUTDIR's plan.json `summary.per_rank_memory`: the world's min / median / max per kind.
void write_plan_memory(const PlanReportInput& in, std::string& h) {
  if (!in.plan_memory) return;
  const readback::PlanMemory& pm = *in.plan_memory;
  h += "<table id=\"plan-memory\"><caption>Memory over all ranks, as plan.json's "
       "<code>summary.per_rank_memory</code> says it (not counted: " +
       escape(pm.not_counted) +
       ")</caption>\n<thead><tr><th scope=\"col\">kind</th><th scope=\"col\" class=\"num\">min"
       "</th><th scope=\"col\" class=\"num\">median</th><th scope=\"col\" class=\"num\">max</th>"
       "<th scope=\"col\">max on ranks</th></tr></thead>\n<tbody>\n";
  for (const auto& [kind, stat] : pm.kinds) {
    h += "<tr><td>" + escape(kind) + "</td>";
    const std::array<std::pair<const char*, std::int64_t>, 3> vs = {
        {{"min", stat.min}, {"median", stat.median}, {"max", stat.max}}};
    for (const auto& [name, value] : vs) {
      h += "<td class=\"num\" data-kind=\"" + escape(kind) + "\" data-stat=\"" + name +
           "\" data-bytes=\"" + std::to_string(value) + "\">" + binary_bytes_text(value) + "</td>";
    }
    h += "<td class=\"mono\">" + escape(stat.max_ranks) + "</td></tr>\n";
  }
  h += "</tbody></table>\n";
}

// The classes of `stage` ordered by total, and the classes at the lower median and the ends.
struct StageBars {
  int stage = 0;
  std::array<const MemoryClass*, 3> at{};  // min, median, max total
};

std::vector<StageBars> stage_bars(const Plan& plan, const MemoryReport& m) {
  std::vector<StageBars> out;
  for (int s = 0; s < plan.num_stages; ++s) {
    std::vector<const MemoryClass*> cs;
    std::int64_t count = 0;
    for (const MemoryClass& c : m.classes) {
      if (c.stage != s) continue;
      cs.push_back(&c);
      count += c.count;
    }
    if (cs.empty()) continue;
    std::stable_sort(cs.begin(), cs.end(), [](const MemoryClass* x, const MemoryClass* y) {
      return x->memory.total < y->memory.total;
    });
    StageBars b;
    b.stage = s;
    b.at[0] = cs.front();
    b.at[2] = cs.back();
    // The lower median, as stage_memory takes it: rank (count - 1) / 2 in total order.
    std::int64_t seen = 0;
    for (const MemoryClass* c : cs) {
      seen += c->count;
      if (seen > (count - 1) / 2) {
        b.at[1] = c;
        break;
      }
    }
    out.push_back(b);
  }
  return out;
}

void write_memory(const PlanReportInput& in, std::string& h) {
  const Plan& plan = *in.plan;
  h += "<section id=\"memory\" aria-labelledby=\"memory-h\">\n<h2 id=\"memory-h\">Memory per "
       "rank</h2>\n";
  if (!in.memory) {
    h += "<p>The memory classes were not formed for this plan (the diagnostics or the notes "
         "say why).</p>\n";
    write_plan_memory(in, h);
    h += "</section>\n";
    return;
  }
  const MemoryReport& m = *in.memory;
  const std::vector<StageBars> bars = stage_bars(plan, m);
  std::int64_t top = 1;
  for (const StageBars& b : bars) top = std::max(top, b.at[2]->memory.total);
  if (in.budget) top = std::max(top, *in.budget);
  // Bars narrow with the stage count, so a 16-stage chart fits the page's width.
  const int stages = std::max<int>(1, static_cast<int>(bars.size()));
  const int bar_w = std::clamp((900 / stages - 10) * 10 / 36, 5, 22), gap = std::max(1, bar_w / 5);
  const int group_gap = std::max(8, bar_w), chart_h = 240, left = 70;
  const int group_w = 3 * bar_w + 2 * gap;
  const int width = left + static_cast<int>(bars.size()) * (group_w + group_gap) + 10;
  const int height = chart_h + 50;
  h += "<p>Per pipeline stage, the ranks with the smallest, the median and the largest total "
       "(<code>shardc memory</code>'s figures: the memory classes of the memory engine). " +
       std::string(m.activations_counted
                       ? "Activations are counted (the recipe gives a training shape): the last "
                         "segment is the step peak, activations and buffers alive together."
                       : "Activations are not counted (no training shape in the recipe): the last "
                         "segment is the larger of the FSDP2 and muon all-gather buffers.") +
       "</p>\n<div class=\"legend\">";
  for (std::size_t k = 0; k < kBarKinds.size(); ++k) {
    h += "<span><span class=\"sw\" style=\"background:" + std::string(kBarColours[k]) +
         "\"></span>" + kBarKinds[k] + "</span>";
  }
  h += "</div>\n<div class=\"scroll\" tabindex=\"0\" role=\"region\" aria-label=\"memory chart\">"
       "<svg id=\"memory-chart\" role=\"img\" aria-label=\"stacked memory bars per stage: min, "
       "median and max rank\" width=\"" +
       std::to_string(width) + "\" height=\"" + std::to_string(height) + "\">\n";
  auto y_of = [&](std::int64_t bytes) {
    return static_cast<double>(chart_h) - static_cast<double>(chart_h - 10) *
                                              static_cast<double>(bytes) / static_cast<double>(top);
  };
  for (int t = 0; t <= 4; ++t) {
    const std::int64_t v = top / 4 * t;
    const double y = y_of(v);
    h += "<line x1=\"" + std::to_string(left - 4) + "\" x2=\"" + std::to_string(width) +
         "\" y1=\"" + std::to_string(y) + "\" y2=\"" + std::to_string(y) +
         "\" stroke=\"#ddd\"/><text x=\"2\" y=\"" + std::to_string(y + 4) + "\">" +
         escape(binary_bytes_text(v)) + "</text>\n";
  }
  if (in.budget) {
    const double y = y_of(*in.budget);
    h += "<line x1=\"" + std::to_string(left) + "\" x2=\"" + std::to_string(width) + "\" y1=\"" +
         std::to_string(y) + "\" y2=\"" + std::to_string(y) +
         "\" stroke=\"#b00020\" stroke-dasharray=\"4 3\"/><text x=\"" + std::to_string(left + 2) +
         "\" y=\"" + std::to_string(y - 3) + "\">budget " + binary_bytes_text(*in.budget) +
         "</text>\n";
  }
  const char* which[3] = {"min", "median", "max"};
  constexpr std::array<const char*, 3> kStatMarks = {"n", "m", "x"};
  int x = left;
  for (const StageBars& b : bars) {
    for (int i = 0; i < 3; ++i) {
      const MemoryClass& c = *b.at[static_cast<std::size_t>(i)];
      const auto seg = bar_segments(c.memory);
      std::int64_t base = 0;
      const int bx = x + i * (bar_w + gap);
      h += "<g class=\"bar\" data-stage=\"" + std::to_string(b.stage) + "\" data-stat=\"" +
           which[i] + "\" data-rank=\"" + std::to_string(c.ranks.first()) + "\" data-bytes=\"" +
           std::to_string(c.memory.total) + "\"><title>stage " + std::to_string(b.stage) + " " +
           which[i] + ": rank " + std::to_string(c.ranks.first()) + ", " +
           binary_bytes_text(c.memory.total) + "</title>";
      for (std::size_t k = 0; k < seg.size(); ++k) {
        if (seg[k] == 0) continue;
        const double y1 = y_of(base + seg[k]), y0 = y_of(base);
        h += "<rect x=\"" + std::to_string(bx) + "\" y=\"" + std::to_string(y1) + "\" width=\"" +
             std::to_string(bar_w) + "\" height=\"" + std::to_string(y0 - y1) + "\" fill=\"" +
             kBarColours[k] + "\"/>";
        base += seg[k];
      }
      if (bar_w >= 10) {
        h += "<text x=\"" + std::to_string(bx + 2) + "\" y=\"" + std::to_string(chart_h + 14) +
             "\">" + std::string(kStatMarks[static_cast<std::size_t>(i)]) + "</text>";
      }
      h += "</g>\n";
    }
    h += "<text x=\"" + std::to_string(x) + "\" y=\"" + std::to_string(chart_h + 30) + "\">" +
         (group_w >= 40 ? "stage " : "") + std::to_string(b.stage) + "</text>\n";
    x += group_w + group_gap;
  }
  h += "</svg></div>\n<p>n / m / x: min, median, max rank of the stage.</p>\n";
  // The peak, named.
  const std::int64_t pr = m.peak_ranks.first();
  h += "<p id=\"peak\" data-bytes=\"" + std::to_string(m.peak) + "\" data-ranks=\"" +
       escape(m.peak_ranks.to_string()) + "\" data-stage=\"" + std::to_string(m.peak_stage) +
       "\"><strong>Peak</strong>: " + binary_bytes_text(m.peak) + " on rank(s) " +
       escape(m.peak_ranks.to_string()) + "; rank " + std::to_string(pr) + " is stage " +
       std::to_string(plan.stage_of_rank(pr)) + ", " + escape(rank_coords_text(plan, pr)) +
       ".</p>\n";
  // The statistics table: stage_memory, as `memory --format json` prints it.
  h += "<details><summary>Memory per stage and kind: the table</summary>\n"
       "<div class=\"scroll\" tabindex=\"0\" role=\"region\" aria-label=\"memory table\">"
       "<table id=\"memory-table\"><caption>Memory per stage and kind (min / median / max over "
       "the stage's ranks)</caption>\n<thead><tr><th scope=\"col\">stage</th><th scope=\"col\" "
       "class=\"num\">ranks</th><th scope=\"col\">kind</th><th scope=\"col\" class=\"num\">min</th>"
       "<th scope=\"col\" class=\"num\">median</th><th scope=\"col\" class=\"num\">max</th></tr>"
       "</thead>\n<tbody>\n";
  for (const StageMemory& s : stage_memory(plan, m)) {
    auto row = [&](const std::string& kind, const KindStats& st, bool first) {
      h += "<tr><td>" + (first ? std::to_string(s.stage) : std::string()) +
           "</td><td class=\"num\">" + (first ? std::to_string(s.num_ranks) : std::string()) +
           "</td><td>" + kind + "</td>";
      const std::array<std::pair<const char*, std::int64_t>, 3> vs = {
          {{"min", st.min}, {"median", st.median}, {"max", st.max}}};
      for (const auto& [stat, v] : vs) {
        h += "<td class=\"num\" data-stage=\"" + std::to_string(s.stage) + "\" data-kind=\"" +
             kind + "\" data-stat=\"" + stat + "\" data-bytes=\"" + std::to_string(v) + "\">" +
             binary_bytes_text(v) + "</td>";
      }
      h += "</tr>\n";
    };
    for (std::size_t k = 0; k < kMemoryKinds; ++k)
      row(memory_kind_name(static_cast<MemoryKind>(k)), s.kinds[k], k == 0);
    if (m.activations_counted) {
      for (std::size_t k = 0; k < kStepKindNames.size(); ++k)
        row(kStepKindNames[k], s.step[k], false);
    }
    row("total", s.total, false);
  }
  h += "</tbody></table></div></details>\n";
  if (m.activations_counted) {
    h += "<table id=\"activations\"><caption>Activations per stage</caption><thead><tr><th "
         "scope=\"col\">stage</th><th scope=\"col\" class=\"num\">layers</th><th scope=\"col\" "
         "class=\"num\">per micro-batch</th><th scope=\"col\" class=\"num\">in flight</th><th "
         "scope=\"col\" class=\"num\">activations</th></tr></thead><tbody>\n";
    for (const StageActivations& sa : m.stage_activations) {
      h += "<tr><td>" + std::to_string(sa.stage) + "</td><td class=\"num\">" +
           std::to_string(sa.layers) + "</td><td class=\"num\">" +
           binary_bytes_text(sa.per_microbatch_bytes) + "</td><td class=\"num\">" +
           std::to_string(sa.in_flight) + "</td><td class=\"num\" data-bytes=\"" +
           std::to_string(sa.bytes) + "\">" + binary_bytes_text(sa.bytes) + "</td></tr>\n";
    }
    h += "</tbody></table>\n";
  } else if (!m.activations_note.empty()) {
    h += "<p>Activations: " + escape(m.activations_note) + "</p>\n";
  }
  write_plan_memory(in, h);
  h += "</section>\n";
}

// One mesh as a grid: ranks row-major, the trailing axes as columns (at most 128 of them),
// filled by stage as runs of equal stage per row; peak ranks outlined.
void write_grid(const Plan& plan, const Mesh& mesh, const char* id, const MemoryReport* memory,
                std::string& h) {
  const std::size_t n = mesh.axes.size();
  std::size_t split = n;
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
    for (std::size_t i = 0; i < n; ++i) {
      const std::string axis = mesh.axes[i].name + " (" + std::to_string(mesh.axes[i].size) + ")";
      if (i + 1 == split && inner > 1) {
        rows_text += (rows_text.empty() ? "" : " × ") + axis + " / " + std::to_string(inner);
        cols_text += (cols_text.empty() ? "" : " × ") + std::to_string(inner) + " of " + axis;
        continue;
      }
      std::string& t = i < split ? rows_text : cols_text;
      t += (t.empty() ? "" : " × ") + axis;
    }
    layout = "rows: " + (rows_text.empty() ? std::string("one") : rows_text) +
             "; columns: " + (cols_text.empty() ? std::string("one") : cols_text);
  }
  const std::int64_t rows = (plan.world_size + cols - 1) / cols;
  const std::int64_t cell = std::clamp<std::int64_t>(960 / cols, 6, 22);
  const std::string sid(id);
  h += "<h3 id=\"" + sid + "-h\">" + (sid == "dense" ? "Dense mesh" : "Expert mesh") + ": " +
       escape(mesh_text(mesh)) + "</h3>\n<p>" + escape(layout) + "; rank = row × " +
       std::to_string(cols) + " + column. Colour: pipeline stage" +
       (memory ? "; outlined: peak-memory ranks" : "") + ". Click a rank to select it.</p>\n";
  h += "<div class=\"scroll\" tabindex=\"0\" role=\"region\" aria-label=\"" + sid +
       " mesh grid\"><svg class=\"grid\" id=\"grid-" + sid + "\" role=\"img\" aria-label=\"" + sid +
       " mesh: " + std::to_string(plan.world_size) + " ranks, " + escape(layout) +
       "\" data-cols=\"" + std::to_string(cols) + "\" data-cell=\"" + std::to_string(cell) +
       "\" width=\"" + std::to_string(cols * cell) + "\" height=\"" + std::to_string(rows * cell) +
       "\">\n<defs><pattern id=\"cells-" + sid + "\" width=\"" + std::to_string(cell) +
       "\" height=\"" + std::to_string(cell) + "\" patternUnits=\"userSpaceOnUse\"><path d=\"M " +
       std::to_string(cell) + " 0 L 0 0 0 " + std::to_string(cell) +
       "\" fill=\"none\" stroke=\"#fff\" stroke-width=\"1\"/></pattern></defs>\n";
  auto runs = [&](const std::function<std::optional<int>(std::int64_t)>& key,
                  const std::function<void(std::int64_t, std::int64_t, std::int64_t, int)>& emit) {
    for (std::int64_t r = 0; r < rows; ++r) {
      std::int64_t c = 0;
      while (c < cols && r * cols + c < plan.world_size) {
        const std::optional<int> k = key(r * cols + c);
        std::int64_t e = c + 1;
        while (e < cols && r * cols + e < plan.world_size && key(r * cols + e) == k) ++e;
        if (k) emit(r, c, e, *k);
        c = e;
      }
    }
  };
  runs([&](std::int64_t rank) { return std::optional<int>(plan.stage_of_rank(rank)); },
       [&](std::int64_t r, std::int64_t c, std::int64_t e, int stage) {
         h += "<rect class=\"cell\" x=\"" + std::to_string(c * cell) + "\" y=\"" +
              std::to_string(r * cell) + "\" width=\"" + std::to_string((e - c) * cell) +
              "\" height=\"" + std::to_string(cell) + "\" fill=\"" + report::stage_colour(stage) +
              "\" data-stage=\"" + std::to_string(stage) + "\"/>\n";
       });
  h += "<rect width=\"" + std::to_string(cols * cell) + "\" height=\"" +
       std::to_string(rows * cell) + "\" fill=\"url(#cells-" + sid +
       ")\" pointer-events=\"none\"/>\n";
  if (memory) {
    runs(
        [&](std::int64_t rank) {
          return memory->peak_ranks.contains(rank) ? std::optional<int>(1) : std::nullopt;
        },
        [&](std::int64_t r, std::int64_t c, std::int64_t e, int) {
          h += "<rect class=\"peak\" x=\"" + std::to_string(c * cell + 1) + "\" y=\"" +
               std::to_string(r * cell + 1) + "\" width=\"" + std::to_string((e - c) * cell - 2) +
               "\" height=\"" + std::to_string(cell - 2) +
               "\" fill=\"none\" stroke=\"#b00020\" stroke-width=\"1\" "
               "pointer-events=\"none\"/>\n";
        });
  }
  h += "<rect class=\"sel\" width=\"" + std::to_string(cell) + "\" height=\"" +
       std::to_string(cell) +
       "\" fill=\"none\" stroke=\"#000\" stroke-width=\"2.5\" visibility=\"hidden\" "
       "pointer-events=\"none\"/>\n</svg></div>\n";
}

void write_meshes(const PlanReportInput& in, std::string& h) {
  const Plan& plan = *in.plan;
  h += "<section id=\"meshes\" aria-labelledby=\"meshes-h\">\n<h2 id=\"meshes-h\">Meshes</h2>\n"
       "<div class=\"legend\">";
  for (int s = 0; s < std::min(plan.num_stages, 64); ++s) {
    h += "<span><span class=\"sw\" style=\"background:" + report::stage_colour(s) +
         "\"></span>stage " + std::to_string(s) + "</span>";
  }
  h += "</div>\n";
  write_grid(plan, plan.dense, "dense", in.memory, h);
  if (plan.expert) write_grid(plan, *plan.expert, "expert", in.memory, h);
  h += "</section>\n";
}

// One embedded rank's params table and buffers; `hidden` until the script selects the rank
// (without memory classes there is no rank selection: every embedded rank is shown).
void write_rank_detail(const ReportRank& rr, bool hidden, std::string& h) {
  std::vector<const ReportRankParam*> rows;
  rows.reserve(rr.params.size());
  for (const ReportRankParam& p : rr.params) rows.push_back(&p);
  std::stable_sort(rows.begin(), rows.end(),
                   [](const ReportRankParam* one, const ReportRankParam* other) {
                     return one->bytes > other->bytes;
                   });
  std::int64_t total = 0;
  for (const ReportRankParam* r : rows) total += r->shares_storage_with ? 0 : r->bytes;
  const std::string rank = std::to_string(rr.rank);
  h += "<div class=\"rank-detail\" data-rank=\"" + rank + (hidden ? "\" hidden>" : "\">") +
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
    const ReportRankParam& r = *rows[i];
    if (i >= kMaxRankRows) {
      rest += r.shares_storage_with ? 0 : r.bytes;
      continue;
    }
    h += "<tr><td class=\"mono\">" + escape(r.name) +
         (r.shares_storage_with
              ? " <em>(alias of " + escape(*r.shares_storage_with) + ", shared storage)</em>"
              : std::string()) +
         "</td><td>" + escape(r.dtype) + "</td><td>" + shape_text(r.global_shape) + "</td><td>" +
         shape_text(r.local_shape) + "</td><td>" + shape_text(r.global_offset) + "</td><td>" +
         shape_text(r.padded_shape) + "</td><td class=\"num\" data-bytes=\"" +
         std::to_string(r.bytes) + "\">" + binary_bytes_text(r.bytes) + "</td></tr>\n";
  }
  if (rows.size() > kMaxRankRows) {
    h += "<tr><td colspan=\"6\">… and " + std::to_string(rows.size() - kMaxRankRows) +
         " more params</td><td class=\"num\">" + binary_bytes_text(rest) + "</td></tr>\n";
  }
  h += "</tbody></table></div>\n";
  if (!rr.buffers_text.empty()) {
    h += "<h3>Buffers of rank " + rank +
         " (FSDP2 units, muon groups, flat buffers)</h3>\n"
         "<pre class=\"rank-buffers\" tabindex=\"0\">" +
         escape(rr.buffers_text) + "</pre>\n";
  } else {
    h += "<p>The recipe plans no buffer layouts (no FSDP2 units, muon groups or flat "
         "buffers).</p>\n";
  }
  h += "</div>\n";
}

void write_rank_section(const PlanReportInput& in, std::string& h) {
  const Plan& plan = *in.plan;
  h += "<section id=\"rank\" aria-labelledby=\"rank-h\">\n<h2 id=\"rank-h\">One rank</h2>\n";
  if (!in.memory) {
    h += "<p>No memory classes: rank selection is off.</p>\n";
  } else {
    h += "<p><label for=\"rank-input\">Rank (0 to " + std::to_string(plan.world_size - 1) +
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
  h += "<p id=\"rank-no-detail\">Params tables and buffers are in this page for ranks " +
       (listed.empty() ? std::string("none") : listed) +
       " (the peak rank and each stage's first rank unless <code>--ranks</code> says "
       "otherwise).</p>\n";
  for (const ReportRank& rr : in.ranks) write_rank_detail(rr, in.memory != nullptr, h);
  h += "</section>\n";
}

void write_largest(const PlanReportInput& in, std::string& h) {
  h += "<section id=\"largest\" aria-labelledby=\"largest-h\">\n<h2 id=\"largest-h\">Largest "
       "params</h2>\n<div class=\"scroll\" tabindex=\"0\" role=\"region\" aria-label=\"largest "
       "params\"><table id=\"largest-params\"><caption>The " +
       std::to_string(in.largest.size()) + " largest of " + std::to_string(in.num_params) +
       " params (global bytes) and their placements</caption>\n<thead><tr><th scope=\"col\">"
       "param</th><th scope=\"col\">dtype</th><th scope=\"col\">global shape</th><th scope=\"col\""
       " class=\"num\">bytes</th><th scope=\"col\">mesh</th><th scope=\"col\">placements</th><th "
       "scope=\"col\">stage</th><th scope=\"col\">rule</th><th scope=\"col\" class=\"num\">shard "
       "classes</th></tr></thead>\n<tbody>\n";
  for (const ReportParam& p : in.largest) {
    h += "<tr><td class=\"mono\">" + escape(p.name) + "</td><td>" + escape(p.dtype) + "</td><td>" +
         shape_text(p.global_shape) + "</td><td class=\"num\" data-bytes=\"" +
         std::to_string(p.bytes) + "\">" + binary_bytes_text(p.bytes) + "</td><td>" +
         escape(p.mesh) + "</td><td class=\"mono\">" + escape(p.placements) + "</td><td>" +
         std::to_string(p.stage) + "</td><td class=\"mono\">" + escape(p.rule) +
         "</td><td class=\"num\">" + std::to_string(p.shard_classes) + "</td></tr>\n";
  }
  h += "</tbody></table></div>\n</section>\n";
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

void write_diagnostics(const PlanReportInput& in, std::string& h) {
  const DiagnosticSink& sink = *in.diagnostics;
  h += "<section id=\"diagnostics\" aria-labelledby=\"diagnostics-h\">\n<h2 "
       "id=\"diagnostics-h\">Diagnostics</h2>\n<p>" +
       std::to_string(sink.error_count()) + " errors, " + std::to_string(sink.warning_count()) +
       " warnings" +
       (sink.dropped() ? " (" + std::to_string(sink.dropped()) + " not stored, over the limit)"
                       : std::string()) +
       ".</p>\n";
  for (const Diagnostic& d : sink.items()) {
    const std::string where = d.loc.file.empty()
                                  ? std::string("(no file)")
                                  : d.loc.file.str() + ":" + std::to_string(d.loc.line) + ":" +
                                        std::to_string(d.loc.column);
    const std::string sev = severity_name(d.severity);
    h += "<div class=\"diag " + sev + "\" data-code=\"" + std::string(code_name(d.code)) +
         "\"><div><span class=\"mono loc\">" + escape(where) + "</span>: <strong>" + sev + "[" +
         std::string(code_name(d.code)) + "]</strong>: " + escape(d.message) + "</div>";
    const std::string ex = excerpt(*in.sources, d.loc);
    if (!ex.empty()) h += "<pre tabindex=\"0\">" + escape(ex) + "</pre>";
    if (!d.hint.empty()) h += "<div>hint: " + escape(d.hint) + "</div>";
    h += "</div>\n";
  }
  h += "</section>\n";
}

void write_data(const PlanReportInput& in, std::string& h) {
  h += "<script type=\"application/json\" id=\"report-data\">";
  if (!in.plan || !in.memory) {
    h += "{\"world\":0}</script>\n";
    return;
  }
  const Plan& plan = *in.plan;
  const MemoryReport& m = *in.memory;
  auto axes = [&](const Mesh& mesh) {
    std::string s = "[";
    for (std::size_t i = 0; i < mesh.axes.size(); ++i) {
      s += (i ? "," : "") + std::string("[") + report::json_string(mesh.axes[i].name) + "," +
           std::to_string(mesh.axes[i].size) + "]";
    }
    return s + "]";
  };
  h += "{\"world\":" + std::to_string(plan.world_size) + ",\"dense\":" + axes(plan.dense) +
       ",\"expert\":" + (plan.expert ? axes(*plan.expert) : std::string("null")) + ",\"kinds\":[";
  for (std::size_t k = 0; k < kMemoryKinds; ++k)
    h += (k ? ",\"" : "\"") + std::string(memory_kind_name(static_cast<MemoryKind>(k))) + "\"";
  if (m.activations_counted) {
    for (const char* name : kStepKindNames) h += ",\"" + std::string(name) + "\"";
  }
  h += "],\"classes\":[";
  std::vector<std::int32_t> rank_class(static_cast<std::size_t>(plan.world_size), 0);
  for (std::size_t c = 0; c < m.classes.size(); ++c) {
    const MemoryClass& mc = m.classes[c];
    const RankMemory& rm = mc.memory;
    h += (c ? ",{" : "{") + std::string("\"stage\":") + std::to_string(mc.stage) + ",\"bytes\":[";
    for (std::size_t k = 0; k < kMemoryKinds; ++k)
      h += (k ? "," : "") + std::to_string(rm.bytes[k]);
    if (m.activations_counted) {
      for (std::int64_t v : {rm.activations, rm.fsdp2_reduce_scatter, rm.muon_grad_copy, rm.host})
        h += "," + std::to_string(v);
    }
    h += "],\"total\":" + std::to_string(rm.total) + "}";
    for (const Progression& run : mc.ranks.runs()) {
      for (std::int64_t i = 0; i < run.count; ++i)
        rank_class[static_cast<std::size_t>(run.start + i * run.stride)] =
            static_cast<std::int32_t>(c);
    }
  }
  h += "],\"rank_class\":[";
  for (std::size_t r = 0; r < rank_class.size(); ++r)
    h += (r ? "," : "") + std::to_string(rank_class[r]);
  h += "],\"initial_rank\":" +
       std::to_string(in.ranks.empty() ? m.peak_ranks.first() : in.ranks.front().rank) +
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
    const PlannedParam& p = plan.params[order[i]];
    const Mesh& mesh = plan.mesh_of(p);
    ReportParam row;
    row.name = p.name;
    row.dtype = dtype_name(p.dtype);
    row.global_shape = p.global_shape;
    row.bytes = global_bytes(order[i]);
    row.mesh = mesh_kind_name(p.mesh);
    for (std::size_t a = 0; a < p.placements.size() && a < mesh.axes.size(); ++a)
      row.placements += (a ? ", " : "") + mesh.axes[a].name + ": " + p.placements[a].label();
    row.stage = p.stage;
    row.rule = p.rule.match;
    row.shard_classes = static_cast<std::int64_t>(enumerate_shards(plan, p).size());
    rows.push_back(std::move(row));
  }
  return rows;
}

std::vector<ReportRankParam> rank_params(const Plan& plan, std::int64_t rank) {
  std::vector<ReportRankParam> rows;
  for (const PlannedParam& p : plan.params) {
    if (!plan.holds(rank, p)) continue;
    const ShardGeom geom = shard_at(p.geometry, mesh_coords(plan.mesh_of(p), rank));
    ReportRankParam row;
    row.name = p.name;
    row.dtype = dtype_name(p.dtype);
    row.global_shape = p.global_shape;
    row.local_shape = geom.local_shape;
    row.global_offset = geom.global_offset;
    row.padded_shape = geom.padded_shape;
    row.bytes = numel_of(geom.local_shape) * element_size(p.dtype);
    if (p.alias_of && plan.params[*p.alias_of].stage == p.stage)
      row.shares_storage_with = plan.params[*p.alias_of].name;
    rows.push_back(std::move(row));
  }
  return rows;
}

std::string render_plan_report_html(const PlanReportInput& in) {
  const std::string name = in.plan ? in.plan->model_name : in.title;
  std::string h = report::page_head("shardc report: " + name);
  h += "<h1>shardc report: " + escape(name) + "</h1>\n";
  if (in.plan) {
    write_summary(in, h);
    write_notes(in, h);
    write_memory(in, h);
    write_meshes(in, h);
    write_rank_section(in, h);
    write_largest(in, h);
  } else {
    h += "<p class=\"meta\">" + escape(in.title) +
         "</p>\n<p>The inputs were not planned: the diagnostics below say why.</p>\n";
  }
  write_diagnostics(in, h);
  write_data(in, h);
  h += report::page_tail();
  return h;
}

}  // namespace shardc
