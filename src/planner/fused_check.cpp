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

std::string part_list(const FusedLayout& f) {
  std::string t;
  for (std::size_t i = 0; i < f.parts.size(); ++i)
    t += (i ? ", " : "") + f.part_names[i] + " " + std::to_string(f.parts[i]);
  return t;
}

std::string names_joined(const FusedLayout& f, const char* sep) {
  std::string t;
  for (std::size_t i = 0; i < f.part_names.size(); ++i) t += (i ? sep : "") + f.part_names[i];
  return t;
}

std::string layout_text(const FusedLayout& f) {
  std::string t = "fused " + names_joined(f, "|") + " on dim " + std::to_string(f.dim) + " (" +
                  fused_order_name(f);
  if (f.groups > 1)
    t += ", " + std::to_string(f.groups) + " groups of " + std::to_string(fused_group_extent(f));
  return t + ": " + part_list(f) + "; " + f.source + ")";
}

std::string axes_text(const std::vector<DimSplit>& chain, const Mesh& mesh) {
  std::string t;
  std::int64_t ways = 1;
  for (const DimSplit& s : chain)
    for (std::size_t i = 0; i < s.axes.size(); ++i) {
      t += (t.empty() ? "" : " x ") + mesh.axes[static_cast<std::size_t>(s.axes[i])].name;
      ways *= s.axis_sizes[i];
    }
  return t + " (" + std::to_string(ways) + " ways)";
}

// The first piece that holds something other than its share of every part.
std::optional<FusedPiece> wrong_piece(const FusedLayout& f, const std::vector<FusedPiece>& pieces,
                                      std::int64_t length) {
  if (f.groups > 1) {
    const std::int64_t g = fused_group_extent(f);
    for (const FusedPiece& pc : pieces) {
      if (pc.size == 0) continue;
      const std::int64_t end = pc.start + pc.size;
      if (pc.start % g != 0 || (end % g != 0 && end != length)) return pc;
    }
    return std::nullopt;
  }
  // Blocked: a contiguous piece of a tensor of >= 2 non-empty parts is never
  // a share of each part; name the first piece crossing a part boundary, else
  // the first non-empty one (it holds a single part).
  int nonempty = 0;
  for (std::int64_t x : f.parts) nonempty += x > 0 ? 1 : 0;
  if (nonempty < 2) return std::nullopt;
  const FusedPiece* first = nullptr;
  for (const FusedPiece& pc : pieces) {
    if (pc.size == 0) continue;
    if (first == nullptr) first = &pc;
    std::int64_t base = 0;
    for (std::int64_t x : f.parts) {
      base += x;
      if (base > pc.start && base < pc.start + pc.size) return pc;
    }
  }
  if (first == nullptr) return std::nullopt;
  return *first;
}

// Grouping key of the rule or experts entry that placed `p`.
std::string rule_key(const PlannedParam& p) {
  return (p.rule.kind == RuleRef::Kind::Experts ? "e" : "r") + std::to_string(p.rule.index);
}

