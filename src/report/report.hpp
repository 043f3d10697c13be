// `shardc report`: one self-contained HTML page of a plan (MODEL RECIPE or a compiled OUTDIR),
// a reshard or a layout search (src/report).
//
// The page is a pure function of what the JSON outputs are made of: the Plan, the memory
// engine's classes (`memory_classes`, the figures of `memory --format json`), the planned
// buffers, the diagnostics sink, the reshard planner's result and the search result; for an
// OUTDIR, what src/outputs reads back of plan.json and the rank files (written from those). Nothing
// on the page is re-computed in the browser: the inline script only shows and hides what the
// renderer wrote (and formats bytes it was given). No network, no external resource: inline CSS,
// inline SVG, one small inline script, data as JSON in a `<script type="application/json">`
// element.
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
#include <string_view>
#include <vector>

#include "backend/backend.hpp"
#include "core/diagnostics.hpp"
#include "core/plan.hpp"
#include "memory/memory.hpp"
#include "outputs/readback.hpp"
#include "reshard/reshard.hpp"
#include "search/search.hpp"

namespace shardc {

/// Ranks whose params table a page embeds at most (`report --ranks`).
inline constexpr std::size_t kMaxDetailRanks = 64;
/// Rows of one rank's params table (largest first; the rest summed on one line).
inline constexpr std::size_t kMaxRankRows = 200;
/// Rows of the largest-params table.
inline constexpr std::size_t kMaxLargestParams = 25;
/// Source and destination rank groups of the reshard heatmap, at most, per side.
inline constexpr std::int64_t kMaxHeatmapGroups = 32;

/// One row of the largest-params table.
struct ReportParam {
  std::string name;
  std::string dtype;
  Shape global_shape;
  std::int64_t bytes = 0;  ///< global bytes
  std::string mesh;        ///< "dense" / "expert"
  std::string placements;  ///< one `axis: label` per mesh axis, ", "-separated
  int stage = 0;
  std::string rule;  ///< the rule's (or experts entry's) `match`
  std::int64_t shard_classes = 0;
};

/// One row of a rank's params table.
struct ReportRankParam {
  std::string name;
  std::string dtype;
  Shape global_shape;
  Shape local_shape;
  Shape global_offset;
  Shape padded_shape;
  std::int64_t bytes = 0;  ///< bytes of local_shape
  /// An alias on its source's stage: the source (shared storage, counted once); else nullopt.
  std::optional<std::string> shares_storage_with;
};

/// One rank whose details the page embeds.
struct ReportRank {
  std::int64_t rank = 0;
  std::vector<ReportRankParam> params;  ///< every param the rank holds (the page sorts them)
  /// Its buffer layouts as text (MODEL RECIPE: as `shardc inspect --rank` prints them; an
  /// OUTDIR: a summary of its rank file's `buffers`); empty when the recipe plans none.
  std::string buffers_text;
};

struct PlanReportInput {
  std::string title;  ///< "MODEL + RECIPE" as given, or the OUTDIR
  /// The plan's world, meshes, pipeline stages and model name (the page reads nothing else of
  /// it: params come as rows below). null: planning failed (the page shows the diagnostics
  /// only). For an OUTDIR, `plan_outline` of its plan.json (no params).
  const Plan* plan = nullptr;
  std::int64_t num_params = 0;
  std::vector<ReportParam> largest;  ///< at most kMaxLargestParams, largest first
  /// The memory classes (`memory_classes`, or `memory_of_rank_files` for an OUTDIR); null
  /// when they could not be formed (the diagnostics or `notes` say why).
  const MemoryReport* memory = nullptr;
  std::optional<std::int64_t> budget;  ///< the budget that applied, bytes
  std::vector<ReportRank> ranks;       ///< at most kMaxDetailRanks, each < world size
  const DiagnosticSink* diagnostics = nullptr;
  const SourceMap* sources = nullptr;  ///< for the diagnostics' source lines
  /// What the page's source does not hold, stated on the page (an OUTDIR: no source lines,
  /// no budget unless --budget); empty for MODEL RECIPE.
  std::vector<std::string> notes;
  /// An OUTDIR's plan.json `summary.per_rank_memory` (the world's min / median / max per
  /// kind), shown as its own table; null for MODEL RECIPE.
  const readback::PlanMemory* plan_memory = nullptr;
};

/// The largest-params rows of a plan (by global bytes, model order on ties).
std::vector<ReportParam> largest_params(const Plan& plan);
/// The params table of one rank of a plan (`shard_at` at its coordinates).
std::vector<ReportRankParam> rank_params(const Plan& plan, std::int64_t rank);

/// What a compiled OUTDIR holds, as page inputs (src/report/outdir_report.cpp): the plan's
/// world, meshes and stages from plan.json (a Plan without params: `num_stages`,
/// `pipeline_axis`, `virtual_stages`, `model_name` and the meshes set).
Plan plan_outline(const readback::PlanFile& plan);
/// Memory classes of every rank's file (`files` ascending by rank, one per rank of the world):
/// ranks of one stage with equal figures form a class, as `memory_classes` forms them, and
/// peak, peak ranks and stage follow; `activations` (plan.json's) fill `stage_activations`.
MemoryReport memory_of_rank_files(const std::vector<readback::RankMemoryFile>& files,
                                  const std::vector<readback::PlanStageActivations>& activations);
/// The largest-params rows of plan.json's params (as `largest_params` of the Plan).
std::vector<ReportParam> largest_params(const readback::PlanFile& plan);
/// The params table and a buffers summary of one rank file.
ReportRank report_rank(const readback::RankFile& file);

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

/// A layout search (`shardc search ... --report page.html`): the request's figures and the
/// result, the same structs `search --format json` is written from.
struct SearchReportInput {
  std::string model;  ///< the model's name
  std::string rules;  ///< the rule set's path
  std::int64_t world = 1;
  std::int64_t budget = 0;  ///< bytes
  const Hardware* hardware = nullptr;
  std::int64_t seq_len = 0;
  std::int64_t micro_batch_size = 1;
  std::int64_t global_batch_size = 0;  ///< sequences
  std::string optimizer;
  /// The training dtypes the text's training line names: "master weights float32, grads
  /// bfloat16" (grads only when the --training file sets them).
  std::string dtypes;
  const SearchResult* result = nullptr;
};

/// The page of a search: the ranked layouts (peak memory, headroom against the budget, step
/// time, tokens/s/GPU, MFU, the dominant term), one stacked bar per ranked layout of its step
/// terms (compute, recompute, bubble, each axis's exposed communication, optimizer), the
/// layouts planned but not ranked (invalid: their first code; over the budget), and the
/// layouts pruned before planning, counted per reason. Nothing is computed in the browser.
std::string render_search_report_html(const SearchReportInput& in);

}  // namespace shardc
