// W-STRIDED (contract §5.3): FSDP2 over TP stores rank (f, t) at piece f of TP
// piece t (the physical layout). Newest PyTorch DTensor (PR #163843 on)
// reads `_StridedShard(d, sf=F)` on the FSDP axis followed by the other
// shards of d as: chunk the dim into F pieces, chunk each into W pieces,
// FSDP rank f takes piece f of every first-level piece (concatenated); the
// following Shard placements then chunk that logical sequence in turn.
// Where the two give different rows we warn; the plan stays physical.
//
// Checked when every other split of the FSDP dim uses `chunk` and the FSDP
// axes come before them in mesh order (the FSDP2 + TP layout); other
// layouts are not checked (documented in docs/diagnostics.md).
//
// A strided dim under FSDP (labels that are no shard order, docs/shard-order.md):
// FSDP2 (torch 2.13 `_fsdp_param.py` `_init_sharding_spec_tp`) chunks the
// concatenation of DTensor's rows of the rule labels (the physical layout,
// `strided_dim` in core/geometry.cpp) but labels its own split
// `_StridedShard(d, sf=F)`, F the shards of d, as if those rows were one
// contiguous piece. DTensor reads that label first (FSDP2's mesh puts the FSDP
// axes first), then the rule labels, and gets other rows even where every
// extent divides: `full_tensor()` of the sharded param reorders rows
// (measured on torch 2.13.0, gloo). Warned on the ranks where the two differ.
#include <algorithm>
#include <map>
#include <string>
#include <tuple>

#include "core/shard_classes.hpp"
#include "core/shard_order.hpp"
#include "planner/passes.hpp"

