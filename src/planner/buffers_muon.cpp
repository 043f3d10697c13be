// muon_allgather layouts (contract §6.3; hyper-parallel Muon's fused
// all-gather): layout groups, stages innermost split first, per-stage
// split sizes / pad shapes / aligned offsets, owners on the replicate grid,
// batches, and the slice-back recipe.
#include <algorithm>
#include <map>
#include <numeric>
#include <set>

#include "planner/buffer_util.hpp"
#include "planner/buffers.hpp"

namespace shardc {
namespace {

// Mesh axis -> tensor dim it shards (-1 for none).
std::vector<int> axis_dims(const PlannedParam& param, std::size_t naxes) {
  std::vector<int> dims(naxes, -1);
  for (std::size_t d = 0; d < param.geometry.per_dim.size(); ++d)
    for (const DimSplit& split : param.geometry.per_dim[d])
      for (int axis : split.axes) dims[static_cast<std::size_t>(axis)] = static_cast<int>(d);
  return dims;
}

std::string layout_key(const PlannedParam& param, const Mesh& mesh) {
  std::string key = std::string(mesh_kind_name(param.mesh)) +
                    " ndim=" + std::to_string(param.global_shape.size());
  const auto dims = axis_dims(param, mesh.axes.size());
  for (std::size_t a = 0; a < dims.size(); ++a)
    if (dims[a] >= 0) key += " " + mesh.axes[a].name + ":" + std::to_string(dims[a]);
  return key;
}

// Splits in stage order: the reverse of the order they were applied (rule
// placements in mesh order, then FSDP), skipping one-way splits.
std::vector<std::pair<int, int>> stage_splits(const PlannedParam& param) {
  struct Item {
    int fsdp;
    int axis;
    int dim;
    int index;
  };
  std::vector<Item> items;
  for (std::size_t d = 0; d < param.geometry.per_dim.size(); ++d) {
    const auto& chain = param.geometry.per_dim[d];
    for (std::size_t i = 0; i < chain.size(); ++i)
      if (chain[i].ways > 1)
        items.push_back({chain[i].fsdp ? 1 : 0, chain[i].axes.front(), static_cast<int>(d),
                         static_cast<int>(i)});
  }
  std::sort(items.begin(), items.end(), [](const Item& left, const Item& right) {
    return std::tie(right.fsdp, right.axis) < std::tie(left.fsdp, left.axis);
  });
  std::vector<std::pair<int, int>> out;
  for (const Item& it : items) out.emplace_back(it.dim, it.index);
  return out;
}

bool communicated(const Plan& plan, const PlannedParam& param) {
  if (!param.requires_grad || param.global_shape.size() < 2) return false;
  // Packed params split on their packed dim gather per part, which the
  // concatenate-by-member unpack of this layout cannot express: they are
  // left to the runtime (W-PACKED-BUFFER says so).
  if (packed_dim_split(param)) return false;
  return !(param.alias_of && plan.params[*param.alias_of].stage == param.stage);
}

void assign_owners(MuonGroup& group, const Plan& plan, const Mesh& mesh) {
  std::int64_t grid = 1;
  for (int axis : group.replicate_axes) grid *= mesh.axes[static_cast<std::size_t>(axis)].size;
  std::vector<std::size_t> order(group.params.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](std::size_t left, std::size_t right) {
    return numel(plan.params[group.params[left]].global_shape) >
           numel(plan.params[group.params[right]].global_shape);
  });
  std::set<std::pair<std::int64_t, std::int64_t>> load;  // (load, flat coordinate)
  for (std::int64_t c = 0; c < grid; ++c) load.insert({0, c});
  group.owners.assign(group.params.size(), {});
  for (std::size_t i : order) {
    auto best = *load.begin();
    load.erase(load.begin());
    best.first += numel(plan.params[group.params[i]].global_shape);
    load.insert(best);
    std::vector<std::int64_t> coord(group.replicate_axes.size(), 0);
    std::int64_t rem = best.second;
    for (std::size_t k = coord.size(); k-- > 0;) {
      const std::int64_t size = mesh.axes[static_cast<std::size_t>(group.replicate_axes[k])].size;
      coord[k] = rem % size;
      rem /= size;
    }
    group.owners[i] = std::move(coord);
  }
}

void make_batches(MuonGroup& group, const Plan& plan, std::int64_t cap) {
  std::vector<DType> dtypes;
  for (std::size_t i : group.params)
    if (std::find(dtypes.begin(), dtypes.end(), plan.params[i].dtype) == dtypes.end())
      dtypes.push_back(plan.params[i].dtype);
  for (DType dtype : dtypes) {
    MuonBatch cur{dtype, {}};
    std::int64_t filled = 0;
    for (std::size_t i : group.params) {
      if (plan.params[i].dtype != dtype) continue;
      cur.params.push_back(i);
      filled += numel(plan.params[i].global_shape);
      if (filled >= cap) {
        group.batches.push_back(std::move(cur));
        cur = {dtype, {}};
        filled = 0;
      }
    }
    if (!cur.params.empty()) group.batches.push_back(std::move(cur));
  }
}

}  // namespace

