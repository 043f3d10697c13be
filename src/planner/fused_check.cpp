// W-FUSED-SPLIT / E-FUSED-LAYOUT (contract §5.12): a fused param (q|k|v,
// gate|up in one tensor) split on its fused dim must be split part by part,
// as the runtimes shard the unfused tensors: blocked parts need `packed`
// (each part split on its own); interleaved and per-group layouts hold every
// part's share contiguously, so a plain split is right exactly when every
// boundary falls between whole groups. A `packed` that contradicts the known
// layout (another dim, other extents, blocked parts on an interleaved tensor)
// is an error too. FSDP splits are storage only (FSDP2 gathers before use)
// and are not checked.
#include <string>
#include <utility>
#include <vector>

#include <unordered_map>

#include "core/fused.hpp"
#include "planner/chain_pieces.hpp"
#include "planner/passes.hpp"

namespace shardc::passes {
namespace {

constexpr std::int64_t kMaxPieces = 4096;  // bound on the pieces looked at per param

// One piece of the fused dim: the rank holding it (other axes at 0) and its rows.
struct FusedPiece {
  std::int64_t rank = 0;
  std::int64_t start = 0;
  std::int64_t size = 0;
};

// Every piece of `length` under `chain` (at most kMaxPieces), in the order of
// the flattened chain axes.
std::vector<FusedPiece> pieces_of(std::int64_t length, const std::vector<DimSplit>& chain,
                                  const Mesh& mesh) {
  std::vector<std::int64_t> stride(mesh.axes.size(), 1);
  for (std::size_t a = mesh.axes.size(); a-- > 1;) stride[a - 1] = stride[a] * mesh.axes[a].size;
  std::vector<FusedPiece> out;
  const bool bounded = for_each_piece(chain, mesh.axes.size(), kMaxPieces, [&](auto coords) {
    const DimPiece piece = apply_chain(length, chain, coords);
    std::int64_t rank = 0;
    for (std::size_t a = 0; a < coords.size(); ++a) rank += coords[a] * stride[a];
    out.push_back({rank, piece.start, piece.real});
  });
  return bounded ? out : std::vector<FusedPiece>{};
}

std::string part_list(const FusedLayout& layout) {
  std::string text;
  for (std::size_t i = 0; i < layout.parts.size(); ++i)
    text += (i ? ", " : "") + layout.part_names[i] + " " + std::to_string(layout.parts[i]);
  return text;
}

std::string names_joined(const FusedLayout& layout, const char* sep) {
  std::string text;
  for (std::size_t i = 0; i < layout.part_names.size(); ++i)
    text += (i ? sep : "") + layout.part_names[i];
  return text;
}

std::string layout_text(const FusedLayout& layout) {
  std::string text = "fused " + names_joined(layout, "|") + " on dim " +
                     std::to_string(layout.dim) + " (" + fused_order_name(layout);
  if (layout.groups > 1)
    text += ", " + std::to_string(layout.groups) + " groups of " +
            std::to_string(fused_group_extent(layout));
  return text + ": " + part_list(layout) + "; " + layout.source + ")";
}

std::string axes_text(const std::vector<DimSplit>& chain, const Mesh& mesh) {
  std::string text;
  std::int64_t ways = 1;
  for (const DimSplit& split : chain)
    for (std::size_t i = 0; i < split.axes.size(); ++i) {
      text += (text.empty() ? "" : " x ") + mesh.axes[static_cast<std::size_t>(split.axes[i])].name;
      ways *= split.axis_sizes[i];
    }
  return text + " (" + std::to_string(ways) + " ways)";
}

// The first piece that holds something other than its share of every part.
std::optional<FusedPiece> wrong_piece(const FusedLayout& layout,
                                      const std::vector<FusedPiece>& pieces, std::int64_t length) {
  if (layout.groups > 1) {
    const std::int64_t group_extent = fused_group_extent(layout);
    for (const FusedPiece& pc : pieces) {
      if (pc.size == 0) continue;
      const std::int64_t end = pc.start + pc.size;
      if (pc.start % group_extent != 0 || (end % group_extent != 0 && end != length)) return pc;
    }
    return std::nullopt;
  }
  // Blocked: a contiguous piece of a tensor of >= 2 non-empty parts is never
  // a share of each part; name the first piece crossing a part boundary, else
  // the first non-empty one (it holds a single part).
  int nonempty = 0;
  for (std::int64_t part : layout.parts) nonempty += part > 0 ? 1 : 0;
  if (nonempty < 2) return std::nullopt;
  const FusedPiece* first = nullptr;
  for (const FusedPiece& pc : pieces) {
    if (pc.size == 0) continue;
    if (first == nullptr) first = &pc;
    std::int64_t base = 0;
    for (std::int64_t part : layout.parts) {
      base += part;
      if (base > pc.start && base < pc.start + pc.size) return pc;
    }
  }
  if (first == nullptr) return std::nullopt;
  return *first;
}

// Grouping key of the rule or experts entry that placed `p`.
std::string rule_key(const PlannedParam& param) {
  return (param.rule.kind == RuleRef::Kind::Experts ? "e" : "r") + std::to_string(param.rule.index);
}

// A strided chain (`_StridedShard` labels that are no shard order, read as DTensor reads
// them: several runs per rank) on a blocked fused dim: right exactly when every piece's
// runs are what `packed` gives, each part split by the same splits on its own (transformers'
// packed_colwise / packed_rowwise `_StridedShard(d, split_factor=parts)` on equal parts).
// The first piece whose runs differ, as its first run; nullopt when all agree or the
// layout has groups (checked by `wrong_piece` on the first run: not here).
std::optional<FusedPiece> wrong_strided_piece(const FusedLayout& layout,
                                              const std::vector<DimSplit>& chain,
                                              std::int64_t length, const Mesh& mesh) {
  ParamGeometry strided;
  strided.global_shape = {length};
  strided.per_dim = {chain};
  ParamGeometry packed = strided;
  for (DimSplit& split : packed.per_dim[0]) split.split_factor = 1;
  packed.parts = layout.parts;
  packed.parts_dim = 0;
  std::vector<FusedPiece> pieces = pieces_of(length, chain, mesh);
  for (const FusedPiece& pc : pieces) {
    const std::vector<std::int64_t> coords = mesh_coords(mesh, pc.rank);
    const ShardGeom strided_shard = shard_at(strided, coords);
    const ShardGeom packed_shard = shard_at(packed, coords);
    std::vector<std::pair<std::int64_t, std::int64_t>> runs_a, runs_b;
    for (const ShardBox& box : strided_shard.boxes)
      runs_a.emplace_back(box.global_offset[0], box.shape[0]);
    for (const ShardBox& box : packed_shard.boxes)
      runs_b.emplace_back(box.global_offset[0], box.shape[0]);
    // packed boxes never merge across parts; the strided runs do where they touch
    std::vector<std::pair<std::int64_t, std::int64_t>> merged;
    for (const auto& run : runs_b) {
      if (!merged.empty() && merged.back().first + merged.back().second == run.first)
        merged.back().second += run.second;
      else
        merged.push_back(run);
    }
    if (runs_a != merged)
      return FusedPiece{pc.rank, runs_a.empty() ? 0 : runs_a.front().first,
                        runs_a.empty() ? 0 : runs_a.front().second};
  }
  return std::nullopt;
}

void check_split(const PlannedParam& param, const FusedLayout& layout,
                 const std::vector<DimSplit>& chain, const Plan& plan, const Recipe& recipe,
                 GroupedReporter& rep) {
  const Mesh& mesh = plan.mesh_of(param);
  const std::int64_t length = param.global_shape[static_cast<std::size_t>(layout.dim)];
  const std::vector<FusedPiece> pieces = pieces_of(length, chain, mesh);
  const std::optional<FusedPiece> bad = strided_chain(chain) && layout.groups <= 1
                                            ? wrong_strided_piece(layout, chain, length, mesh)
                                            : wrong_piece(layout, pieces, length);
  if (!bad) return;
  Diagnostic diag =
      param_diagnostic(param, DiagCode::WFusedSplit, rule_loc(param, recipe), Severity::Warning);
  diag.message = param.name + " is " + layout_text(layout) + ", but its rule splits dim " +
                 std::to_string(layout.dim) + " as one tensor over " + axes_text(chain, mesh) +
                 ": rank " + std::to_string(bad->rank) + " holds " +
                 fused_range_text(layout, bad->start, bad->start + bad->size) +
                 ", not its share of " + names_joined(layout, ", ");
  diag.hint = "add `" + fused_packed_line(layout, param.global_shape.size()) +
              "` to its rule: each part is then split on its own, as the unfused tensors are";
  if (layout.groups > 1)
    diag.hint +=
        " (or a `unit:` of whole groups of " + std::to_string(fused_group_extent(layout)) + ")";
  rep.add(std::move(diag), rule_key(param) + ":" + layout.source + ":" + std::to_string(length) +
                               ":" + std::to_string(layout.dim));
}

void check_declared(const PlannedParam& param, const FusedLayout& layout,
                    const FusedLayout& declared, const PackedSpec& packed, GroupedReporter& rep) {
  std::string what;
  if (declared.dim != layout.dim) {
    what = "declares parts on dim " + std::to_string(declared.dim);
  } else if (declared.parts != layout.parts) {
    what = "declares parts " + part_list(declared) + " (" + fused_order_name(declared) + ")";
  } else if (declared.groups != layout.groups) {
    what = std::string("declares ") + fused_order_name(declared) + " parts";
    if (declared.groups > 1) what += " in " + std::to_string(declared.groups) + " groups";
    if (declared.groups == 1)
      what += ": each part would be split as a block, which takes the wrong elements of an " +
              std::string(fused_order_name(layout)) + " tensor";
  } else {
    return;
  }
  Diagnostic diag = param_diagnostic(param, DiagCode::EFusedLayout, packed.loc);
  diag.message = param.name + " is " + layout_text(layout) + ", but its rule's `packed` " + what;
  diag.hint = "use `" + fused_packed_line(layout, param.global_shape.size()) + "`";
  rep.add(std::move(diag), rule_key(param) + ":" + layout.source + ":" + what);
}

// Megatron-Core's `linear_fc1` is gate|up (blocked: each TP rank's gate
// rows, then its up rows, stride 2) exactly when the MLP is gated: then its
// output width is twice linear_fc2's input width (megatron/core/transformer/
// mlp.py MLP.__init__ and moe/experts.py TEGroupedMLP.__init__: "if
// self.config.gated_linear_unit: ffn_hidden_size *= 2"). The model names no
// activation, so the sibling `linear_fc2` of the same module decides it;
// stacked experts ([E, 2F, H] beside [E, H, F]) alike.
std::optional<FusedLayout> megatron_fc1(
    const PlannedParam& param,
    const std::unordered_map<std::string_view, const PlannedParam*>& fc2s) {
  // `linear_fc1` as a whole segment: `….linear_fc1.weight`, or a stacked `….linear_fc1`.
  const std::size_t at = param.name.rfind("linear_fc1");
  if (at == std::string::npos || param.global_shape.size() < 2) return std::nullopt;
  const std::size_t end = at + 10;
  if ((at > 0 && param.name[at - 1] != '.') || (end < param.name.size() && param.name[end] != '.'))
    return std::nullopt;
  std::string sibling = param.name;
  sibling.replace(at, 10, "linear_fc2");
  const auto it = fc2s.find(sibling);
  if (it == fc2s.end()) return std::nullopt;
  const Shape& fc1 = param.global_shape;
  const Shape& fc2 = it->second->global_shape;
  const std::size_t ndim = fc1.size();
  if (fc2.size() != ndim || fc1[ndim - 2] != 2 * fc2[ndim - 1] || fc1[ndim - 1] != fc2[ndim - 2])
    return std::nullopt;
  for (std::size_t d = 0; d + 2 < ndim; ++d)
    if (fc1[d] != fc2[d]) return std::nullopt;
  FusedLayout layout;
  layout.dim = static_cast<int>(ndim - 2);
  layout.parts = {fc1[ndim - 2] / 2, fc1[ndim - 2] / 2};
  layout.part_names = {"gate", "up"};
  layout.source =
      "Megatron-Core (MLP / TEGroupedMLP with gated_linear_unit: linear_fc1 is twice "
      "linear_fc2's input, gate rows then up rows)";
  return layout;
}

}  // namespace

void check_fused(std::vector<PlannedParam>& params, const Plan& plan, const Model& model,
                 const Recipe& recipe, DiagnosticSink& sink) {
  GroupedReporter rep;
  std::unordered_map<std::string_view, const PlannedParam*> fc2s;
  for (const PlannedParam& param : params)
    if (param.name.find("linear_fc2") != std::string::npos) fc2s.emplace(param.name, &param);
  for (PlannedParam& param : params) {
    if (!param.fused)
      param.fused =
          known_fused(param.name, param.global_shape, model.attributes_of(param.name), "");
    if (!param.fused && !fc2s.empty()) param.fused = megatron_fc1(param, fc2s);
    if (!param.fused || param.rule.index < 0 || param.scale_of) continue;
    if (param.geometry.per_dim.size() != param.global_shape.size() || param.placements.empty())
      continue;
    const FusedLayout& layout = *param.fused;
    if (static_cast<std::size_t>(layout.dim) >= param.global_shape.size()) continue;
    const PackedSpec* packed = packed_spec(param, recipe);
    std::optional<FusedLayout> declared;
    if (packed != nullptr) {
      std::string why;
      std::string hint;
      declared = packed_layout(*packed, param.global_shape, &why, &hint);
      if (!declared) continue;  // E-PACKED already
    }
    const std::vector<DimSplit> chain = rule_splits(param, static_cast<std::size_t>(layout.dim));
    if (declared) {
      const bool split =
          !chain.empty() || !rule_splits(param, static_cast<std::size_t>(declared->dim)).empty();
      if (split) check_declared(param, layout, *declared, *packed, rep);
      continue;
    }
    if (!chain.empty()) check_split(param, layout, chain, plan, recipe, rep);
  }
  rep.flush(sink);
}

}  // namespace shardc::passes
