// fsdp2_allgather layouts (contract §6.3; PyTorch FSDP2 foreach_all_gather):
// one buffer per FSDP unit and mesh, padded shards flattened in model order
// with no alignment, rank-major output [W, total]; mixed dtypes switch the
// unit to byte units (FSDP2 gathers them as uint8).
#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "planner/buffer_util.hpp"
#include "planner/buffers.hpp"

namespace shardc {

std::string fsdp2_unit_of(const std::string& fqn, const std::vector<Pattern>& units) {
  std::vector<std::size_t> cuts{0};  // prefix lengths: "", "a", "a.b", ...
  for (std::size_t i = 0; i < fqn.size(); ++i)
    if (fqn[i] == '.') cuts.push_back(i);
  std::size_t best = 0;
  bool found = false;
  for (const Pattern& pat : units) {
    for (std::size_t cut : cuts) {
      if (!pat.match(std::string_view(fqn).substr(0, cut))) continue;
      if (!found || cut > best) best = cut;
      found = true;
      break;  // the shortest prefix this pattern matches
    }
  }
  return fqn.substr(0, best);
}

namespace {

// FSDP2's order of a unit's params: fully_shard collects the managed modules
// by a post-order DFS (children in registration order, then the module
// itself: torch/distributed/fsdp/_fully_shard/_fsdp_init.py
// _get_managed_modules) and each module's own params in registration order
// (_get_managed_states). A module's own params thus follow all of its
// children's (gpt-oss's `self_attn.sinks` after o_proj, Llama-4's
// `vision_model.class_embedding` after the tower); `params` are in model
// (named_parameters, pre-order) order and are reordered in place.
// `placed_by[i]`: the param whose FQN places param i (its own, or a tied alias's that comes
// first in module order: FSDP2 manages the shared Parameter where it first meets it).
void post_order(std::vector<std::size_t>& params, const Plan& plan,
                const std::vector<std::size_t>& placed_by) {
  struct Node {
    std::vector<std::size_t> children;  // node indices, first appearance order
    std::vector<std::size_t> own;       // param indices
  };
  std::vector<Node> nodes(1);
  std::map<std::string, std::size_t, std::less<>> by_path{{"", 0}};
  bool nested = false;  // some module owns params and has children
  for (std::size_t i : params) {
    const std::string& name = plan.params[placed_by[i]].name;
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
  for (const Node& tree_node : nodes)
    nested = nested || (!tree_node.own.empty() && !tree_node.children.empty());
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
  Fsdp2Plan fsdp2;
  fsdp2.not_communicated.assign(static_cast<std::size_t>(plan.num_stages), {});
  std::map<std::tuple<int, int, std::string>, std::size_t> index;
  // A tied param sits in its unit where its first FQN in module order does: FSDP2 collects
  // params module by module and keeps the first visit of a shared Parameter
  // (_get_managed_states, torch 2.13 _fsdp_init.py). Trial E 3: an lm_head listed before the
  // embedding it aliases put the shared weight at the embedding's place.
  std::vector<std::size_t> placed_by(plan.params.size());
  for (std::size_t i = 0; i < plan.params.size(); ++i) placed_by[i] = i;
  for (std::size_t i = 0; i < plan.params.size(); ++i) {
    const PlannedParam& param = plan.params[i];
    if (param.alias_of && plan.params[*param.alias_of].stage == param.stage)
      placed_by[*param.alias_of] = std::min(placed_by[*param.alias_of], i);
  }
  for (std::size_t i = 0; i < plan.params.size(); ++i) {
    const PlannedParam& param = plan.params[i];
    const bool alias = param.alias_of && plan.params[*param.alias_of].stage == param.stage;
    // Packed params split on their packed dim rebuild a local tensor of
    // several global boxes; FSDP2 gathers it like any other (it sees only
    // the local tensor), so they stay in their unit.
    if (param.geometry.fsdp_dim < 0 || alias) {
      fsdp2.not_communicated[static_cast<std::size_t>(param.stage)].push_back(i);
      continue;
    }
    std::string name = fsdp2_unit_of(param.name, spec.units);
    auto [it, fresh] =
        index.try_emplace({param.stage, static_cast<int>(param.mesh), name}, fsdp2.units.size());
    if (fresh) fsdp2.units.push_back({std::move(name), param.mesh, param.stage, {}, false});
    Fsdp2Unit& unit = fsdp2.units[it->second];
    if (!unit.params.empty() && plan.params[unit.params.front()].dtype != param.dtype)
      unit.byte_units = true;
    unit.params.push_back(i);
  }
  for (Fsdp2Unit& unit : fsdp2.units) {
    std::stable_sort(
        unit.params.begin(), unit.params.end(),
        [&placed_by](std::size_t lhs, std::size_t rhs) { return placed_by[lhs] < placed_by[rhs]; });
    post_order(unit.params, plan, placed_by);
  }
  // The root unit held the whole step: the first unit of its stage and mesh.
  std::set<std::pair<int, MeshKind>> seen;
  for (Fsdp2Unit& unit : fsdp2.units)
    unit.held_whole_step = seen.insert({unit.stage, unit.mesh}).second && unit.name.empty();
  return fsdp2;
}

Fsdp2RankUnit fsdp2_unit_for_rank(const Fsdp2Unit& unit, const Plan& plan, std::int64_t rank) {
  const Mesh& mesh = unit.mesh == MeshKind::Expert ? *plan.expert : plan.dense;
  const auto coords = mesh_coords(mesh, rank);
  Fsdp2RankUnit ru;
  ru.unit = &unit;
  const PlannedParam& first = plan.params[unit.params.front()];
  const DimSplit& split =
      first.geometry.per_dim[static_cast<std::size_t>(first.geometry.fsdp_dim)].back();
  ru.index = split_coord(split, coords);
  for (std::int64_t k = 0; k < split.ways; ++k)
    ru.ranks.push_back(rank_of(mesh, with_split_coord(split, coords, k)));
  for (std::size_t i : unit.params) {
    const PlannedParam& param = plan.params[i];
    const ShardGeom shard = shard_at(param.geometry, coords);
    std::vector<int> undone(param.global_shape.size(), 0);
    undone[static_cast<std::size_t>(param.geometry.fsdp_dim)] = 1;
    const std::int64_t unit_size = unit.byte_units ? element_size(param.dtype) : 1;
    Fsdp2Param fp{i,
                  ru.total,
                  numel(shard.padded_shape) * unit_size,
                  shard.padded_shape,
                  shard.local_shape,
                  partial_shape(param.geometry, coords, undone, true)};
    ru.total += fp.padded_numel;
    ru.total_bytes += numel(shard.padded_shape) * element_size(param.dtype);
    ru.params.push_back(std::move(fp));
  }
  return ru;
}

Fsdp2RankLayout fsdp2_for_rank(const Fsdp2Plan& fsdp2, const Plan& plan, std::int64_t rank) {
  Fsdp2RankLayout out;
  const int stage = plan.stage_of_rank(rank);
  out.not_communicated = &fsdp2.not_communicated[static_cast<std::size_t>(stage)];
  for (const Fsdp2Unit& unit : fsdp2.units)
    if (unit.stage == stage) out.units.push_back(fsdp2_unit_for_rank(unit, plan, rank));
  return out;
}

}  // namespace shardc
