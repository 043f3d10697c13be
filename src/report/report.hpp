// `shardc report`: one self-contained HTML page of a plan or a reshard (src/report).
//
// The page is a pure function of what the JSON outputs are made of: the Plan, the memory
// engine's classes (`memory_classes`, the figures of `memory --format json`), the planned
// buffers, the diagnostics sink and the reshard planner's result. Nothing on the page is
// re-computed in the browser: the inline script only shows and hides what the renderer wrote
// (and formats bytes it was given). No network, no external resource: inline CSS, inline SVG,
// one small inline script, data as JSON in a `<script type="application/json">` element.
//
// Size is bounded for any legal world up to limits::kMaxMemoryReportWorld: per memory class
// (not per rank) for memory, one small integer per rank (its memory class), mesh grids drawn
// as runs of equal stage per row, at most kMaxDetailRanks ranks with a params table of at
// most kMaxRankRows rows each, kMaxLargestParams params in the largest-params table, and a
// reshard heatmap of at most kMaxHeatmapGroups x kMaxHeatmapGroups rank groups.
//
// Every text from the inputs (param names, axis names, file paths, messages) is escaped:
// a param named `<script>` renders as text (tests/browser).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "backend/backend.hpp"
#include "core/diagnostics.hpp"
#include "core/plan.hpp"
#include "memory/memory.hpp"
#include "reshard/reshard.hpp"

namespace shardc {

/// Ranks whose params table a page embeds at most (`report --ranks`).
inline constexpr std::size_t kMaxDetailRanks = 64;
/// Rows of one rank's params table (largest first; the rest summed on one line).
inline constexpr std::size_t kMaxRankRows = 200;
/// Rows of the largest-params table.
inline constexpr std::size_t kMaxLargestParams = 25;
/// Source and destination rank groups of the reshard heatmap, at most, per side.
inline constexpr std::int64_t kMaxHeatmapGroups = 32;

/// One rank whose details the page embeds.
struct ReportRank {
  std::int64_t rank = 0;
  /// Its buffer layouts as `shardc inspect --rank` prints them (FSDP2 units, muon groups,
  /// flat optimizer buffers); empty when the recipe plans none.
  std::string buffers_text;
};

struct PlanReportInput {
  std::string title;           ///< "MODEL + RECIPE" as given
  const Plan* plan = nullptr;  ///< null: planning failed (the page shows the diagnostics only)
  /// The memory classes (`memory_classes`); null when they could not be formed (the
  /// diagnostics say why).
  const MemoryReport* memory = nullptr;
  std::optional<std::int64_t> budget;  ///< the budget that applied, bytes
  std::vector<ReportRank> ranks;       ///< at most kMaxDetailRanks, each < world size
  const DiagnosticSink* diagnostics = nullptr;
  const SourceMap* sources = nullptr;  ///< for the diagnostics' source lines
};

/// The page of one plan. Precondition: `diagnostics` and `sources` set; `ranks` within the world.
std::string render_plan_report_html(const PlanReportInput& in);

struct ReshardReportInput {
  const reshard::Layout* a = nullptr;
  const reshard::Layout* b = nullptr;
  const reshard::Result* result = nullptr;
  reshard::Options options;
};

/// The page of a reshard: totals, per-rank destination / moved / in-place statistics, and a
/// heatmap of the bytes each destination rank group reads from each source rank group
/// (groups of consecutive ranks: nodes with --ranks-per-node when they fit in
/// kMaxHeatmapGroups, else ceil(world / kMaxHeatmapGroups) ranks). In-place reads count on
/// the diagonal cell of their rank, as "in place", not as moved. Cost O(reads of every B rank).
std::string render_reshard_report_html(const ReshardReportInput& in);

}  // namespace shardc