MuonPlan plan_muon(const Plan& plan, const BufferSpec& spec) {
  MuonPlan muon;
  muon.alignment_bytes = spec.alignment_bytes;
  muon.max_batch_numel = spec.max_batch_numel;
  muon.not_communicated.assign(static_cast<std::size_t>(plan.num_stages), {});
  for (int s = 0; s < plan.num_stages; ++s) {
    std::map<std::string, std::size_t> by_key;
    const std::size_t first_group = muon.groups.size();
    for (std::size_t i = 0; i < plan.params.size(); ++i) {
      const PlannedParam& param = plan.params[i];
      if (param.stage != s) continue;
      if (!communicated(plan, param)) {
        muon.not_communicated[static_cast<std::size_t>(s)].push_back(i);
        continue;
      }
      const Mesh& mesh = plan.mesh_of(param);
      auto [it, fresh] = by_key.try_emplace(layout_key(param, mesh), muon.groups.size());
      if (fresh) {
        MuonGroup group;
        group.key = it->first;
        group.mesh = param.mesh;
        group.stage = s;
        group.splits = stage_splits(param);
        const auto dims = axis_dims(param, mesh.axes.size());
        const int pp =
            param.mesh == MeshKind::Expert ? plan.expert_pipeline_axis : plan.pipeline_axis;
        for (std::size_t a = 0; a < dims.size(); ++a)
          if (dims[a] < 0 && static_cast<int>(a) != pp)
            group.replicate_axes.push_back(static_cast<int>(a));
        muon.groups.push_back(std::move(group));
      }
      muon.groups[it->second].params.push_back(i);
    }
    for (std::size_t g = first_group; g < muon.groups.size(); ++g) {
      const Mesh& mesh = muon.groups[g].mesh == MeshKind::Expert ? *plan.expert : plan.dense;
      assign_owners(muon.groups[g], plan, mesh);
      make_batches(muon.groups[g], plan, spec.max_batch_numel);
    }
  }
  return muon;
}

namespace {

// The rank a stage is built for: its plan, mesh and coordinates on it, and
// the buffer's alignment.
struct StageRank {
  const Plan& plan;
  const Mesh& mesh;
  std::span<const std::int64_t> coords;
  std::int64_t alignment_bytes;
};

MuonStage build_stage(const MuonGroup& group, const MuonBatch& batch, std::size_t stage_no,
                      const StageRank& rank) {
  const Plan& plan = rank.plan;
  const Mesh& mesh = rank.mesh;
  const std::span<const std::int64_t> coords = rank.coords;
  const std::int64_t alignment_bytes = rank.alignment_bytes;
  const auto [dim, index] = group.splits[stage_no];
  const PlannedParam& first = plan.params[batch.params.front()];
  const DimSplit& split =
      first.geometry.per_dim[static_cast<std::size_t>(dim)][static_cast<std::size_t>(index)];
  MuonStage st;
  st.axes = split.axes;
  st.index = split_coord(split, coords);
  std::vector<std::vector<std::int64_t>> member_coords;
  for (std::int64_t k = 0; k < split.ways; ++k) {
    member_coords.push_back(with_split_coord(split, coords, k));
    st.ranks.push_back(rank_of(mesh, member_coords.back()));
  }
  // Splits undone before this stage, per dim: a suffix of each chain.
  std::vector<int> undone(first.geometry.per_dim.size(), 0);
  for (std::size_t s = 0; s < stage_no; ++s)
    mark_gathered(undone, first.geometry, group.splits[s].first, group.splits[s].second);
  for (std::size_t i : batch.params) {
    const PlannedParam& param = plan.params[i];
    MuonStageParam sp;
    sp.param = i;
    sp.tensor_dim = dim;
    // Members differ only on `dim` (each mesh axis shards one dim), so this
    // rank's piece is the stage input shape of every member.
    sp.split_sizes.reserve(member_coords.size());
    for (const auto& member : member_coords)
      sp.split_sizes.push_back(
          partial_shape(param.geometry, member, undone)[static_cast<std::size_t>(dim)]);
    MuonStageSizes sizes =
        muon_stage_sizes(partial_shape(param.geometry, coords, undone), dim, sp.split_sizes,
                         st.index, muon_align_elements(alignment_bytes, param.dtype));
    sp.pad_shape = std::move(sizes.pad_shape);
    sp.actual_numel = sizes.actual_numel;
    sp.padded_numel = sizes.padded_numel;
    sp.offset = st.total_numel;
    st.total_numel += sp.padded_numel;
    st.params.push_back(std::move(sp));
  }
  st.gathered_numel = st.total_numel * static_cast<std::int64_t>(st.ranks.size());
  return st;
}

}  // namespace

