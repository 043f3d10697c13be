// W-ACTIVATION-SPLIT: tensor parallelism pairs a colwise linear (weight
// [out, in] split on dim 0) with the next rowwise linear (weight split on
// dim 1): the activation between them stays split, so the rowwise weight's
// input pieces must be exactly the colwise weight's output pieces. A
// mismatch (different split rules, unit, pad or axes on an extent both
// share) computes garbage without any error at run time. Pairs are looked
// for inside one parent module (`a.b.up.weight` and `a.b.down.weight`),
// matched by extent (out of the colwise == in of the rowwise), model order.
// A fused colwise weight (q|k|v, gate|up on dim 0: contract §5.12) is matched
// part by part: its part of that extent (gate|up's parts against down_proj's
// input, q against o_proj's) must be split as the rowwise input, whether the
// parts are `packed` (each split on its own) or interleaved / per group (a
// piece of whole groups holds its share of each part). FSDP splits are
// storage only and are ignored. Sizes alone are not enough: a `_StridedShard`
// split (split_factor > 1) on one side and a plain one on the other give each
// rank other channels of the same count, so the split factors must agree too.
//
// 3-D expert weights pair the same way inside their module (`m.experts`):
// stacked nn.Linear weights [E, out, in] (a recipe's `experts: stack`) and
// [E, 2I, H] fused gate|up pair their dim 1 with down_proj's dim 2; the x @ W
// layout of Llama-4 / gpt-oss ([E, H, 2I] gate_up, fused on dim 2) pairs its
// dim 2 with down_proj's dim 1 ([E, I, H]).
#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "core/fused.hpp"
#include "planner/chain_pieces.hpp"
#include "planner/passes.hpp"

