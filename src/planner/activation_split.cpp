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

// The axes a chain splits over, in order: "'tp'", "'dp', 'tp'".
std::string axes_text(const std::vector<DimSplit>& chain, const Mesh& mesh) {
  std::string axes;
  for (const DimSplit& split : chain)
    for (int axis : split.axes)
      axes += (axes.empty() ? "'" : ", '") + mesh.axes[static_cast<std::size_t>(axis)].name + "'";
  return axes;
}

// GPT-2's Conv1D modules: weight [in, out], so the output (and the bias) is dim 1.
bool conv1d_module(std::string_view weight_name) {
  for (std::string_view module : {".c_attn.weight", ".c_fc.weight", ".c_proj.weight"})
    if (weight_name.size() > module.size() &&
        weight_name.substr(weight_name.size() - module.size()) == module)
      return true;
  return false;
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
  const Mesh& mesh = plan.mesh_of(col);
  const std::size_t naxes = mesh.axes.size();
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
  diag.message =
      col.name + " (colwise) splits " + what + std::to_string(extent) + " as " + sizes_text(pa) +
      " (" + chain_text(col_splits) + ") but " + row.name + " (rowwise) splits its input dim as " +
      sizes_text(pb) + " (" + chain_text(row_splits) + ")" +
      (same_axes(col_splits, row_splits) ||
               axes_text(col_splits, mesh) == axes_text(row_splits, mesh)
           ? ""
           : ", over " + axes_text(col_splits, mesh) + " against " + axes_text(row_splits, mesh)) +
      ": the activation between them does not line up";
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
  if (param.global_shape.size() == 2)
    return conv1d_module(param.name) ? Colwise{index, 1, 0} : Colwise{index, 0, 1};
  if (param.fused && (param.fused->dim == 1 || param.fused->dim == 2)) {
    const auto out_dim = static_cast<std::size_t>(param.fused->dim);
    return Colwise{index, out_dim, out_dim == 1 ? std::size_t{2} : std::size_t{1}};
  }
  if (!param.stacked_from.empty()) return Colwise{index, 1, 2};
  return std::nullopt;
}

// The weight a bias is added to: `m.bias` -> `m.weight`, gpt-oss's `m.gate_up_proj_bias`
// -> `m.gate_up_proj` (`joined`: named with `_bias`, gpt-oss's x @ W experts).
struct BiasWeight {
  std::string name;
  bool joined = false;
};

std::optional<BiasWeight> bias_weight(std::string_view fqn) {
  constexpr std::string_view dotted = ".bias";
  constexpr std::string_view joined = "_bias";
  if (fqn.size() <= joined.size()) return std::nullopt;
  const std::string_view tail = fqn.substr(fqn.size() - joined.size());
  if (tail == dotted)
    return BiasWeight{std::string(fqn.substr(0, fqn.size() - dotted.size())) + ".weight", false};
  if (tail == joined)
    return BiasWeight{std::string(fqn.substr(0, fqn.size() - joined.size())), true};
  return std::nullopt;
}

// The output dim of `weight` that a bias of shape `bias_shape` is added along: dim 0 of
// nn.Linear [out, in] (and of a norm's 1-D weight, a conv's [out, ...]), dim 1 of GPT-2's
// Conv1D [in, out]; 3-D experts with a bias [E, out]: the fused dim, dim 1 of stacked
// nn.Linear weights [E, out, in], else the dim whose extent is the bias's (dim 2, x @ W,
// for gpt-oss's square [E, I, H] down_proj). nullopt when the shapes do not say.
std::optional<std::size_t> bias_out_dim(const PlannedParam& weight, const Shape& bias_shape,
                                        bool joined_name) {
  const Shape& shape = weight.global_shape;
  std::optional<std::size_t> dim;
  if (bias_shape.size() == 1 && shape.size() != 3) {
    dim = shape.size() == 2 && conv1d_module(weight.name) ? 1 : 0;
  } else if (bias_shape.size() == 2 && shape.size() == 3 && shape[0] == bias_shape[0]) {
    if (weight.fused && weight.fused->dim >= 1)
      dim = static_cast<std::size_t>(weight.fused->dim);
    else if (!weight.stacked_from.empty())
      dim = 1;
    else if (shape[1] == bias_shape[1] && shape[2] != bias_shape[1])
      dim = 1;
    else if (shape[2] == bias_shape[1] && (shape[1] != bias_shape[1] || joined_name))
      dim = 2;
  }
  if (!dim || *dim >= shape.size() || shape[*dim] != bias_shape.back()) return std::nullopt;
  return dim;
}

std::string split_text(const std::vector<DimSplit>& chain, const std::vector<std::int64_t>& sizes,
                       const Mesh& mesh) {
  if (chain.empty()) return "not split (every rank holds all of it)";
  return "split over " + axes_text(chain, mesh) + " as " + sizes_text(sizes) + " (" +
         chain_text(chain) + ")";
}

