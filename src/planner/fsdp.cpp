// FSDP / HSDP on top of the placements (contract §5.3): FSDP2 shards the
// TP/EP-local tensor on `dim` with torch.chunk over the flattened shard axes;
// rank (f, t) holds piece f of its TP-local piece t. Labels follow PyTorch:
// `_StridedShard(dim, sf=F)` when other axes already shard that dim.
#include <algorithm>
#include <set>
#include <string>
#include <string_view>

#include "planner/passes.hpp"

namespace shardc::passes {
namespace {

struct FsdpAxes {
  std::vector<int> axes;
  std::vector<std::int64_t> sizes;
  std::int64_t ways = 1;
  std::vector<SourceLoc> locs;  ///< where each axis is written (the fsdp loc if unknown)
  const char* field = "shard";  ///< `shard` or `expert_shard`
  const Mesh* mesh = nullptr;
};

// "dp_shard (8), tp (8)".
std::string axis_list(const Mesh& mesh) {
  std::string s;
  for (const MeshAxis& a : mesh.axes)
    s += (s.empty() ? "" : ", ") + a.name + " (" + std::to_string(a.size) + ")";
  return s;
}

// Looks up the FSDP axes in `mesh`; reports E-AXIS for a missing one.
std::optional<FsdpAxes> find_axes(const std::vector<std::string>& names,
                                  const std::vector<SourceLoc>& locs, const Mesh& mesh,
                                  const char* field, const SourceLoc& loc, DiagnosticSink& sink) {
  FsdpAxes f;
  f.field = field;
  f.mesh = &mesh;
  const bool expert = std::string_view(field) == "expert_shard";
  const char* mesh_name = expert ? "expert_mesh" : "mesh";
  for (std::size_t i = 0; i < names.size(); ++i) {
    const std::string& n = names[i];
    const int a = mesh.find(n);
    if (a < 0) {
      sink.error(DiagCode::EAxis, i < locs.size() ? locs[i] : loc,
                 std::string("fsdp.") + field + " names axis '" + n + "' but the " + mesh_name +
                     " has no such axis",
                 std::string("axes of the ") + mesh_name + ": " + axis_list(mesh) +
                     (expert ? "" : " (expert_mesh axes go in fsdp.expert_shard)"));
      return std::nullopt;
    }
    f.axes.push_back(a);
    f.locs.push_back(i < locs.size() && locs[i].line > 0 ? locs[i] : loc);
    f.sizes.push_back(mesh.axes[static_cast<std::size_t>(a)].size);
    f.ways *= mesh.axes[static_cast<std::size_t>(a)].size;
  }
  return f;
}

// Distinct extents of dim `d` after the placement splits (before FSDP).
std::set<std::int64_t> local_extents(const ParamGeometry& g, std::size_t d) {
  std::set<std::int64_t> cur{g.global_shape[d]};
  for (const DimSplit& s : g.per_dim[d]) {
    std::set<std::int64_t> next;
    for (std::int64_t len : cur)
      for (std::int64_t k = 0; k < s.ways; ++k) {
        next.insert(split_piece(len, k, s).size);
        if (next.size() > 4) break;  // chunk/balanced pieces take at most 3 sizes
      }
    cur = std::move(next);
  }
  return cur;
}

int resolve_dim(const PlannedParam& p, const FsdpSpec& spec, const FsdpAxes& f) {
  if (p.mesh == MeshKind::Dense || spec.expert_dim == ExpertDim::Zero) return spec.dim;
  if (spec.expert_dim == ExpertDim::One) return 1;
  // auto (torchtitan): shard experts on dim 1 when the FSDP x EP ranks
  // outnumber the experts, else on dim 0.
  std::int64_t ep = 1;
  for (const DimSplit& s : p.geometry.per_dim[0]) ep *= s.ways;
  return f.ways * ep > p.global_shape[0] ? 1 : 0;
}

void label(PlannedParam& p, const FsdpAxes& f, int dim) {
  std::int64_t sf = 1;
  for (const DimSplit& s : p.geometry.per_dim[static_cast<std::size_t>(dim)]) sf *= s.ways;
  for (int a : f.axes) {
    auto& rp = p.placements[static_cast<std::size_t>(a)];
    rp.dim = dim;
    rp.kind = sf > 1 ? ResolvedPlacement::Kind::StridedShard : ResolvedPlacement::Kind::Shard;
    rp.split_factor = sf;
  }
}

// E-FSDP at the fsdp axis that a param's rule or experts entry already shards
// on: names the axis, the entry, and the axes FSDP could use instead.
Diagnostic axis_conflict(const PlannedParam& p, const FsdpAxes& f, std::size_t i, Diagnostic d) {
  const bool experts = p.rule.kind == RuleRef::Kind::Experts;
  const std::string& axis = f.mesh->axes[static_cast<std::size_t>(f.axes[i])].name;
  const std::string entry = experts ? "experts entry" : "rule";
  const std::string key = std::string("fsdp.") + f.field;
  d.loc = f.locs[i];
  d.message = key + " axis '" + axis + "' is also sharded by the " + entry + " `" + p.rule.match +
              "` for " + p.name;
  std::string free;
  for (std::size_t a = 0; a < f.mesh->axes.size(); ++a) {
    const bool used = p.placements[a].kind != ResolvedPlacement::Kind::Replicate;
    const bool fsdp = std::find(f.axes.begin(), f.axes.end(), static_cast<int>(a)) != f.axes.end();
    if (!used && !fsdp) free += (free.empty() ? "" : ", ") + f.mesh->axes[a].name;
  }
  const std::string mesh_name = std::string_view(f.field) == "shard" ? "a mesh" : "an expert_mesh";
  d.hint = "FSDP shards on top of the placements, on axes of its own: set " + key + " to " +
           mesh_name + " axis the " + entry + "'s placements do not use" +
           (free.empty() ? " (add one, e.g. " + std::string(experts ? "efsdp" : "dp_shard") + ")"
                         : " (" + free + ")") +
           ", or take '" + axis + "' out of the " + entry + "'s placements";
  return d;
}

// Applies FSDP to one param; false after reporting an error.
bool shard_param(PlannedParam& p, const FsdpAxes& f, const FsdpSpec& spec, GroupedReporter& rep) {
  const int ndim = static_cast<int>(p.global_shape.size());
  int dim = resolve_dim(p, spec, f);
  if (dim < 0) dim += ndim;
  Diagnostic d = param_diagnostic(p, DiagCode::EFsdp, spec.loc);
  if (dim < 0 || dim >= ndim) {
    d.message = "fsdp dim " + std::to_string(spec.dim) + " is out of range for " + p.name +
                " with " + std::to_string(ndim) + " dims";
    d.hint = "FSDP usually shards dim 0";
    rep.add(std::move(d), "dim");
    return false;
  }
  for (std::size_t i = 0; i < f.axes.size(); ++i) {
    const auto a = static_cast<std::size_t>(f.axes[i]);
    if (p.placements[a].kind == ResolvedPlacement::Kind::Replicate) continue;
    rep.add(axis_conflict(p, f, i, std::move(d)),
            "axis" + std::to_string(static_cast<int>(p.rule.kind)) + ":" +
                std::to_string(p.rule.index) + ":" + std::to_string(a));
    return false;
  }
  if (dim > 0) {
    for (std::int64_t len : local_extents(p.geometry, static_cast<std::size_t>(dim))) {
      if (len % f.ways == 0) continue;
      d.message = "FSDP on dim " + std::to_string(dim) + " of " + p.name + ": local extent " +
                  std::to_string(len) + " is not divisible by " + std::to_string(f.ways) +
                  " FSDP ranks";
      d.hint = "FSDP2 pads only dim 0; use dim 0, or sizes that divide";
      rep.add(std::move(d), "div" + std::to_string(p.rule.index));
      return false;
    }
  }
  label(p, f, dim);
  DimSplit s;
  s.axes = f.axes;
  s.axis_sizes = f.sizes;
  s.ways = f.ways;
  s.rule = SplitRule::Chunk;  // FSDP2 always chunks
  s.fsdp = true;
  p.geometry.per_dim[static_cast<std::size_t>(dim)].push_back(std::move(s));
  p.geometry.fsdp_dim = dim;
  p.geometry.fsdp_ways = f.ways;
  return true;
}

}  // namespace

void apply_fsdp(std::vector<PlannedParam>& params, const Plan& plan, const Recipe& recipe,
                DiagnosticSink& sink) {
  if (!recipe.fsdp) return;
  const FsdpSpec& spec = *recipe.fsdp;
  auto dense = find_axes(spec.shard, spec.shard_locs, plan.dense, "shard", spec.loc, sink);
  std::optional<FsdpAxes> expert;
  bool has_stacked = false;
  for (const PlannedParam& p : params) has_stacked = has_stacked || p.mesh == MeshKind::Expert;
  if (has_stacked && plan.expert) {
    if (!spec.expert_shard.empty()) {
      expert = find_axes(spec.expert_shard, spec.expert_shard_locs, *plan.expert, "expert_shard",
                         spec.loc, sink);
    } else {
      sink.error(DiagCode::EFsdp, spec.loc, "fsdp has no expert FSDP axis for the stacked experts",
                 "set fsdp.expert_shard to an expert_mesh axis (e.g. efsdp)");
    }
  }
  if (spec.replicate) {
    if (plan.dense.find(*spec.replicate) < 0)
      sink.error(
          DiagCode::EAxis, spec.replicate_loc.line > 0 ? spec.replicate_loc : spec.loc,
          "fsdp.replicate names axis '" + *spec.replicate + "' but the mesh has no such axis",
          "axes of the mesh: " + axis_list(plan.dense));
  }
  GroupedReporter rep;
  for (PlannedParam& p : params) {
    // requires_grad false: out of FSDP (FSDP2's ignored_params) unless `fsdp.frozen: shard`
    // (FSDP2's default); 0-d params always stay out
    const bool frozen_out = !p.requires_grad && spec.frozen == FrozenParams::Ignore;
    if (frozen_out || p.global_shape.empty() || p.geometry.per_dim.size() != p.global_shape.size())
      continue;
    const auto& f = p.mesh == MeshKind::Expert ? expert : dense;
    if (!f) continue;
    shard_param(p, *f, spec, rep);
  }
  rep.flush(sink);
}

}  // namespace shardc::passes