namespace shardc::passes {
namespace {

constexpr std::int64_t kMaxPieces = 4096;  // bound on the pieces compared per pair

// Parent module of `...parent.module.weight`, or nullopt for other names.
std::optional<std::string_view> parent_of(std::string_view fqn) {
  constexpr std::string_view suffix = ".weight";
  if (fqn.size() <= suffix.size() || fqn.substr(fqn.size() - suffix.size()) != suffix)
    return std::nullopt;
  std::string_view mod = fqn.substr(0, fqn.size() - suffix.size());
  const auto dot = mod.rfind('.');
  if (dot == std::string_view::npos) return std::string_view{};
  return mod.substr(0, dot);
}

// Sizes of the pieces of `length` under `chain`, indexed by the row-major
// flattening of the chain's axes in mesh order; empty when too many.
std::vector<std::int64_t> piece_sizes(std::int64_t length, const std::vector<DimSplit>& chain,
                                      std::size_t naxes) {
  std::vector<std::int64_t> out;
  const bool bounded = for_each_piece(chain, naxes, kMaxPieces, [&](auto coords) {
    out.push_back(split_extent(length, chain, coords));
  });
  return bounded ? out : std::vector<std::int64_t>{};
}

std::string sizes_text(const std::vector<std::int64_t>& sizes) {
  std::string text;
  for (std::size_t i = 0; i < sizes.size() && i < 16; ++i)
    text += (i ? ", " : "") + std::to_string(sizes[i]);
  if (sizes.size() > 16) text += ", ...";
  return text;
}

std::string chain_text(const std::vector<DimSplit>& chain) {
  std::string text;
  for (const DimSplit& split : chain) {
    text += (text.empty() ? "" : ", ") + uneven_text(split);
    if (split.split_factor > 1) text += " _StridedShard sf=" + std::to_string(split.split_factor);
  }
  return text;
}

bool same_axes(const std::vector<DimSplit>& first, const std::vector<DimSplit>& second) {
  if (first.size() != second.size()) return false;
  for (std::size_t i = 0; i < first.size(); ++i)
    if (first[i].axes != second[i].axes || first[i].split_factor != second[i].split_factor)
      return false;
  return true;
}

// The part of `col`'s output dim `dim` whose extent is `extent`: the whole dim
// of an unfused weight, else a part of its fused layout on that dim (blocked
// parts only when packed: unpacked ones are E-FUSED-SPLIT already). nullopt
// when none; SIZE_MAX for the whole dim.
std::optional<std::size_t> matching_part(const PlannedParam& col, std::size_t dim,
                                         std::int64_t extent) {
  if (!col.fused || col.fused->dim != static_cast<int>(dim)) {
    if (!col.geometry.parts.empty() || col.global_shape[dim] != extent) return std::nullopt;
    return col.fused ? std::nullopt : std::optional<std::size_t>(SIZE_MAX);
  }
  const FusedLayout& layout = *col.fused;
  const bool packed_blocked =
      col.geometry.parts == layout.parts && col.geometry.parts_dim == static_cast<int>(dim);
  if (layout.groups <= 1 && !packed_blocked) return std::nullopt;
  for (std::size_t i = 0; i < layout.parts.size(); ++i)
    if (layout.parts[i] == extent) return i;
  return std::nullopt;
}

// Pieces of `col`'s output as the activation sees them: the whole dim's
// pieces, or part `part`'s share of each piece. nullopt when a piece of an
// interleaved / per-group layout cuts a group: no per-part size describes it,
// and the cut is reported already (E-HEADS, W-FUSED-SPLIT / E-FUSED-SPLIT; a
// per-part comparison printed zeros for every rank).
std::optional<std::vector<std::int64_t>> col_pieces(const PlannedParam& col, std::size_t dim,
                                                    std::size_t part,
                                                    const std::vector<DimSplit>& chain,
                                                    std::size_t naxes) {
  if (part == SIZE_MAX) return piece_sizes(col.global_shape[dim], chain, naxes);
  const FusedLayout& layout = *col.fused;
  if (!col.geometry.parts.empty()) return piece_sizes(layout.parts[part], chain, naxes);
  // Interleaved / per group: pieces of whole groups.
  const std::int64_t group =
      std::max<std::int64_t>(1, col.global_shape[dim] / std::max<std::int64_t>(1, layout.groups));
  std::vector<std::int64_t> out = piece_sizes(col.global_shape[dim], chain, naxes);
  for (std::int64_t& piece : out) {
    if (piece % group != 0) return std::nullopt;
    piece = piece / group * (layout.parts[part] / layout.groups);
  }
  return out;
}

// One colwise weight: its output dim, and the input dim of the rowwise weights it feeds.
struct Colwise {
  std::size_t param = 0;
  std::size_t out_dim = 0;
  std::size_t in_dim = 1;  ///< of the rowwise weight
};

void check_pair(const PlannedParam& col, const Colwise& pair, std::size_t part,
                const PlannedParam& row, const Plan& plan, GroupedReporter& rep) {
  const std::int64_t extent = row.global_shape[pair.in_dim];
  const auto col_splits = rule_splits(col, pair.out_dim);
  const auto row_splits = rule_splits(row, pair.in_dim);
  if (col_splits.empty() || row_splits.empty())
    return;  // one side replicated: nothing lines up or not
  const std::size_t naxes = plan.mesh_of(col).axes.size();
  const std::optional<std::vector<std::int64_t>> col_split =
      col_pieces(col, pair.out_dim, part, col_splits, naxes);
  if (!col_split) return;
  const std::vector<std::int64_t>& pa = *col_split;
  const auto pb = piece_sizes(extent, row_splits, naxes);
  if (same_axes(col_splits, row_splits) && pa == pb) return;
  if (same_axes(col_splits, row_splits) && pa.empty()) return;  // too many pieces to compare
  Diagnostic diag = param_diagnostic(row, DiagCode::WActivationSplit, row.loc, Severity::Warning);
  const std::string what = part == SIZE_MAX ? std::string("its output dim ")
                                            : "its fused part " + col.fused->part_names[part] +
                                                  " (" + fused_order_name(*col.fused) + ") of ";
  diag.message = col.name + " (colwise) splits " + what + std::to_string(extent) + " as " +
                 sizes_text(pa) + " (" + chain_text(col_splits) + ") but " + row.name +
                 " (rowwise) splits its input dim as " + sizes_text(pb) + " (" +
                 chain_text(row_splits) + "): the activation between them does not line up";
  diag.hint =
      "split both on the same axes with the same uneven rule (and unit / pad) and the same "
      "_StridedShard split factor, e.g. set `uneven` on both rules alike";
  rep.add(std::move(diag), std::to_string(col.rule.index) + ":" + std::to_string(row.rule.index) +
                               ":" + std::to_string(extent));
}

// The module a 2-D `...module.weight` or a 3-D expert tensor (`m.experts.gate_up_proj`,
// no `.weight`) belongs to: its parent, where its pair partner lives.
std::optional<std::string_view> pair_module(const PlannedParam& param) {
  if (param.global_shape.size() == 2) return parent_of(param.name);
  std::string_view name = param.name;
  constexpr std::string_view suffix = ".weight";
  if (name.size() > suffix.size() && name.substr(name.size() - suffix.size()) == suffix)
    name = name.substr(0, name.size() - suffix.size());
  const auto dot = name.rfind('.');
  if (dot == std::string_view::npos) return std::nullopt;
  return name.substr(0, dot);
}

// The colwise role of `param`: 2-D [out, in] (dim 0 -> the next weight's dim 1); 3-D experts
// fused on dim 1 or 2 (gate|up) or stacked nn.Linear weights [E, out, in]. nullopt otherwise.
std::optional<Colwise> colwise_role(const PlannedParam& param, std::size_t index) {
  if (param.global_shape.size() == 2) return Colwise{index, 0, 1};
  if (param.fused && (param.fused->dim == 1 || param.fused->dim == 2)) {
    const auto out_dim = static_cast<std::size_t>(param.fused->dim);
    return Colwise{index, out_dim, out_dim == 1 ? std::size_t{2} : std::size_t{1}};
  }
  if (!param.stacked_from.empty()) return Colwise{index, 1, 2};
  return std::nullopt;
}

}  // namespace

void lint_activation_splits(const std::vector<PlannedParam>& params, const Plan& plan,
                            DiagnosticSink& sink) {
  // parent module -> colwise candidates seen so far
  std::unordered_map<std::string_view, std::vector<Colwise>> colwise;
  GroupedReporter rep;
  for (std::size_t i = 0; i < params.size(); ++i) {
    const PlannedParam& param = params[i];
    const std::size_t ndim = param.global_shape.size();
    if ((ndim != 2 && ndim != 3) || (ndim == 2 && param.mesh != MeshKind::Dense) ||
        param.geometry.per_dim.size() != ndim || param.placements.empty())
      continue;
    const auto parent = pair_module(param);
    if (!parent) continue;
    if (const auto it = colwise.find(*parent);
        it != colwise.end() && param.geometry.parts.empty()) {
      for (const Colwise& pair : it->second) {
        const PlannedParam& col = params[pair.param];
        if (col.global_shape.size() != ndim || col.mesh != param.mesh ||
            rule_splits(param, pair.in_dim).empty())
          continue;
        if (const auto part = matching_part(col, pair.out_dim, param.global_shape[pair.in_dim]))
          check_pair(col, pair, *part, param, plan, rep);
      }
    }
    const auto role = colwise_role(param, i);
    if (role && !rule_splits(param, role->out_dim).empty() &&
        (param.fused || param.geometry.parts.empty()))
      colwise[*parent].push_back(*role);
  }
  rep.flush(sink);
}

}  // namespace shardc::passes