// A strided chain (`_StridedShard` labels that are no shard order, read as DTensor reads
// them: several runs per rank) on a blocked fused dim: right exactly when every piece's
// runs are what `packed` gives, each part split by the same splits on its own (transformers'
// packed_colwise / packed_rowwise `_StridedShard(d, split_factor=parts)` on equal parts).
// The first piece whose runs differ, as its first run; nullopt when all agree or the
// layout has groups (checked by `wrong_piece` on the first run: not here).
std::optional<FusedPiece> wrong_strided_piece(const FusedLayout& f,
                                              const std::vector<DimSplit>& chain,
                                              std::int64_t length, const Mesh& mesh) {
  ParamGeometry strided;
  strided.global_shape = {length};
  strided.per_dim = {chain};
  ParamGeometry packed = strided;
  for (DimSplit& s : packed.per_dim[0]) s.split_factor = 1;
  packed.parts = f.parts;
  packed.parts_dim = 0;
  std::vector<FusedPiece> pieces = pieces_of(length, chain, mesh);
  for (const FusedPiece& pc : pieces) {
    const std::vector<std::int64_t> coords = mesh_coords(mesh, pc.rank);
    const ShardGeom a = shard_at(strided, coords);
    const ShardGeom b = shard_at(packed, coords);
    std::vector<std::pair<std::int64_t, std::int64_t>> runs_a, runs_b;
    for (const ShardBox& x : a.boxes) runs_a.emplace_back(x.global_offset[0], x.shape[0]);
    for (const ShardBox& x : b.boxes) runs_b.emplace_back(x.global_offset[0], x.shape[0]);
    // packed boxes never merge across parts; the strided runs do where they touch
    std::vector<std::pair<std::int64_t, std::int64_t>> merged;
    for (const auto& r : runs_b) {
      if (!merged.empty() && merged.back().first + merged.back().second == r.first)
        merged.back().second += r.second;
      else
        merged.push_back(r);
    }
    if (runs_a != merged)
      return FusedPiece{pc.rank, runs_a.empty() ? 0 : runs_a.front().first,
                        runs_a.empty() ? 0 : runs_a.front().second};
  }
  return std::nullopt;
}

void check_split(const PlannedParam& p, const FusedLayout& f, const std::vector<DimSplit>& chain,
                 const Plan& plan, const Recipe& recipe, GroupedReporter& rep) {
  const Mesh& mesh = plan.mesh_of(p);
  const std::int64_t length = p.global_shape[static_cast<std::size_t>(f.dim)];
  const std::vector<FusedPiece> pieces = pieces_of(length, chain, mesh);
  const std::optional<FusedPiece> bad = strided_chain(chain) && f.groups <= 1
                                            ? wrong_strided_piece(f, chain, length, mesh)
                                            : wrong_piece(f, pieces, length);
  if (!bad) return;
  Diagnostic d = param_diagnostic(p, DiagCode::WFusedSplit, rule_loc(p, recipe), Severity::Warning);
  d.message = p.name + " is " + layout_text(f) + ", but its rule splits dim " +
              std::to_string(f.dim) + " as one tensor over " + axes_text(chain, mesh) + ": rank " +
              std::to_string(bad->rank) + " holds " +
              fused_range_text(f, bad->start, bad->start + bad->size) + ", not its share of " +
              names_joined(f, ", ");
  d.hint = "add `" + fused_packed_line(f, p.global_shape.size()) +
           "` to its rule: each part is then split on its own, as the unfused tensors are";
  if (f.groups > 1)
    d.hint += " (or a `unit:` of whole groups of " + std::to_string(fused_group_extent(f)) + ")";
  rep.add(std::move(d), rule_key(p) + ":" + f.source + ":" + std::to_string(length) + ":" +
                            std::to_string(f.dim));
}

void check_declared(const PlannedParam& p, const FusedLayout& f, const FusedLayout& declared,
                    const PackedSpec& packed, GroupedReporter& rep) {
  std::string what;
  if (declared.dim != f.dim) {
    what = "declares parts on dim " + std::to_string(declared.dim);
  } else if (declared.parts != f.parts) {
    what = "declares parts " + part_list(declared) + " (" + fused_order_name(declared) + ")";
  } else if (declared.groups != f.groups) {
    what = std::string("declares ") + fused_order_name(declared) + " parts";
    if (declared.groups > 1) what += " in " + std::to_string(declared.groups) + " groups";
    if (declared.groups == 1)
      what += ": each part would be split as a block, which takes the wrong elements of an " +
              std::string(fused_order_name(f)) + " tensor";
  } else {
    return;
  }
  Diagnostic d = param_diagnostic(p, DiagCode::EFusedLayout, packed.loc);
  d.message = p.name + " is " + layout_text(f) + ", but its rule's `packed` " + what;
  d.hint = "use `" + fused_packed_line(f, p.global_shape.size()) + "`";
  rep.add(std::move(d), rule_key(p) + ":" + f.source + ":" + what);
}

