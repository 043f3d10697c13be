// W-BALANCE (issue 27 item 4): layouts that leave ranks idle or lopsided.
//
//  * only padding: a param some of whose ranks hold padded rows and no real
//    ones (FSDP on dim 0 of a [16, ...] expert tensor over 32 ranks: FSDP2
//    pads dim 0 to 32 rows, ranks 16..31 of the FSDP group hold one padding
//    row each; torch/distributed/fsdp/_fully_shard/_fsdp_param.py pads the
//    dim-0 chunk of every rank to ceil(extent / degree) rows);
//  * lopsided stage: on one pipeline stage, the rank holding the most
//    parameter bytes (allocated, padding included) or optimizer-state
//    elements (the real elements of trainable params: Adam's moments and
//    master weights are allocated per local element) holds more than
//    kImbalance times what the least-loaded rank holds.
//
// Params under kMinElements (2^20) are not reported for padding, nor stage
// gaps under 2^20 bytes / elements: routers and norms over many ranks would
// otherwise warn on every MoE plan for what is noise.
//
// Both name the param (for a stage, the one whose two pieces differ most
// between those ranks), the dim, its degree, and a better `expert_dim` or a
// degree that divides the extent. Costs are per shard class (enumerate
// shards, rank_sums) plus O(params) for the stage's culprit, never
// ranks x params.
#include <algorithm>
#include <string>
#include <vector>

#include "core/shard_classes.hpp"
#include "planner/passes.hpp"
#include "support/limits.hpp"

