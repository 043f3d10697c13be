// Explicit shard orders (docs/shard-order.md). A rule's `shard_order` reaches
// the planner as DTensor's labels of the order (the front end writes
// `_StridedShard(d, sf=F)` on the ordered axes, src/frontend/recipe_shard_order.cpp;
// a recipe may also write them itself). `order_shards` (after
// resolve_placements, before FSDP adds its split) reads the order back from the
// split factors as DTensorSpec does (`_maybe_convert_StridedShard_to_shard_order`,
// torch 2.13 _dtensor_spec.py), puts the dim's splits in that execution order and
// labels the axes; labels that are no shard order it cannot state are E-SHARD-ORDER.
// `check_shard_order` (after apply_fsdp) warns W-STRIDED where DTensor's reading
// of the labels gives other rows than the order's nested chunks (uneven
// extents). The arithmetic is src/core/shard_order.hpp.
#include "core/shard_order.hpp"

#include <algorithm>
#include <map>
#include <string>
#include <tuple>

#include "core/shard_classes.hpp"
#include "planner/passes.hpp"
#include "support/limits.hpp"

namespace shardc {
namespace passes {
namespace {

const std::vector<AxisPlacement>& placements_of(const PlannedParam& param, const Recipe& recipe) {
  const auto i = static_cast<std::size_t>(param.rule.index);
  return param.rule.kind == RuleRef::Kind::Experts ? recipe.experts[i].placements
                                                   : recipe.rules[i].placements;
}

// (length, ways in execution order, order) -> mismatching coordinate tuples (order positions).
using Key = std::tuple<std::int64_t, std::vector<std::int64_t>, std::vector<int>>;
constexpr std::int64_t kMaxWork = std::int64_t{1} << 24;

// The coordinates (in execution order) where DTensor's reading of the labels
// and the nested chunks differ; nullopt when the check is over budget.
std::optional<std::vector<std::vector<std::int64_t>>> reading_mismatches(
    std::int64_t length, const std::vector<std::int64_t>& ways, const std::vector<int>& order,
    const std::vector<std::int64_t>& factors) {
  std::int64_t combos = 1;
  std::int64_t runs = 1;
  for (std::size_t i = 0; i < ways.size(); ++i) {
    if (__builtin_mul_overflow(combos, ways[i], &combos) || combos > kMaxWork) return std::nullopt;
    if (__builtin_mul_overflow(runs, factors[i], &runs) || runs > kMaxWork) return std::nullopt;
  }
  std::int64_t work = 0;
  if (__builtin_mul_overflow(combos, std::min(runs, length + 1), &work) || work > kMaxWork)
    return std::nullopt;
  // the splits in mesh order: positions of `order` sorted by mesh dim
  std::vector<std::size_t> by_mesh(order.size());
  for (std::size_t i = 0; i < by_mesh.size(); ++i) by_mesh[i] = i;
  std::sort(by_mesh.begin(), by_mesh.end(),
            [&](std::size_t left, std::size_t right) { return order[left] < order[right]; });
  std::vector<std::vector<std::int64_t>> bad;
  std::vector<std::int64_t> coords(ways.size(), 0);
  std::vector<MeshDimSplit> splits(ways.size());
  for (std::int64_t c = 0; c < combos; ++c) {
    std::int64_t rem = c;
    for (std::size_t i = ways.size(); i-- > 0;) {
      coords[i] = rem % ways[i];
      rem /= ways[i];
    }
    for (std::size_t m = 0; m < by_mesh.size(); ++m) {
      const std::size_t i = by_mesh[m];
      splits[m] = {ways[i], coords[i], factors[i]};
    }
    const Piece want = nested_piece(length, ways, coords);
    const std::vector<RowRun> got = dtensor_rows(length, splits);
    const bool same = want.size == 0
                          ? got.empty()
                          : got.size() == 1 && got.front() == RowRun{want.start, want.size};
    if (!same) bad.push_back(coords);
  }
  return bad;
}

void warn_reading(const PlannedParam& param, const Plan& plan, int d,
                  std::map<Key, std::optional<std::vector<std::vector<std::int64_t>>>>& cache,
                  GroupedReporter& rep) {
  const auto& chain = param.geometry.per_dim[static_cast<std::size_t>(d)];
  std::vector<std::int64_t> ways;
  std::vector<int> order;
  for (const DimSplit& split : chain) {
    if (split.fsdp) continue;
    if (split.rule != SplitRule::Chunk && split.rule != SplitRule::Even)
      return;  // no DTensor spelling
    if (split.unit > 1 || split.axes.size() != 1) return;
    ways.push_back(split.ways);
    order.push_back(split.axes.front());
  }
  std::vector<std::int64_t> factors;
  for (int axis : order)
    factors.push_back(param.placements[static_cast<std::size_t>(axis)].split_factor);
  const std::int64_t length = param.global_shape[static_cast<std::size_t>(d)];
  auto [it, fresh] = cache.try_emplace(Key{length, ways, order});
  if (fresh) it->second = reading_mismatches(length, ways, order, factors);
  const Mesh& mesh = plan.mesh_of(param);
  if (!it->second) {
    Diagnostic diag = param_diagnostic(param, DiagCode::WStrided, param.loc, Severity::Note);
    diag.message = param.name + ": the _StridedShard reading of dim " + std::to_string(d) +
                   " was not checked (the order's splits are too many for the check's budget)";
    diag.hint = "the plan states the shard order's nested chunks; see docs/shard-order.md";
    rep.add(std::move(diag), "unchecked-order");
    return;
  }
  const auto& bad = *it->second;
  if (bad.empty()) return;
  const ClassSpace cs = class_space(plan, param);
  std::vector<std::int64_t> coords(cs.sizes.size(), 0);
  RankSet ranks;
  constexpr std::size_t kMaxClasses = 64;
  for (std::size_t b = 0; b < bad.size() && b < kMaxClasses; ++b) {
    for (std::size_t i = 0; i < order.size(); ++i)
      coords[static_cast<std::size_t>(order[i])] = bad[b][i];
    ranks = ranks.empty() ? class_ranks(cs, coords, param.stage)
                          : ranks.unite(class_ranks(cs, coords, param.stage));
  }
  std::string order_text;
  for (int axis : order)
    order_text += (order_text.empty() ? "" : ", ") + mesh.axes[static_cast<std::size_t>(axis)].name;
  Diagnostic diag = param_diagnostic(param, DiagCode::WStrided, param.loc, Severity::Warning);
  diag.message = param.name + ": DTensor reads the _StridedShard labels of dim " +
                 std::to_string(d) + " with other rows than the shard order [" + order_text +
                 "] on " + std::to_string(bad.size()) + " shard(s), ranks " + ranks.to_string() +
                 (bad.size() > kMaxClasses ? " and more" : "");
  std::int64_t product = 1;
  for (std::int64_t way : ways) product *= way;
  diag.hint =
      "the plan states the order's nested chunks (DTensorSpec.shard_order); a runtime "
      "that rebuilds the DTensor from the labels alone gets other rows: pad dim " +
      std::to_string(d) + " (extent " + std::to_string(length) + ") to a multiple of " +
      std::to_string(product) + ", or keep the shard order with the labels";
  std::string key = "order:" + std::to_string(length);
  for (int axis : order) key += ":" + std::to_string(axis);
  rep.add(std::move(diag), key);
}

// Why labels of dim `d` that are no shard order cannot be stated as boxes (empty: they can):
// a piece's boxes lie on one dim and follow DTensor's reading, which knows torch.chunk only.
std::string strided_refusal(const PlannedParam& param, std::size_t d,
                            const std::vector<std::int64_t>& factors, int strided_dim) {
  if (!param.geometry.parts.empty())
    return "the param is packed (its boxes are its parts on dim " +
           std::to_string(param.geometry.parts_dim) + ")";
  if (strided_dim >= 0)
    return "dim " + std::to_string(strided_dim) +
           " is already read from such labels (one dim per param has boxes)";
  if (param.geometry.group_dim == static_cast<int>(d))
    return "the dim is split in whole groups (`packed` interleave / groups)";
  for (const DimSplit& split : param.geometry.per_dim[d]) {
    if (split.rule != SplitRule::Chunk && split.rule != SplitRule::Even)
      return std::string("`uneven: ") + split_rule_name(split.rule) +
             "` has no DTensor reading (DTensor splits as torch.chunk)";
    if (split.unit > 1) return "`unit` has no DTensor reading (DTensor splits as torch.chunk)";
    if (split.axes.size() != 1) return "a split of the dim spans several mesh axes";
  }
  std::int64_t runs = 1;
  for (std::int64_t factor : factors) {
    if (__builtin_mul_overflow(runs, factor, &runs) || runs > kMaxParts)
      return "the product of the split factors exceeds " + std::to_string(kMaxParts) +
             " (kMaxParts: a piece has at most that many boxes)";
  }
  return {};
}

// Reads the order of every dim from the written split factors; false after reporting.
bool order_param(PlannedParam& param, const Mesh& mesh, const Recipe& recipe,
                 GroupedReporter& rep) {
  std::vector<std::int64_t> factor(mesh.axes.size(), 1);
  std::vector<const AxisPlacement*> written(mesh.axes.size(), nullptr);
  bool any = false;
  for (const AxisPlacement& ap : placements_of(param, recipe)) {
    const int axis = mesh.find(ap.axis);
    if (axis < 0) continue;
    factor[static_cast<std::size_t>(axis)] = written_split_factor(ap.placement);
    written[static_cast<std::size_t>(axis)] = &ap;
    any = any || factor[static_cast<std::size_t>(axis)] > 1;
  }
  if (!any) return true;
  std::vector<std::int64_t> sizes;
  for (const MeshAxis& axis : mesh.axes) sizes.push_back(axis.size);
  int strided_dim = -1;  // the dim stated as DTensor reads its labels (at most one)
  for (std::size_t d = 0; d < param.geometry.per_dim.size(); ++d) {
    std::vector<int> dims;
    std::vector<std::int64_t> factors;
    for (std::size_t a = 0; a < param.placements.size(); ++a) {
      const ResolvedPlacement& rp = param.placements[a];
      if (rp.kind == ResolvedPlacement::Kind::Replicate || rp.dim != static_cast<int>(d)) continue;
      dims.push_back(static_cast<int>(a));
      factors.push_back(factor[a]);
    }
    if (std::all_of(factors.begin(), factors.end(),
                    [](std::int64_t label_factor) { return label_factor == 1; }))
      continue;
    const std::optional<std::vector<int>> order = decode_split_factors(dims, factors, sizes);
    if (!order) {
      const std::string why = strided_refusal(param, d, factors, strided_dim);
      if (why.empty()) {
        // Stated as DTensor reads the labels (geometry.cpp `strided_dim`): the chain stays in
        // mesh order, each split carries its label's factor, the rows are several boxes.
        auto& chain = param.geometry.per_dim[d];
        for (std::size_t i = 0; i < dims.size(); ++i) {
          const auto it = std::find_if(chain.begin(), chain.end(), [&](const DimSplit& split) {
            return split.axes.size() == 1 && split.axes.front() == dims[i];
          });
          SHARDC_ASSERT(it != chain.end(), param.name + ": no split for a labelled axis");
          it->split_factor = factors[i];
          ResolvedPlacement& rp = param.placements[static_cast<std::size_t>(dims[i])];
          rp.kind = factors[i] > 1 ? ResolvedPlacement::Kind::StridedShard
                                   : ResolvedPlacement::Kind::Shard;
          rp.split_factor = factors[i];
        }
        strided_dim = static_cast<int>(d);
        continue;
      }
      const AxisPlacement* at = nullptr;
      std::string labels;
      for (std::size_t i = 0; i < dims.size(); ++i) {
        const AxisPlacement* ap = written[static_cast<std::size_t>(dims[i])];
        if (ap == nullptr) continue;
        if (at == nullptr && factors[i] > 1) at = ap;
        labels += (labels.empty() ? "" : ", ") + ap->axis + ": " + ap->placement.text;
      }
      Diagnostic diag =
          param_diagnostic(param, DiagCode::EShardOrder, at != nullptr ? at->loc : param.loc);
      diag.message = "the labels of dim " + std::to_string(d) + " of " + param.name + " (" +
                     labels +
                     ") are no shard order, and shardc cannot state their several boxes per "
                     "rank here: " +
                     why;
      diag.hint = "write Shard(" + std::to_string(d) +
                  ") on each axis and the order as `shard_order: {" + std::to_string(d) +
                  ": [outermost, ..., innermost]}`, or drop what the reason names "
                  "(docs/shard-order.md)";
      rep.add(std::move(diag), "no-order:" + std::to_string(param.rule.index) + ":" + labels);
      return false;
    }
    auto& chain = param.geometry.per_dim[d];
    std::vector<DimSplit> next;
    for (int axis : *order) {
      const auto it = std::find_if(chain.begin(), chain.end(), [&](const DimSplit& split) {
        return split.axes.size() == 1 && split.axes.front() == axis;
      });
      SHARDC_ASSERT(it != chain.end(), param.name + ": no split for an ordered axis");
      next.push_back(*it);
    }
    SHARDC_ASSERT(next.size() == chain.size(), param.name + ": the order covers every split");
    chain = std::move(next);
    const std::vector<std::int64_t> labels = strided_split_factors(*order, sizes);
    for (std::size_t i = 0; i < order->size(); ++i) {
      ResolvedPlacement& rp = param.placements[static_cast<std::size_t>((*order)[i])];
      rp.kind =
          labels[i] > 1 ? ResolvedPlacement::Kind::StridedShard : ResolvedPlacement::Kind::Shard;
      rp.split_factor = labels[i];
    }
  }
  return true;
}

}  // namespace

void order_shards(std::vector<PlannedParam>& params, const Plan& plan, const Recipe& recipe,
                  DiagnosticSink& sink) {
  GroupedReporter rep;
  for (PlannedParam& param : params) {
    if (param.rule.index < 0 || param.scale_of ||
        param.geometry.per_dim.size() != param.global_shape.size())
      continue;
    if (!order_param(param, plan.mesh_of(param), recipe, rep))
      param.geometry.per_dim.clear();  // later passes skip it, as after a placement error
  }
  rep.flush(sink);
}

void check_shard_order(const std::vector<PlannedParam>& params, const Plan& plan,
                       DiagnosticSink& sink) {
  GroupedReporter rep;
  std::map<Key, std::optional<std::vector<std::vector<std::int64_t>>>> cache;
  for (const PlannedParam& param : params) {
    if (param.geometry.per_dim.size() != param.global_shape.size()) continue;
    for (std::size_t d = 0; d < param.geometry.per_dim.size(); ++d) {
      if (!param.geometry.parts.empty() && static_cast<int>(d) == param.geometry.parts_dim)
        continue;
      if (out_of_mesh_order(param.geometry, d))
        warn_reading(param, plan, static_cast<int>(d), cache, rep);
    }
  }
  rep.flush(sink);
}

}  // namespace passes
}  // namespace shardc
