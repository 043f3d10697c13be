// fsdp2_allgather layouts (contract §6.3; PyTorch FSDP2 foreach_all_gather):
// one buffer per FSDP unit and mesh, padded shards flattened in model order
// with no alignment, rank-major output [W, total]; mixed dtypes switch the
// unit to byte units (FSDP2 gathers them as uint8).
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "planner/buffer_util.hpp"
#include "planner/buffers.hpp"

namespace shardc {
namespace {

// The deepest module prefix of `fqn` named by any pattern: each pattern
// names the shortest prefix (whole segments, excluding the param's own
// name) it matches.
std::string unit_of(const std::string& fqn, const std::vector<Pattern>& units) {
  std::vector<std::size_t> cuts{0};  // prefix lengths: "", "a", "a.b", ...
  for (std::size_t i = 0; i < fqn.size(); ++i)
    if (fqn[i] == '.') cuts.push_back(i);
  std::size_t best = 0;
  bool found = false;
  for (const Pattern& pat : units) {
    for (std::size_t c : cuts) {
      if (!pat.match(std::string_view(fqn).substr(0, c))) continue;
      if (!found || c > best) best = c;
      found = true;
      break;  // the shortest prefix this pattern matches
    }
  }
  return fqn.substr(0, best);
}

// FSDP2's order of a unit's params: fully_shard collects the managed modules
// by a post-order DFS (children in registration order, then the module
// itself: torch/distributed/fsdp/_fully_shard/_fsdp_init.py
// _get_managed_modules) and each module's own params in registration order
// (_get_managed_states). A module's own params thus follow all of its
// children's (gpt-oss's `self_attn.sinks` after o_proj, Llama-4's
// `vision_model.class_embedding` after the tower); `params` are in model
// (named_parameters, pre-order) order and are reordered in place.
void post_order(std::vector<std::size_t>& params, const Plan& plan) {
  struct Node {
    std::vector<std::size_t> children;  // node indices, first appearance order
    std::vector<std::size_t> own;       // param indices
  };
  std::vector<Node> nodes(1);
  std::map<std::string, std::size_t, std::less<>> by_path{{"", 0}};
  bool nested = false;  // some module owns params and has children
  for (std::size_t i : params) {
    const std::string& name = plan.params[i].name;
    std::size_t node = 0;
    std::size_t dot = name.find('.');
    while (dot != std::string::npos) {
      auto [it, fresh] = by_path.try_emplace(name.substr(0, dot), nodes.size());
      if (fresh) {
        nodes[node].children.push_back(nodes.size());
        nodes.emplace_back();
      }
      node = it->second;
      dot = name.find('.', dot + 1);
    }
    nodes[node].own.push_back(i);
  }
  for (const Node& n : nodes) nested = nested || (!n.own.empty() && !n.children.empty());
  if (!nested) return;  // post-order is model order
  std::vector<std::size_t> out;
  out.reserve(params.size());
  std::vector<std::pair<std::size_t, std::size_t>> stack{{0, 0}};  // node, next child
  while (!stack.empty()) {
    auto& [node, next] = stack.back();
    if (next < nodes[node].children.size()) {
      const std::size_t child = nodes[node].children[next++];
      stack.emplace_back(child, 0);
      continue;
    }
    out.insert(out.end(), nodes[node].own.begin(), nodes[node].own.end());
    stack.pop_back();
  }
  params = std::move(out);
}

}  // namespace

Fsdp2Plan plan_fsdp2(const Plan& plan, const BufferSpec& spec) {
  Fsdp2Plan f;
  f.not_communicated.assign(static_cast<std::size_t>(plan.num_stages), {});
  std::map<std::tuple<int, int, std::string>, std::size_t> index;
  for (std::size_t i = 0; i < plan.params.size(); ++i) {
    const PlannedParam& p = plan.params[i];
    const bool alias = p.alias_of && plan.params[*p.alias_of].stage == p.stage;
    // Packed params split on their packed dim rebuild a local tensor of
    // several global boxes; FSDP2 gathers it like any other (it sees only
    // the local tensor), so they stay in their unit.
    if (p.geometry.fsdp_dim < 0 || alias) {
      f.not_communicated[static_cast<std::size_t>(p.stage)].push_back(i);
      continue;
    }
    std::string name = unit_of(p.name, spec.units);
    auto [it, fresh] = index.try_emplace({p.stage, static_cast<int>(p.mesh), name}, f.units.size());
    if (fresh) f.units.push_back({std::move(name), p.mesh, p.stage, {}, false});
    Fsdp2Unit& u = f.units[it->second];
    if (!u.params.empty() && plan.params[u.params.front()].dtype != p.dtype) u.byte_units = true;
    u.params.push_back(i);
  }
  for (Fsdp2Unit& u : f.units) post_order(u.params, plan);
  return f;
}

Fsdp2RankUnit fsdp2_unit_for_rank(const Fsdp2Unit& u, const Plan& plan, std::int64_t rank) {
  const Mesh& mesh = u.mesh == MeshKind::Expert ? *plan.expert : plan.dense;
  const auto coords = mesh_coords(mesh, rank);
  Fsdp2RankUnit ru;
  ru.unit = &u;
  const PlannedParam& first = plan.params[u.params.front()];
  const DimSplit& split =
      first.geometry.per_dim[static_cast<std::size_t>(first.geometry.fsdp_dim)].back();
  ru.index = split_coord(split, coords);
  for (std::int64_t k = 0; k < split.ways; ++k)
    ru.ranks.push_back(rank_of(mesh, with_split_coord(split, coords, k)));
  for (std::size_t i : u.params) {
    const PlannedParam& p = plan.params[i];
    const ShardGeom g = shard_at(p.geometry, coords);
    std::vector<int> undone(p.global_shape.size(), 0);
    undone[static_cast<std::size_t>(p.geometry.fsdp_dim)] = 1;
    const std::int64_t unit = u.byte_units ? element_size(p.dtype) : 1;
    Fsdp2Param fp{i,
                  ru.total,
                  numel(g.padded_shape) * unit,
                  g.padded_shape,
                  g.local_shape,
                  partial_shape(p.geometry, coords, undone, true)};
    ru.total += fp.padded_numel;
    ru.total_bytes += numel(g.padded_shape) * element_size(p.dtype);
    ru.params.push_back(std::move(fp));
  }
  return ru;
}

Fsdp2RankLayout fsdp2_for_rank(const Fsdp2Plan& fsdp2, const Plan& plan, std::int64_t rank) {
  Fsdp2RankLayout out;
  const int stage = plan.stage_of_rank(rank);
  out.not_communicated = &fsdp2.not_communicated[static_cast<std::size_t>(stage)];
  for (const Fsdp2Unit& u : fsdp2.units)
    if (u.stage == stage) out.units.push_back(fsdp2_unit_for_rank(u, plan, rank));
  return out;
}

}  // namespace shardc
