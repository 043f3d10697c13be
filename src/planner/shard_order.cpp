// Explicit shard orders (docs/shard-order.md). A rule's `shard_order` reaches
// the planner as DTensor's labels of the order (the front end writes
// `_StridedShard(d, sf=F)` on the ordered axes, src/frontend/recipe_shard_order.cpp;
// a recipe may also write them itself). `order_shards` (after
// resolve_placements, before FSDP adds its split) reads the order back from the
// split factors as DTensorSpec does (`_maybe_convert_StridedShard_to_shard_order`,
// torch 2.13 _dtensor_spec.py), puts the dim's splits in that execution order and
// labels the axes; labels that are no shard order are E-PLACEMENT.
// `check_shard_order` (after apply_fsdp) warns W-STRIDED where DTensor's reading
// of the labels gives other rows than the order's nested chunks (uneven
// extents). The arithmetic of src/planner/shard_order.hpp.
#include "planner/shard_order.hpp"

#include <algorithm>
#include <map>
#include <string>
#include <tuple>

#include "core/shard_classes.hpp"
#include "planner/passes.hpp"

namespace shardc {
namespace {

// Rows [from, from + len) of the logical sequence `seq` (runs in order).
std::vector<RowRun> take(const std::vector<RowRun>& seq, std::int64_t from, std::int64_t len) {
  std::vector<RowRun> out;
  for (const RowRun& run : seq) {
    if (len <= 0) break;
    if (from >= run.size) {
      from -= run.size;
      continue;
    }
    const std::int64_t n = std::min(run.size - from, len);
    out.push_back({run.start + from, n});
    len -= n;
    from = 0;
  }
  return out;
}

std::int64_t total_rows(const std::vector<RowRun>& seq) {
  std::int64_t total = 0;
  for (const RowRun& run : seq) total += run.size;
  return total;
}

}  // namespace

std::int64_t written_split_factor(const Placement& p) {
  const std::string_view text = p.text;
  if (p.kind != Placement::Kind::Shard || !text.starts_with("_StridedShard")) return 1;
  std::size_t at = text.find("sf");
  const std::size_t long_key = text.find("split_factor");
  if (long_key != std::string_view::npos) at = long_key;
  at = text.find('=', at == std::string_view::npos ? 0 : at);
  if (at == std::string_view::npos) return 1;
  std::int64_t factor = 0;
  for (std::size_t i = at + 1; i < text.size(); ++i) {
    const char c = text[i];
    if (c == ' ' || c == '\t') continue;
    if (c < '0' || c > '9') break;
    factor = factor * 10 + (c - '0');
    if (factor > (std::int64_t{1} << 31)) return 1;  // the front end bounds it
  }
  return factor >= 1 ? factor : 1;
}

bool out_of_mesh_order(const ParamGeometry& g, std::size_t dim) {
  int last = -1;
  for (const DimSplit& s : g.per_dim[dim]) {
    if (s.fsdp) continue;
    for (int a : s.axes) {
      if (a < last) return true;
      last = a;
    }
  }
  return false;
}

Piece nested_piece(std::int64_t length, std::span<const std::int64_t> ways,
                   std::span<const std::int64_t> coords) {
  SHARDC_ASSERT(ways.size() == coords.size(), "one coordinate per split");
  Piece piece{0, length};
  for (std::size_t i = 0; i < ways.size(); ++i) {
    const Piece p = split_piece(piece.size, ways[i], coords[i], SplitRule::Chunk);
    piece = {piece.start + p.start, p.size};
  }
  return piece;
}

std::vector<std::int64_t> strided_split_factors(std::span<const int> order,
                                                std::span<const std::int64_t> sizes) {
  std::vector<std::int64_t> out;
  for (std::size_t i = 0; i < order.size(); ++i) {
    std::int64_t sf = 1;
    for (std::size_t j = 0; j < i; ++j)
      if (order[j] > order[i]) sf *= sizes[static_cast<std::size_t>(order[j])];
    out.push_back(sf);
  }
  return out;
}

std::optional<std::vector<int>> decode_split_factors(std::span<const int> mesh_dims,
                                                     std::span<const std::int64_t> split_factors,
                                                     std::span<const std::int64_t> sizes) {
  SHARDC_ASSERT(mesh_dims.size() == split_factors.size(), "one split factor per mesh dim");
  std::vector<int> order;
  for (std::size_t k = mesh_dims.size(); k-- > 0;) {
    std::int64_t accumulated = 1;
    bool placed = false;
    for (std::size_t i = 0; i <= order.size(); ++i) {
      if (accumulated == split_factors[k]) {
        order.insert(order.begin() + static_cast<std::ptrdiff_t>(i), mesh_dims[k]);
        placed = true;
        break;
      }
      if (i < order.size()) accumulated *= sizes[static_cast<std::size_t>(order[i])];
    }
    if (!placed) return std::nullopt;
  }
  return order;
}

std::vector<RowRun> dtensor_rows(std::int64_t length, std::span<const MeshDimSplit> splits) {
  std::vector<RowRun> seq{{0, length}};
  for (const MeshDimSplit& s : splits) {
    const std::int64_t total = total_rows(seq);
    if (s.split_factor <= 1) {
      const Piece p = split_piece(total, s.size, s.coord, SplitRule::Chunk);
      seq = take(seq, p.start, p.size);
      continue;
    }
    std::vector<RowRun> next;
    for (std::int64_t j = 0; j < s.split_factor; ++j) {
      const Piece outer = split_piece(total, s.split_factor, j, SplitRule::Chunk);
      const Piece inner = split_piece(outer.size, s.size, s.coord, SplitRule::Chunk);
      for (const RowRun& run : take(seq, outer.start + inner.start, inner.size))
        next.push_back(run);
    }
    seq = std::move(next);
  }
  std::vector<RowRun> merged;
  for (const RowRun& run : seq) {
    if (run.size == 0) continue;
    if (!merged.empty() && merged.back().start + merged.back().size == run.start) {
      merged.back().size += run.size;
    } else {
      merged.push_back(run);
    }
  }
  return merged;
}

namespace passes {
namespace {

const std::vector<AxisPlacement>& placements_of(const PlannedParam& p, const Recipe& recipe) {
  const auto i = static_cast<std::size_t>(p.rule.index);
  return p.rule.kind == RuleRef::Kind::Experts ? recipe.experts[i].placements
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
            [&](std::size_t x, std::size_t y) { return order[x] < order[y]; });
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

void warn_reading(const PlannedParam& p, const Plan& plan, int d,
                  std::map<Key, std::optional<std::vector<std::vector<std::int64_t>>>>& cache,
                  GroupedReporter& rep) {
  const auto& chain = p.geometry.per_dim[static_cast<std::size_t>(d)];
  std::vector<std::int64_t> ways;
  std::vector<int> order;
  for (const DimSplit& s : chain) {
    if (s.fsdp) continue;
    if (s.rule != SplitRule::Chunk && s.rule != SplitRule::Even) return;  // no DTensor spelling
    if (s.unit > 1 || s.axes.size() != 1) return;
    ways.push_back(s.ways);
    order.push_back(s.axes.front());
  }
  std::vector<std::int64_t> factors;
  for (int a : order) factors.push_back(p.placements[static_cast<std::size_t>(a)].split_factor);
  const std::int64_t length = p.global_shape[static_cast<std::size_t>(d)];
  auto [it, fresh] = cache.try_emplace(Key{length, ways, order});
  if (fresh) it->second = reading_mismatches(length, ways, order, factors);
  const Mesh& mesh = plan.mesh_of(p);
  if (!it->second) {
    Diagnostic diag = param_diagnostic(p, DiagCode::WStrided, p.loc, Severity::Note);
    diag.message = p.name + ": the _StridedShard reading of dim " + std::to_string(d) +
                   " was not checked (the order's splits are too many for the check's budget)";
    diag.hint = "the plan states the shard order's nested chunks; see docs/shard-order.md";
    rep.add(std::move(diag), "unchecked-order");
    return;
  }
  const auto& bad = *it->second;
  if (bad.empty()) return;
  const ClassSpace cs = class_space(plan, p);
  std::vector<std::int64_t> coords(cs.sizes.size(), 0);
  RankSet ranks;
  constexpr std::size_t kMaxClasses = 64;
  for (std::size_t b = 0; b < bad.size() && b < kMaxClasses; ++b) {
    for (std::size_t i = 0; i < order.size(); ++i)
      coords[static_cast<std::size_t>(order[i])] = bad[b][i];
    ranks = ranks.empty() ? class_ranks(cs, coords, p.stage)
                          : ranks.unite(class_ranks(cs, coords, p.stage));
  }
  std::string order_text;
  for (int a : order)
    order_text += (order_text.empty() ? "" : ", ") + mesh.axes[static_cast<std::size_t>(a)].name;
  Diagnostic diag = param_diagnostic(p, DiagCode::WStrided, p.loc, Severity::Warning);
  diag.message = p.name + ": DTensor reads the _StridedShard labels of dim " + std::to_string(d) +
                 " with other rows than the shard order [" + order_text + "] on " +
                 std::to_string(bad.size()) + " shard(s), ranks " + ranks.to_string() +
                 (bad.size() > kMaxClasses ? " and more" : "");
  std::int64_t product = 1;
  for (std::int64_t w : ways) product *= w;
  diag.hint =
      "the plan states the order's nested chunks (DTensorSpec.shard_order); a runtime "
      "that rebuilds the DTensor from the labels alone gets other rows: pad dim " +
      std::to_string(d) + " (extent " + std::to_string(length) + ") to a multiple of " +
      std::to_string(product) + ", or keep the shard order with the labels";
  std::string key = "order:" + std::to_string(length);
  for (int a : order) key += ":" + std::to_string(a);
  rep.add(std::move(diag), key);
}

// Reads the order of every dim from the written split factors; false after reporting.
bool order_param(PlannedParam& p, const Mesh& mesh, const Recipe& recipe, GroupedReporter& rep) {
  std::vector<std::int64_t> factor(mesh.axes.size(), 1);
  std::vector<const AxisPlacement*> written(mesh.axes.size(), nullptr);
  bool any = false;
  for (const AxisPlacement& ap : placements_of(p, recipe)) {
    const int a = mesh.find(ap.axis);
    if (a < 0) continue;
    factor[static_cast<std::size_t>(a)] = written_split_factor(ap.placement);
    written[static_cast<std::size_t>(a)] = &ap;
    any = any || factor[static_cast<std::size_t>(a)] > 1;
  }
  if (!any) return true;
  std::vector<std::int64_t> sizes;
  for (const MeshAxis& axis : mesh.axes) sizes.push_back(axis.size);
  for (std::size_t d = 0; d < p.geometry.per_dim.size(); ++d) {
    std::vector<int> dims;
    std::vector<std::int64_t> factors;
    for (std::size_t a = 0; a < p.placements.size(); ++a) {
      const ResolvedPlacement& rp = p.placements[a];
      if (rp.kind == ResolvedPlacement::Kind::Replicate || rp.dim != static_cast<int>(d)) continue;
      dims.push_back(static_cast<int>(a));
      factors.push_back(factor[a]);
    }
    if (std::all_of(factors.begin(), factors.end(), [](std::int64_t f) { return f == 1; }))
      continue;
    const std::optional<std::vector<int>> order = decode_split_factors(dims, factors, sizes);
    if (!order) {
      const AxisPlacement* at = nullptr;
      std::string labels;
      for (std::size_t i = 0; i < dims.size(); ++i) {
        const AxisPlacement* ap = written[static_cast<std::size_t>(dims[i])];
        if (ap == nullptr) continue;
        if (at == nullptr && factors[i] > 1) at = ap;
        labels += (labels.empty() ? "" : ", ") + ap->axis + ": " + ap->placement.text;
      }
      Diagnostic diag = param_diagnostic(p, DiagCode::EPlacement, at != nullptr ? at->loc : p.loc);
      diag.message = "the labels of dim " + std::to_string(d) + " of " + p.name + " (" + labels +
                     ") are no shard order: DTensor cannot read them as one, and their pieces "
                     "are not one box per rank";
      diag.hint = "write Shard(" + std::to_string(d) +
                  ") on each axis and the order as `shard_order: {" + std::to_string(d) +
                  ": [outermost, ..., innermost]}` (docs/shard-order.md)";
      rep.add(std::move(diag), "no-order:" + std::to_string(p.rule.index) + ":" + labels);
      return false;
    }
    auto& chain = p.geometry.per_dim[d];
    std::vector<DimSplit> next;
    for (int a : *order) {
      const auto it = std::find_if(chain.begin(), chain.end(), [&](const DimSplit& s) {
        return s.axes.size() == 1 && s.axes.front() == a;
      });
      SHARDC_ASSERT(it != chain.end(), p.name + ": no split for an ordered axis");
      next.push_back(*it);
    }
    SHARDC_ASSERT(next.size() == chain.size(), p.name + ": the order covers every split");
    chain = std::move(next);
    const std::vector<std::int64_t> labels = strided_split_factors(*order, sizes);
    for (std::size_t i = 0; i < order->size(); ++i) {
      ResolvedPlacement& rp = p.placements[static_cast<std::size_t>((*order)[i])];
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
  for (PlannedParam& p : params) {
    if (p.rule.index < 0 || p.scale_of || p.geometry.per_dim.size() != p.global_shape.size())
      continue;
    if (!order_param(p, plan.mesh_of(p), recipe, rep))
      p.geometry.per_dim.clear();  // later passes skip it, as after a placement error
  }
  rep.flush(sink);
}

void check_shard_order(const std::vector<PlannedParam>& params, const Plan& plan,
                       DiagnosticSink& sink) {
  GroupedReporter rep;
  std::map<Key, std::optional<std::vector<std::vector<std::int64_t>>>> cache;
  for (const PlannedParam& p : params) {
    if (p.geometry.per_dim.size() != p.global_shape.size()) continue;
    for (std::size_t d = 0; d < p.geometry.per_dim.size(); ++d) {
      if (!p.geometry.parts.empty() && static_cast<int>(d) == p.geometry.parts_dim) continue;
      if (out_of_mesh_order(p.geometry, d)) warn_reading(p, plan, static_cast<int>(d), cache, rep);
    }
  }
  rep.flush(sink);
}

}  // namespace passes
}  // namespace shardc