// A bias is added to its weight's output: its pieces must be the output's pieces
// (transformers' ColwiseParallel shards the bias `Shard(-1)` with the weight, its
// RowwiseParallel keeps it Replicate(), tensor_parallel.py; Megatron's
// ColumnParallelLinear holds the bias of its output partition, RowParallelLinear a full
// one added after the reduce). A colwise weight with a whole bias, or a bias split where
// the weight's output is not, adds the wrong entries (local tensors: a shape error;
// DTensor: a silent redistribute on every step).
void check_bias(const PlannedParam& bias, const PlannedParam& weight, std::size_t out_dim,
                const Plan& plan, GroupedReporter& rep) {
  const std::size_t bias_dim = bias.global_shape.size() - 1;
  const auto weight_splits = rule_splits(weight, out_dim);
  const auto bias_splits = rule_splits(bias, bias_dim);
  const bool weight_packed =
      !weight.geometry.parts.empty() && weight.geometry.parts_dim == static_cast<int>(out_dim);
  const bool bias_packed =
      !bias.geometry.parts.empty() && bias.geometry.parts_dim == static_cast<int>(bias_dim);
  const std::size_t naxes = plan.mesh_of(weight).axes.size();
  const std::int64_t extent = bias.global_shape[bias_dim];
  const auto weight_sizes = piece_sizes(extent, weight_splits, naxes);
  const auto bias_sizes = piece_sizes(extent, bias_splits, naxes);
  const bool same_parts =
      weight_packed == bias_packed &&
      (!weight_packed || (weight.geometry.parts == bias.geometry.parts &&
                          weight.geometry.part_replicas == bias.geometry.part_replicas));
  if (weight_splits.empty() && bias_splits.empty()) return;
  if (same_axes(weight_splits, bias_splits) && weight_sizes == bias_sizes && same_parts &&
      std::equal(weight_splits.begin(), weight_splits.end(), bias_splits.begin(),
                 [](const DimSplit& lhs, const DimSplit& rhs) {
                   return lhs.rule == rhs.rule && lhs.unit == rhs.unit &&
                          lhs.pad_multiple == rhs.pad_multiple;
                 }))
    return;
  const Mesh& mesh = plan.mesh_of(weight);
  Diagnostic diag = param_diagnostic(bias, DiagCode::WActivationSplit, bias.loc, Severity::Warning);
  diag.message = bias.name + " is added to the output of " + weight.name + " (its dim " +
                 std::to_string(out_dim) + ", " + std::to_string(extent) + "), which is " +
                 split_text(weight_splits, weight_sizes, mesh) +
                 (weight_packed ? " per packed part" : "") + ", but the bias is " +
                 split_text(bias_splits, bias_sizes, mesh) +
                 (bias_packed ? " per packed part" : "") +
                 ": a rank adds other bias entries than its output's";
  diag.hint = weight_splits.empty()
                  ? "replicate the bias: the weight's output is whole on every rank (a rowwise "
                    "layer's bias is added after the reduce; transformers' RowwiseParallel keeps "
                    "it Replicate())"
                  : "split the bias's dim " + std::to_string(bias_dim) + " as the weight's dim " +
                        std::to_string(out_dim) + ": the same axes, uneven rule" +
                        (weight_packed ? " and `packed` parts" : "") +
                        " (transformers' ColwiseParallel shards the bias with its weight)";
  rep.add(std::move(diag), "bias:" + std::to_string(weight.rule.index) + ":" +
                               std::to_string(bias.rule.index) + ":" + std::to_string(out_dim));
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
  // Biases against their weights.
  std::unordered_map<std::string_view, std::size_t> by_name;
  for (std::size_t i = 0; i < params.size(); ++i) {
    const PlannedParam& bias = params[i];
    const std::size_t ndim = bias.global_shape.size();
    if ((ndim != 1 && ndim != 2) || bias.geometry.per_dim.size() != ndim) continue;
    const std::optional<BiasWeight> of = bias_weight(bias.name);
    if (!of) continue;
    if (by_name.empty()) {
      by_name.reserve(params.size());
      for (std::size_t j = 0; j < params.size(); ++j) by_name.emplace(params[j].name, j);
    }
    const auto it = by_name.find(of->name);
    if (it == by_name.end()) continue;
    const PlannedParam& weight = params[it->second];
    if (weight.mesh != bias.mesh || weight.geometry.per_dim.size() != weight.global_shape.size())
      continue;
    if (const auto out_dim = bias_out_dim(weight, bias.global_shape, of->joined))
      check_bias(bias, weight, *out_dim, plan, rep);
  }
  rep.flush(sink);
}

}  // namespace shardc::passes