// Megatron-Core's `linear_fc1` is gate|up (blocked: each TP rank's gate
// rows, then its up rows, stride 2) exactly when the MLP is gated: then its
// output width is twice linear_fc2's input width (megatron/core/transformer/
// mlp.py MLP.__init__ and moe/experts.py TEGroupedMLP.__init__: "if
// self.config.gated_linear_unit: ffn_hidden_size *= 2"). The model names no
// activation, so the sibling `linear_fc2` of the same module decides it;
// stacked experts ([E, 2F, H] beside [E, H, F]) alike.
std::optional<FusedLayout> megatron_fc1(
    const PlannedParam& p, const std::unordered_map<std::string_view, const PlannedParam*>& fc2s) {
  // `linear_fc1` as a whole segment: `….linear_fc1.weight`, or a stacked `….linear_fc1`.
  const std::size_t at = p.name.rfind("linear_fc1");
  if (at == std::string::npos || p.global_shape.size() < 2) return std::nullopt;
  const std::size_t end = at + 10;
  if ((at > 0 && p.name[at - 1] != '.') || (end < p.name.size() && p.name[end] != '.'))
    return std::nullopt;
  std::string sibling = p.name;
  sibling.replace(at, 10, "linear_fc2");
  const auto it = fc2s.find(sibling);
  if (it == fc2s.end()) return std::nullopt;
  const Shape& fc1 = p.global_shape;
  const Shape& fc2 = it->second->global_shape;
  const std::size_t n = fc1.size();
  if (fc2.size() != n || fc1[n - 2] != 2 * fc2[n - 1] || fc1[n - 1] != fc2[n - 2])
    return std::nullopt;
  for (std::size_t d = 0; d + 2 < n; ++d)
    if (fc1[d] != fc2[d]) return std::nullopt;
  FusedLayout f;
  f.dim = static_cast<int>(n - 2);
  f.parts = {fc1[n - 2] / 2, fc1[n - 2] / 2};
  f.part_names = {"gate", "up"};
  f.source =
      "Megatron-Core (MLP / TEGroupedMLP with gated_linear_unit: linear_fc1 is twice "
      "linear_fc2's input, gate rows then up rows)";
  return f;
}

}  // namespace

void check_fused(std::vector<PlannedParam>& params, const Plan& plan, const Model& model,
                 const Recipe& recipe, DiagnosticSink& sink) {
  GroupedReporter rep;
  std::unordered_map<std::string_view, const PlannedParam*> fc2s;
  for (const PlannedParam& p : params)
    if (p.name.find("linear_fc2") != std::string::npos) fc2s.emplace(p.name, &p);
  for (PlannedParam& p : params) {
    if (!p.fused) p.fused = known_fused(p.name, p.global_shape, model.attributes_of(p.name), "");
    if (!p.fused && !fc2s.empty()) p.fused = megatron_fc1(p, fc2s);
    if (!p.fused || p.rule.index < 0 || p.scale_of) continue;
    if (p.geometry.per_dim.size() != p.global_shape.size() || p.placements.empty()) continue;
    const FusedLayout& f = *p.fused;
    if (static_cast<std::size_t>(f.dim) >= p.global_shape.size()) continue;
    const PackedSpec* packed = packed_spec(p, recipe);
    std::optional<FusedLayout> declared;
    if (packed != nullptr) {
      std::string why;
      std::string hint;
      declared = packed_layout(*packed, p.global_shape, &why, &hint);
      if (!declared) continue;  // E-PACKED already
    }
    const std::vector<DimSplit> chain = rule_splits(p, static_cast<std::size_t>(f.dim));
    if (declared) {
      const bool split =
          !chain.empty() || !rule_splits(p, static_cast<std::size_t>(declared->dim)).empty();
      if (split) check_declared(p, f, *declared, *packed, rep);
      continue;
    }
    if (!chain.empty()) check_split(p, f, chain, plan, recipe, rep);
  }
  rep.flush(sink);
}

}  // namespace shardc::passes