namespace shardc::passes {
namespace {

constexpr std::int64_t kImbalance = 2;
/// Params under this many elements are not reported for padding-only ranks
/// (a router [16, 5120], a norm: what idle ranks miss of them is noise), and
/// a stage gap under this many bytes / elements is not a lopsided stage.
constexpr std::int64_t kMinElements = std::int64_t{1} << 20;
/// Bounds on hostile meshes: a param with more shard classes is not checked
/// for padding, and a world above the memory report's limit (2^20 ranks) has
/// no per-rank stage check (rank_sums keeps a row per rank).
constexpr std::int64_t kMaxClasses = std::int64_t{1} << 16;

// "dp_shard 32" / "efsdp x ep (16)": the axes of a dim's splits.
std::string chain_text(const std::vector<DimSplit>& chain, const Mesh& mesh, bool fsdp_only) {
  std::string names;
  std::int64_t ways = 1;
  for (const DimSplit& split : chain) {
    if (fsdp_only && !split.fsdp) continue;
    for (int axis : split.axes)
      names += (names.empty() ? "" : " x ") + mesh.axes[static_cast<std::size_t>(axis)].name;
    ways *= split.ways;
  }
  return names + " (" + std::to_string(ways) + " ranks)";
}

std::int64_t chain_ways(const std::vector<DimSplit>& chain) {
  std::int64_t ways = 1;
  for (const DimSplit& split : chain) ways *= split.ways;
  return ways;
}

// Divisors of `extent` in [2, limit], as "2, 4, 8" (at most 8 listed), or "".
std::string divisors_up_to(std::int64_t extent, std::int64_t limit) {
  std::vector<std::int64_t> found;
  for (std::int64_t k = std::min(limit, extent); k >= 2 && found.size() < 8; --k)
    if (extent % k == 0) found.push_back(k);
  std::string text;
  for (auto it = found.rbegin(); it != found.rend(); ++it)
    text += (text.empty() ? "" : ", ") + std::to_string(*it);
  return text;
}

// A better layout for `p` whose dim `dim` (split `degree` ways) leaves ranks
// short: FSDP of stacked experts on dim 1, another dim the degree divides,
// or a degree dividing the extent.
std::string better_layout(const PlannedParam& param, int dim, std::int64_t degree) {
  const std::int64_t extent = param.global_shape[static_cast<std::size_t>(dim)];
  if (stacked_expert(param) && dim == 0 && param.geometry.fsdp_dim == 0 &&
      param.global_shape.size() > 1)
    return "FSDP the experts on dim 1 (`fsdp: {expert_dim: 1}`, or `expert_dim: auto`, "
           "torchtitan's rule: dim 1 when the expert-FSDP x EP ranks outnumber the " +
           std::to_string(extent) + " experts)";
  if (param.geometry.fsdp_dim == dim) {
    for (std::size_t d = 0; d < param.global_shape.size(); ++d)
      if (static_cast<int>(d) != dim && param.global_shape[d] % degree == 0 &&
          param.geometry.per_dim[d].empty())
        return "FSDP on dim " + std::to_string(d) + " (extent " +
               std::to_string(param.global_shape[d]) + " divides by " + std::to_string(degree) +
               "; `fsdp: {dim: " + std::to_string(d) + "}`" +
               (stacked_expert(param) ? " / `expert_dim`" : "") + ")";
  }
  const std::string divisors = divisors_up_to(extent, degree);
  return divisors.empty() ? "fewer ranks on dim " + std::to_string(dim) + " than its " +
                                std::to_string(extent) + " rows"
                          : "a degree on dim " + std::to_string(dim) + " that divides " +
                                std::to_string(extent) + " (" + divisors + ")";
}

// Ranks holding only padding of `p`: classes whose real piece is empty but
// whose allocated piece is not.
void check_padding_only(const Plan& plan, const PlannedParam& param, GroupedReporter& rep) {
  if (param.geometry.fsdp_dim < 0 && param.uneven != SplitRule::Pad) return;
  if (numel(param.global_shape) < kMinElements) return;
  // An empty real piece needs a dim split into more pieces than about the square root of
  // its extent (chunk: the tail runs out when ceil(L / W) x (W - 1) >= L, never for
  // L >= W^2) or a `pad: M` split; the common case skips the shard enumeration.
  bool possible = false;
  for (std::size_t d = 0; d < param.global_shape.size(); ++d) {
    const std::int64_t ways = chain_ways(param.geometry.per_dim[d]);
    possible = possible || (ways > 1 && ways > param.global_shape[d] / ways);
    for (const DimSplit& split : param.geometry.per_dim[d])
      possible = possible || split.rule == SplitRule::Pad;  // `pad: M` rounds pieces up
  }
  if (!possible || class_space(plan, param).num_classes > kMaxClasses) return;
  std::int64_t idle = 0;
  std::int64_t holders = 0;
  const ShardGeom* example = nullptr;
  std::vector<ShardClass> classes = enumerate_shards(plan, param);
  for (const ShardClass& shard_class : classes) {
    holders += shard_class.ranks.size();
    if (numel(shard_class.geom.local_shape) != 0 || numel(shard_class.geom.padded_shape) == 0)
      continue;
    idle += shard_class.ranks.size();
    if (example == nullptr) example = &shard_class.geom;
  }
  if (idle == 0) return;
  // The dim whose real piece is empty.
  int dim = 0;
  for (std::size_t d = 0; d < example->local_shape.size(); ++d)
    if (example->local_shape[d] == 0) dim = static_cast<int>(d);
  const auto& chain = param.geometry.per_dim[static_cast<std::size_t>(dim)];
  const std::int64_t degree = chain_ways(chain);
  const Mesh& mesh = plan.mesh_of(param);
  Diagnostic diag = param_diagnostic(param, DiagCode::WBalance, param.loc, Severity::Warning);
  diag.message = param.name + " " + shape_text(param.global_shape) + ": dim " +
                 std::to_string(dim) + " (extent " +
                 std::to_string(param.global_shape[static_cast<std::size_t>(dim)]) +
                 ") split over " + chain_text(chain, mesh, false) + " leaves " +
                 std::to_string(idle) + " of the " + std::to_string(holders) +
                 " ranks holding it with only padding (no real elements: no gradient, no "
                 "optimizer state)";
  diag.hint = "use " + better_layout(param, dim, degree);
  rep.add(std::move(diag), std::to_string(static_cast<int>(param.rule.kind)) + ":" +
                               std::to_string(param.rule.index) + ":" + std::to_string(dim) + ":" +
                               std::to_string(degree) + ":" +
                               std::to_string(param.global_shape[static_cast<std::size_t>(dim)]));
}

struct StageLoad {
  std::int64_t max = -1;
  std::int64_t min = -1;
  std::int64_t max_rank = -1;
  std::int64_t min_rank = -1;
};

bool shares_storage(const Plan& plan, const PlannedParam& param) {
  return param.alias_of && plan.params[*param.alias_of].stage == param.stage;
}

std::int64_t metric(const PlannedParam& param, const ShardGeom& shard, int which) {
  if (which == 0) return numel(shard.padded_shape) * element_size(param.dtype);
  return param.requires_grad ? numel(shard.local_shape) : 0;
}

// The param of `stage` whose pieces on `high` and `low` differ most in
// `which`, and the dim on which they differ.
void report_stage(const Plan& plan, int stage, int which, const StageLoad& load,
                  DiagnosticSink& sink) {
  const PlannedParam* culprit = nullptr;
  std::int64_t worst = -1;
  ShardGeom high_piece;
  ShardGeom low_piece;
  for (const PlannedParam& param : plan.params) {
    if (param.stage != stage || shares_storage(plan, param) || param.geometry.per_dim.empty())
      continue;
    const Mesh& mesh = plan.mesh_of(param);
    const ShardGeom high = shard_at(param.geometry, mesh_coords(mesh, load.max_rank));
    const ShardGeom low = shard_at(param.geometry, mesh_coords(mesh, load.min_rank));
    const std::int64_t diff = metric(param, high, which) - metric(param, low, which);
    if (diff <= worst) continue;
    worst = diff;
    culprit = &param;
    high_piece = high;
    low_piece = low;
  }
  if (culprit == nullptr || worst <= 0) return;
  int dim = 0;
  for (std::size_t d = 0; d < high_piece.local_shape.size(); ++d)
    if (high_piece.local_shape[d] != low_piece.local_shape[d]) dim = static_cast<int>(d);
  const auto& chain = culprit->geometry.per_dim[static_cast<std::size_t>(dim)];
  const std::int64_t degree = chain_ways(chain);
  const char* what = which == 0 ? "parameter bytes" : "optimizer-state elements";
  Diagnostic diag = param_diagnostic(*culprit, DiagCode::WBalance, culprit->loc, Severity::Warning);
  diag.message = "stage " + std::to_string(stage) + ": rank " + std::to_string(load.max_rank) +
                 " holds " + std::to_string(load.max) + " " + what + ", rank " +
                 std::to_string(load.min_rank) + " only " + std::to_string(load.min) +
                 " (more than " + std::to_string(kImbalance) + "x apart); most of the gap is " +
                 culprit->name + " " + shape_text(culprit->global_shape) + ", dim " +
                 std::to_string(dim) + " split over " +
                 chain_text(chain, plan.mesh_of(*culprit), false) + ": local " +
                 shape_text(high_piece.local_shape) + " vs " + shape_text(low_piece.local_shape);
  diag.hint = degree > 1 ? "use " + better_layout(*culprit, dim, degree)
                         : "balance the stage's params over its ranks";
  sink.report(std::move(diag));
}

}  // namespace

void check_balance(const Plan& plan, DiagnosticSink& sink) {
  GroupedReporter padding;
  for (const PlannedParam& param : plan.params) {
    if (param.geometry.per_dim.size() != param.global_shape.size() || param.placements.empty())
      continue;
    check_padding_only(plan, param, padding);
  }
  padding.flush(sink);
  if (plan.params.empty() || plan.world_size < 2 || plan.world_size > limits::kMaxMemoryReportWorld)
    return;
  const std::vector<std::int64_t> sums = rank_sums(
      plan, 2, [](const PlannedParam& param, const ShardGeom& shard, std::span<std::int64_t> out) {
        out[0] += metric(param, shard, 0);
        out[1] += metric(param, shard, 1);
      });
  const auto stages = static_cast<std::size_t>(std::max(1, plan.num_stages));
  std::vector<bool> reported(stages, false);  // one W-BALANCE per stage: bytes first
  for (int which = 0; which < 2; ++which) {
    std::vector<StageLoad> loads(stages);
    for (std::int64_t r = 0; r < plan.world_size; ++r) {
      const std::int64_t value =
          sums[static_cast<std::size_t>(r) * 2 + static_cast<std::size_t>(which)];
      StageLoad& load = loads[static_cast<std::size_t>(plan.stage_of_rank(r))];
      if (load.max_rank < 0 || value > load.max) load.max = value, load.max_rank = r;
      if (load.min_rank < 0 || value < load.min) load.min = value, load.min_rank = r;
    }
    for (std::size_t s = 0; s < stages; ++s) {
      const StageLoad& load = loads[s];
      if (reported[s] || load.max_rank < 0 || load.max <= kImbalance * load.min ||
          load.max - load.min < kMinElements)
        continue;
      report_stage(plan, static_cast<int>(s), which, load, sink);
      reported[s] = true;
    }
  }
}

}  // namespace shardc::passes