MuonStageSizes muon_stage_sizes(const Shape& input_shape, int tensor_dim,
                                std::span<const std::int64_t> split_sizes, std::int64_t index,
                                std::int64_t align_elements) {
  MuonStageSizes out;
  const auto dim = static_cast<std::size_t>(tensor_dim);
  out.pad_shape = input_shape;
  if (!split_sizes.empty())
    out.pad_shape[dim] = *std::max_element(split_sizes.begin(), split_sizes.end());
  if (index >= 0 && static_cast<std::size_t>(index) < split_sizes.size()) {
    Shape own = input_shape;
    own[dim] = split_sizes[static_cast<std::size_t>(index)];
    out.actual_numel = numel(own);
  }
  out.padded_numel = round_up(numel(out.pad_shape), align_elements);
  return out;
}

std::int64_t muon_align_elements(std::int64_t alignment_bytes, DType dtype) {
  return std::max<std::int64_t>(1, alignment_bytes / element_size(dtype));
}

SliceStep muon_slice_step(int tensor_dim, std::span<const std::int64_t> split_sizes,
                          std::int64_t index) {
  const auto k = static_cast<std::size_t>(
      std::clamp<std::int64_t>(index, 0, static_cast<std::int64_t>(split_sizes.size())));
  const std::int64_t start = std::accumulate(
      split_sizes.begin(), split_sizes.begin() + static_cast<std::ptrdiff_t>(k), std::int64_t{0});
  return {tensor_dim, start, k < split_sizes.size() ? split_sizes[k] : 0};
}

MuonRankGroup muon_group_for_rank(const MuonPlan& muon, const MuonGroup& group, const Plan& plan,
                                  std::int64_t rank) {
  const Mesh& mesh = group.mesh == MeshKind::Expert ? *plan.expert : plan.dense;
  const auto coords = mesh_coords(mesh, rank);
  MuonRankGroup rg;
  rg.group = &group;
  for (int axis : group.replicate_axes)
    rg.replicate_coord.push_back(coords[static_cast<std::size_t>(axis)]);
  for (const MuonBatch& batch : group.batches) {
    MuonRankBatch rb{batch.dtype, {}};
    for (std::size_t s = 0; s < group.splits.size(); ++s)
      rb.stages.push_back(build_stage(group, batch, s, {plan, mesh, coords, muon.alignment_bytes}));
    rg.batches.push_back(std::move(rb));
  }
  // Slice-back: per param, the stages in reverse.
  std::map<std::size_t, std::vector<SliceStep>> steps;
  for (const MuonRankBatch& rb : rg.batches)
    for (auto st = rb.stages.rbegin(); st != rb.stages.rend(); ++st)
      for (const MuonStageParam& sp : st->params)
        steps[sp.param].push_back(muon_slice_step(sp.tensor_dim, sp.split_sizes, st->index));
  for (std::size_t i : group.params) rg.slice_back.push_back(steps[i]);
  return rg;
}

std::vector<int> muon_split_axes(const MuonGroup& group, const Plan& plan) {
  std::vector<int> axes;
  if (group.batches.empty()) return axes;
  const ParamGeometry& geom = plan.params[group.batches.front().params.front()].geometry;
  for (const auto& [dim, index] : group.splits)
    for (int axis :
         geom.per_dim[static_cast<std::size_t>(dim)][static_cast<std::size_t>(index)].axes)
      axes.push_back(axis);
  std::sort(axes.begin(), axes.end());
  axes.erase(std::unique(axes.begin(), axes.end()), axes.end());
  return axes;
}

std::vector<MuonStageRanks> muon_stage_ranks(const MuonGroup& group, const Plan& plan,
                                             std::int64_t rank) {
  std::vector<MuonStageRanks> out;
  if (group.batches.empty()) return out;
  const Mesh& mesh = group.mesh == MeshKind::Expert ? *plan.expert : plan.dense;
  const auto coords = mesh_coords(mesh, rank);
  const ParamGeometry& geom = plan.params[group.batches.front().params.front()].geometry;
  out.reserve(group.splits.size());
  for (const auto& [dim, index] : group.splits) {
    const DimSplit& split =
        geom.per_dim[static_cast<std::size_t>(dim)][static_cast<std::size_t>(index)];
    MuonStageRanks sr;
    sr.index = split_coord(split, coords);
    sr.ranks.reserve(static_cast<std::size_t>(split.ways));
    for (std::int64_t k = 0; k < split.ways; ++k)
      sr.ranks.push_back(rank_of(mesh, with_split_coord(split, coords, k)));
    out.push_back(std::move(sr));
  }
  return out;
}

MuonRankLayout muon_for_rank(const MuonPlan& muon, const Plan& plan, std::int64_t rank) {
  MuonRankLayout out;
  const int stage = plan.stage_of_rank(rank);
  out.not_communicated = &muon.not_communicated[static_cast<std::size_t>(stage)];
  for (const MuonGroup& group : muon.groups)
    if (group.stage == stage) out.groups.push_back(muon_group_for_rank(muon, group, plan, rank));
  return out;
}

}  // namespace shardc