namespace shardc::passes {
namespace {

// Rows of the newest DTensor reading for FSDP coordinate `fsdp_coord` of `fsdp_ways` with
// split factor `split_factor`, then the other splits' coordinates `coords` (outer first):
// core's DTensor reading (shard_order.hpp dtensor_rows) with the FSDP axis first in mesh order.
std::vector<RowRun> dtensor_reading(std::int64_t length, std::int64_t split_factor,
                                    std::int64_t fsdp_ways, std::int64_t fsdp_coord,
                                    const std::vector<std::int64_t>& ways,
                                    const std::vector<std::int64_t>& coords) {
  std::vector<MeshDimSplit> splits{{fsdp_ways, fsdp_coord, split_factor}};
  for (std::size_t i = 0; i < ways.size(); ++i) splits.push_back({ways[i], coords[i], 1});
  return dtensor_rows(length, splits);
}

// Physical rows: the other splits in order, then the FSDP chunk (nested chunks).
Piece physical_rows(std::int64_t length, std::int64_t fsdp_ways, std::int64_t fsdp_coord,
                    std::vector<std::int64_t> ways, std::vector<std::int64_t> coords) {
  ways.push_back(fsdp_ways);
  coords.push_back(fsdp_coord);
  return nested_piece(length, ways, coords);
}

// Whether the runs are exactly the rows [want.start, want.start + want.size), in order.
bool same_rows(const std::vector<RowRun>& got, Piece want) {
  std::int64_t total = 0;
  for (const RowRun& run : got) total += run.size;
  if (total != want.size) return false;
  if (total == 0) return true;
  std::int64_t next = want.start;
  for (const RowRun& run : got) {
    if (run.start != next) return false;
    next += run.size;
  }
  return true;
}

using Key = std::tuple<std::int64_t, std::int64_t, std::vector<std::int64_t>>;

// Mismatching (f, ks...) combos for one extent and split signature; cached.
const std::vector<std::vector<std::int64_t>>& mismatches(
    std::map<Key, std::vector<std::vector<std::int64_t>>>& cache, std::int64_t length,
    std::int64_t fsdp_ways, const std::vector<std::int64_t>& ways) {
  auto [it, fresh] = cache.try_emplace(Key{length, fsdp_ways, ways});
  if (!fresh) return it->second;
  std::int64_t sf = 1;
  for (std::int64_t way : ways) sf *= way;
  if (length % sf == 0) return it->second;  // the readings agree (contract §5.3)
  std::vector<std::int64_t> ks(ways.size(), 0);
  for (std::int64_t f = 0; f < fsdp_ways; ++f) {
    for (std::int64_t c = 0; c < sf; ++c) {
      std::int64_t rem = c;
      for (std::size_t i = ways.size(); i-- > 0;) {
        ks[i] = rem % ways[i];
        rem /= ways[i];
      }
      if (!same_rows(dtensor_reading(length, sf, fsdp_ways, f, ways, ks),
                     physical_rows(length, fsdp_ways, f, ways, ks))) {
        std::vector<std::int64_t> combo{f};
        combo.insert(combo.end(), ks.begin(), ks.end());
        it->second.push_back(std::move(combo));
      }
    }
  }
  return it->second;
}

// Work of `mismatches` for one signature: (f, ks) combos times the
// intervals each DTensor reading walks. Above kMaxWork the check is skipped
// with a note (only hostile meshes get there: 2048 x 8 ranks is ~2^17).
constexpr std::int64_t kMaxWork = std::int64_t{1} << 26;

bool within_budget(std::int64_t length, std::int64_t fsdp_ways,
                   const std::vector<std::int64_t>& ways) {
  std::int64_t work = fsdp_ways;
  std::int64_t sf = 1;
  for (std::int64_t way : ways) {
    if (__builtin_mul_overflow(work, way, &work) || work > kMaxWork) return false;
    sf *= way;
  }
  const std::int64_t per = std::min(sf, length) + 1;
  return !__builtin_mul_overflow(work, per, &work) && work <= kMaxWork;
}

// --- FSDP axes elsewhere in the mesh ---
//
// The labels on the recipe's mesh as `fsdp.cpp` writes them (an FSDP axis Shard, or
// `_StridedShard(sf)` with sf the rule ways on the axes after it), read by DTensor in mesh
// order (core dtensor_rows), against FSDP2's physical rows: the rule splits, then one chunk
// of the local piece over the FSDP axes flattened (row-major in `fsdp.shard` order). They
// agree wherever every extent divides; a flattened FSDP chunk over several axes
// (torchtitan's dp_shard x cp) and FSDP axes after a rule axis differ on uneven extents
// (trial E 2: the readings were never compared there).
struct AxisSplit {
  int position = 0;  // mesh axis index
  std::int64_t ways = 1;
};
using OrderedKey = std::tuple<std::int64_t, std::vector<std::int64_t>>;

const std::vector<std::vector<std::int64_t>>& ordered_mismatches(
    std::map<OrderedKey, std::vector<std::vector<std::int64_t>>>& cache, std::int64_t length,
    const std::vector<AxisSplit>& fsdp, const std::vector<AxisSplit>& rule) {
  std::vector<std::int64_t> signature;
  for (const AxisSplit& axis : fsdp) signature.insert(signature.end(), {axis.position, axis.ways});
  signature.push_back(-1);
  for (const AxisSplit& axis : rule) signature.insert(signature.end(), {axis.position, axis.ways});
  auto [it, fresh] = cache.try_emplace(OrderedKey{length, signature});
  if (!fresh) return it->second;
  std::int64_t fsdp_ways = 1;
  for (const AxisSplit& axis : fsdp) fsdp_ways *= axis.ways;
  std::vector<std::int64_t> ways;
  std::int64_t combos = 1;
  for (const AxisSplit& axis : rule) {
    ways.push_back(axis.ways);
    combos *= axis.ways;
  }
  // Mesh order of the splits: (position, index), FSDP axes as -1 - j.
  std::vector<std::pair<int, int>> order;
  for (std::size_t j = 0; j < fsdp.size(); ++j)
    order.emplace_back(fsdp[j].position, -1 - static_cast<int>(j));
  for (std::size_t i = 0; i < rule.size(); ++i)
    order.emplace_back(rule[i].position, static_cast<int>(i));
  std::sort(order.begin(), order.end());
  std::vector<std::int64_t> ks(ways.size(), 0);
  std::vector<std::int64_t> fs(fsdp.size(), 0);
  std::vector<MeshDimSplit> read;
  for (std::int64_t f = 0; f < fsdp_ways; ++f) {
    std::int64_t frem = f;
    for (std::size_t j = fsdp.size(); j-- > 0;) {
      fs[j] = frem % fsdp[j].ways;
      frem /= fsdp[j].ways;
    }
    for (std::int64_t c = 0; c < combos; ++c) {
      std::int64_t rem = c;
      for (std::size_t i = ways.size(); i-- > 0;) {
        ks[i] = rem % ways[i];
        rem /= ways[i];
      }
      read.clear();
      for (const auto& [position, index] : order) {
        if (index >= 0) {
          read.push_back(
              {ways[static_cast<std::size_t>(index)], ks[static_cast<std::size_t>(index)], 1});
          continue;
        }
        const AxisSplit& axis = fsdp[static_cast<std::size_t>(-1 - index)];
        std::int64_t sf = 1;
        for (const AxisSplit& later : rule)
          if (later.position > axis.position) sf *= later.ways;
        read.push_back({axis.ways, fs[static_cast<std::size_t>(-1 - index)], sf});
      }
      if (!same_rows(dtensor_rows(length, read), physical_rows(length, fsdp_ways, f, ways, ks))) {
        std::vector<std::int64_t> combo{f};
        combo.insert(combo.end(), ks.begin(), ks.end());
        it->second.push_back(std::move(combo));
      }
    }
  }
  return it->second;
}

// --- a strided dim under FSDP ---

// Runs with adjacent ones merged (the same rows, however they were cut).
std::vector<RowRun> merged(const std::vector<RowRun>& runs) {
  std::vector<RowRun> out;
  for (const RowRun& run : runs) {
    if (run.size == 0) continue;
    if (!out.empty() && out.back().start + out.back().size == run.start) {
      out.back().size += run.size;
    } else {
      out.push_back(run);
    }
  }
  return out;
}

// The rows [from, from + len) of the concatenation of `runs` (local order).
std::vector<RowRun> take_runs(const std::vector<RowRun>& runs, std::int64_t from,
                              std::int64_t len) {
  std::vector<RowRun> out;
  for (const RowRun& run : runs) {
    if (len <= 0) break;
    if (from >= run.size) {
      from -= run.size;
      continue;
    }
    const std::int64_t count = std::min(run.size - from, len);
    out.push_back({run.start + from, count});
    len -= count;
    from = 0;
  }
  return out;
}

// (extent, FSDP ways, rule ways, rule split factors) -> mismatching (f, ks...) combos.
using StridedKey =
    std::tuple<std::int64_t, std::int64_t, std::vector<std::int64_t>, std::vector<std::int64_t>>;

// Where FSDP2's physical rows of a strided dim (FSDP coord f of the concatenated rows the
// rule labels give) and DTensor's reading of FSDP2's labels differ. `label` is FSDP2's
// split factor on its own axis (the shards of the dim).
const std::vector<std::vector<std::int64_t>>& strided_mismatches(
    std::map<StridedKey, std::vector<std::vector<std::int64_t>>>& cache, std::int64_t length,
    std::int64_t fsdp_ways, const std::vector<std::int64_t>& ways,
    const std::vector<std::int64_t>& factors) {
  auto [it, fresh] = cache.try_emplace(StridedKey{length, fsdp_ways, ways, factors});
  if (!fresh) return it->second;
  std::int64_t label = 1;
  std::int64_t combos = 1;
  for (std::int64_t way : ways) {
    label *= way;
    combos *= way;
  }
  std::vector<std::int64_t> ks(ways.size(), 0);
  std::vector<MeshDimSplit> rule(ways.size());
  std::vector<MeshDimSplit> read(ways.size() + 1);
  for (std::int64_t f = 0; f < fsdp_ways; ++f) {
    for (std::int64_t c = 0; c < combos; ++c) {
      std::int64_t rem = c;
      for (std::size_t i = ways.size(); i-- > 0;) {
        ks[i] = rem % ways[i];
        rem /= ways[i];
      }
      for (std::size_t i = 0; i < ways.size(); ++i) {
        rule[i] = {ways[i], ks[i], factors[i]};
        read[i + 1] = rule[i];
      }
      read[0] = {fsdp_ways, f, label};
      const std::vector<RowRun> rows = shardc::dtensor_rows(length, rule);
      std::int64_t total = 0;
      for (const RowRun& run : rows) total += run.size;
      const Piece cut = split_piece(total, fsdp_ways, f, SplitRule::Chunk);
      if (merged(take_runs(rows, cut.start, cut.size)) !=
          merged(shardc::dtensor_rows(length, read))) {
        std::vector<std::int64_t> combo{f};
        combo.insert(combo.end(), ks.begin(), ks.end());
        it->second.push_back(std::move(combo));
      }
    }
  }
  return it->second;
}

// Work of `strided_mismatches`: (f, ks) combos times the runs each reading walks.
bool strided_within_budget(std::int64_t length, std::int64_t fsdp_ways,
                           const std::vector<std::int64_t>& ways,
                           const std::vector<std::int64_t>& factors) {
  std::int64_t work = fsdp_ways;
  std::int64_t runs = fsdp_ways;
  for (std::size_t i = 0; i < ways.size(); ++i) {
    if (__builtin_mul_overflow(work, ways[i], &work) || work > kMaxWork) return false;
    if (__builtin_mul_overflow(runs, factors[i] * ways[i], &runs) || runs > kMaxWork) return false;
  }
  const std::int64_t per = std::min(runs, length) + 1;
  return !__builtin_mul_overflow(work, per, &work) && work <= kMaxWork;
}

// True when FSDP shards a dim whose rule labels are read as boxes (no shard order), each
// rule split one axis torch.chunk'ed (order_shards refuses the rest).
bool strided_checkable(const PlannedParam& param) {
  const int d = param.geometry.fsdp_dim;
  if (d < 0 || !param.geometry.parts.empty()) return false;
  const auto& chain = param.geometry.per_dim[static_cast<std::size_t>(d)];
  if (chain.size() < 2 || !strided_chain(chain)) return false;
  for (std::size_t i = 0; i + 1 < chain.size(); ++i)
    if ((chain[i].rule != SplitRule::Chunk && chain[i].rule != SplitRule::Even) ||
        chain[i].unit > 1 || chain[i].axes.size() != 1)
      return false;
  return true;
}

// The FSDP dim's split chain when the dim is plain: FSDP on it, no packed parts, the rule
// splits in mesh order and no strided labels (a rule's shard_order is checked by
// check_shard_order, shard_order.cpp); else null.
const std::vector<DimSplit>* plain_fsdp_chain(const PlannedParam& param) {
  const int d = param.geometry.fsdp_dim;
  if (d < 0 || !param.geometry.parts.empty() ||
      out_of_mesh_order(param.geometry, static_cast<std::size_t>(d)) ||
      strided_chain(param.geometry.per_dim[static_cast<std::size_t>(d)]))
    return nullptr;
  return &param.geometry.per_dim[static_cast<std::size_t>(d)];
}

// True when the param's FSDP dim is not the layout `checkable` takes (FSDP axes first) but
// one ordered_mismatches compares: FSDP over several axes, or after a rule axis, each rule
// split of the dim one axis torch.chunk'ed.
bool ordered_checkable(const PlannedParam& param) {
  const std::vector<DimSplit>* plain = plain_fsdp_chain(param);
  if (plain == nullptr) return false;
  const auto& chain = *plain;
  const auto& fsdp_axes = chain.back().axes;
  const int last_fsdp_axis = *std::max_element(fsdp_axes.begin(), fsdp_axes.end());
  bool rule_before_fsdp = false;
  for (std::size_t i = 0; i + 1 < chain.size(); ++i) {
    if (chain[i].rule != SplitRule::Chunk || chain[i].unit > 1 || chain[i].axes.size() != 1)
      return false;
    rule_before_fsdp |= chain[i].axes.front() < last_fsdp_axis;
  }
  return rule_before_fsdp || fsdp_axes.size() > 1;
}

// True when the param's FSDP dim has the checked layout.
bool checkable(const PlannedParam& param) {
  const std::vector<DimSplit>* plain = plain_fsdp_chain(param);
  if (plain == nullptr) return false;
  const auto& chain = *plain;
  if (chain.size() < 2 || chain.back().axes.size() != 1) return false;  // else ordered_checkable
  const int first_fsdp_axis = chain.back().axes.front();
  for (std::size_t i = 0; i + 1 < chain.size(); ++i) {
    if (chain[i].rule != SplitRule::Chunk || chain[i].unit > 1) return false;
    for (int axis : chain[i].axes)
      if (axis < first_fsdp_axis) return false;
  }
  return true;
}

// A W-STRIDED note: `what` was not checked (the mesh is beyond the check's budget).
void note_unchecked(const PlannedParam& param, const std::string& what, GroupedReporter& rep) {
  Diagnostic diag = param_diagnostic(param, DiagCode::WStrided, param.loc, Severity::Note);
  diag.message =
      param.name + ": " + what + " was not checked (the mesh is too large for the check's budget)";
  diag.hint = "the plan describes the physical layout; see W-STRIDED in docs/diagnostics.md";
  rep.add(std::move(diag), "unchecked");
}

// "N shard(s), ranks R": the ranks of the mismatching (f, ks...) combos of the FSDP dim.
std::string bad_shards_text(const PlannedParam& param, const Plan& plan,
                            const std::vector<std::vector<std::int64_t>>& bad) {
  const auto& chain = param.geometry.per_dim[static_cast<std::size_t>(param.geometry.fsdp_dim)];
  const ClassSpace cs = class_space(plan, param);
  std::vector<std::int64_t> coords(cs.sizes.size(), 0);
  RankSet ranks;
  constexpr std::size_t kMaxClasses = 64;
  for (std::size_t b = 0; b < bad.size() && b < kMaxClasses; ++b) {
    // Spread each split coordinate over its axes (row-major).
    const DimSplit& fsdp = chain.back();
    set_axes_coords(fsdp.axes, fsdp.axis_sizes, bad[b][0], coords);
    for (std::size_t i = 0; i + 1 < chain.size(); ++i)
      set_axes_coords(chain[i].axes, chain[i].axis_sizes, bad[b][i + 1], coords);
    // Other dims' axes stay at 0: list the classes at coordinate 0 elsewhere.
    ranks = ranks.empty() ? class_ranks(cs, coords, param.stage)
                          : ranks.unite(class_ranks(cs, coords, param.stage));
  }
  return std::to_string(bad.size()) + " shard(s), ranks " + ranks.to_string() +
         (bad.size() > kMaxClasses ? " and more" : "");
}

void warn(const PlannedParam& param, const Plan& plan,
          const std::vector<std::vector<std::int64_t>>& bad, const std::string& key, bool strided,
          GroupedReporter& rep) {
  Diagnostic diag = param_diagnostic(param, DiagCode::WStrided, param.loc, Severity::Warning);
  const std::string shards = bad_shards_text(param, plan, bad);
  if (strided) {
    diag.message = param.name + ": DTensor reads FSDP2's _StridedShard label of dim " +
                   std::to_string(param.geometry.fsdp_dim) +
                   " (over the rule's _StridedShard split) with other rows than FSDP2 stores on " +
                   shards;
    diag.hint =
        "FSDP2 (torch 2.13 _init_sharding_spec_tp) labels its split of a _StridedShard shard "
        "as if that shard were contiguous; the plan describes what FSDP2 stores and "
        "all-gathers: gather with FSDP2, not the sharded param's full_tensor() or a DCP "
        "save, or set fsdp.dim to another dim";
    rep.add(std::move(diag), key);
    return;
  }
  diag.message = param.name +
                 ": newest DTensor reads the _StridedShard label with different rows than "
                 "the physical FSDP2 layout on " +
                 shards;
  diag.hint =
      "the plan describes the physical layout; extent " +
      std::to_string(param.global_shape[static_cast<std::size_t>(param.geometry.fsdp_dim)]) +
      " is not divisible by the split factor: pad it, or avoid DTensor redistribution of "
      "this param";
  rep.add(std::move(diag), key);
}

// W-STRIDED for the ordered layouts (ordered_mismatches), on the ranks where they differ.
void check_ordered(const PlannedParam& param, const Plan& plan,
                   std::map<OrderedKey, std::vector<std::vector<std::int64_t>>>& cache,
                   GroupedReporter& rep) {
  const auto dim = static_cast<std::size_t>(param.geometry.fsdp_dim);
  const auto& chain = param.geometry.per_dim[dim];
  std::vector<AxisSplit> fsdp;
  for (std::size_t j = 0; j < chain.back().axes.size(); ++j)
    fsdp.push_back({chain.back().axes[j], chain.back().axis_sizes[j]});
  std::vector<AxisSplit> rule;
  std::vector<std::int64_t> ways;
  for (std::size_t i = 0; i + 1 < chain.size(); ++i) {
    rule.push_back({chain[i].axes.front(), chain[i].ways});
    ways.push_back(chain[i].ways);
  }
  const std::int64_t length = param.global_shape[dim];
  if (!within_budget(length, chain.back().ways, ways)) {
    note_unchecked(param, "DTensor's reading of the FSDP labels", rep);
    return;
  }
  const auto& bad = ordered_mismatches(cache, length, fsdp, rule);
  if (bad.empty()) return;
  std::string key = "ordered:" + std::to_string(length);
  for (const AxisSplit& axis : fsdp)
    key += ":f" + std::to_string(axis.position) + "x" + std::to_string(axis.ways);
  for (const AxisSplit& axis : rule)
    key += ":r" + std::to_string(axis.position) + "x" + std::to_string(axis.ways);
  Diagnostic diag = param_diagnostic(param, DiagCode::WStrided, param.loc, Severity::Warning);
  diag.message = param.name + ": DTensor reads the plan's labels of dim " + std::to_string(dim) +
                 " on the recipe's mesh with other rows than FSDP2 stores (one chunk of the " +
                 (rule.empty() ? "dim" : "TP/EP-local piece") + " over " +
                 (fsdp.size() > 1 ? "the FSDP axes flattened" : "the FSDP axis") + ") on " +
                 bad_shards_text(param, plan, bad);
  diag.hint =
      "the plan describes what FSDP2 stores (its own DTensor is on the flattened FSDP "
      "mesh); extent " +
      std::to_string(length) +
      " is not divisible by the ranks that split it: pad it, or do not read the "
      "sharded param through these labels (a DCP save, full_tensor() on the recipe "
      "mesh)";
  rep.add(std::move(diag), key);
}

}  // namespace

void check_strided(const std::vector<PlannedParam>& params, const Plan& plan,
                   DiagnosticSink& sink) {
  std::map<Key, std::vector<std::vector<std::int64_t>>> cache;
  // Params with the same extent and split factors have the same mismatch:
  // one warning each, "(and N more like it)", as for the other codes.
  std::map<StridedKey, std::vector<std::vector<std::int64_t>>> strided_cache;
  std::map<OrderedKey, std::vector<std::vector<std::int64_t>>> ordered_cache;
  GroupedReporter rep;
  for (const PlannedParam& param : params) {
    if (ordered_checkable(param)) {
      check_ordered(param, plan, ordered_cache, rep);
      continue;
    }
    const bool strided = strided_checkable(param);
    if (!strided && !checkable(param)) continue;
    const auto& chain = param.geometry.per_dim[static_cast<std::size_t>(param.geometry.fsdp_dim)];
    std::vector<std::int64_t> ways;
    std::vector<std::int64_t> factors;
    for (std::size_t i = 0; i + 1 < chain.size(); ++i) {
      ways.push_back(chain[i].ways);
      factors.push_back(chain[i].split_factor);
    }
    const std::int64_t length =
        param.global_shape[static_cast<std::size_t>(param.geometry.fsdp_dim)];
    if (strided ? !strided_within_budget(length, chain.back().ways, ways, factors)
                : !within_budget(length, chain.back().ways, ways)) {
      note_unchecked(param, "the _StridedShard reading", rep);
      continue;
    }
    const auto& bad =
        strided ? strided_mismatches(strided_cache, length, chain.back().ways, ways, factors)
                : mismatches(cache, length, chain.back().ways, ways);
    if (bad.empty()) continue;
    std::string key = std::string(strided ? "sf:" : "") + std::to_string(length) + ":" +
                      std::to_string(chain.back().ways);
    for (std::size_t i = 0; i < ways.size(); ++i)
      key += "x" + std::to_string(ways[i]) + (strided ? "/" + std::to_string(factors[i]) : "");
    warn(param, plan, bad, key, strided, rep);
  }
  rep.flush(sink);
}

}  // namespace shardc::passes
