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
std::vector<int> axis_dims(const PlannedParam& p, std::size_t naxes) {
  std::vector<int> dims(naxes, -1);
  for (std::size_t d = 0; d < p.geometry.per_dim.size(); ++d)
    for (const DimSplit& s : p.geometry.per_dim[d])
      for (int a : s.axes) dims[static_cast<std::size_t>(a)] = static_cast<int>(d);
  return dims;
}

std::string layout_key(const PlannedParam& p, const Mesh& mesh) {
  std::string key =
      std::string(mesh_kind_name(p.mesh)) + " ndim=" + std::to_string(p.global_shape.size());
  const auto dims = axis_dims(p, mesh.axes.size());
  for (std::size_t a = 0; a < dims.size(); ++a)
    if (dims[a] >= 0) key += " " + mesh.axes[a].name + ":" + std::to_string(dims[a]);
  return key;
}

// Splits in stage order: the reverse of the order they were applied (rule
// placements in mesh order, then FSDP), skipping one-way splits.
std::vector<std::pair<int, int>> stage_splits(const PlannedParam& p) {
  struct Item {
    int fsdp;
    int axis;
    int dim;
    int index;
  };
  std::vector<Item> items;
  for (std::size_t d = 0; d < p.geometry.per_dim.size(); ++d) {
    const auto& chain = p.geometry.per_dim[d];
    for (std::size_t i = 0; i < chain.size(); ++i)
      if (chain[i].ways > 1)
        items.push_back({chain[i].fsdp ? 1 : 0, chain[i].axes.front(), static_cast<int>(d),
                         static_cast<int>(i)});
  }
  std::sort(items.begin(), items.end(), [](const Item& a, const Item& b) {
    return std::tie(b.fsdp, b.axis) < std::tie(a.fsdp, a.axis);
  });
  std::vector<std::pair<int, int>> out;
  for (const Item& it : items) out.emplace_back(it.dim, it.index);
  return out;
}

bool communicated(const Plan& plan, const PlannedParam& p) {
  if (!p.requires_grad || p.global_shape.size() < 2) return false;
  // Packed params split on their packed dim gather per part, which the
  // concatenate-by-member unpack of this layout cannot express: they are
  // left to the runtime (W-PACKED-BUFFER says so).
  if (packed_dim_split(p)) return false;
  return !(p.alias_of && plan.params[*p.alias_of].stage == p.stage);
}

void assign_owners(MuonGroup& g, const Plan& plan, const Mesh& mesh) {
  std::int64_t grid = 1;
  for (int a : g.replicate_axes) grid *= mesh.axes[static_cast<std::size_t>(a)].size;
  std::vector<std::size_t> order(g.params.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return numel(plan.params[g.params[a]].global_shape) >
           numel(plan.params[g.params[b]].global_shape);
  });
  std::set<std::pair<std::int64_t, std::int64_t>> load;  // (load, flat coordinate)
  for (std::int64_t c = 0; c < grid; ++c) load.insert({0, c});
  g.owners.assign(g.params.size(), {});
  for (std::size_t i : order) {
    auto best = *load.begin();
    load.erase(load.begin());
    best.first += numel(plan.params[g.params[i]].global_shape);
    load.insert(best);
    std::vector<std::int64_t> coord(g.replicate_axes.size(), 0);
    std::int64_t rem = best.second;
    for (std::size_t k = coord.size(); k-- > 0;) {
      const std::int64_t size = mesh.axes[static_cast<std::size_t>(g.replicate_axes[k])].size;
      coord[k] = rem % size;
      rem /= size;
    }
    g.owners[i] = std::move(coord);
  }
}

void make_batches(MuonGroup& g, const Plan& plan, std::int64_t cap) {
  std::vector<DType> dtypes;
  for (std::size_t i : g.params)
    if (std::find(dtypes.begin(), dtypes.end(), plan.params[i].dtype) == dtypes.end())
      dtypes.push_back(plan.params[i].dtype);
  for (DType t : dtypes) {
    MuonBatch cur{t, {}};
    std::int64_t filled = 0;
    for (std::size_t i : g.params) {
      if (plan.params[i].dtype != t) continue;
      cur.params.push_back(i);
      filled += numel(plan.params[i].global_shape);
      if (filled >= cap) {
        g.batches.push_back(std::move(cur));
        cur = {t, {}};
        filled = 0;
      }
    }
    if (!cur.params.empty()) g.batches.push_back(std::move(cur));
  }
}

}  // namespace

MuonPlan plan_muon(const Plan& plan, const BufferSpec& spec) {
  MuonPlan m;
  m.alignment_bytes = spec.alignment_bytes;
  m.max_batch_numel = spec.max_batch_numel;
  m.not_communicated.assign(static_cast<std::size_t>(plan.num_stages), {});
  for (int s = 0; s < plan.num_stages; ++s) {
    std::map<std::string, std::size_t> by_key;
    const std::size_t first_group = m.groups.size();
    for (std::size_t i = 0; i < plan.params.size(); ++i) {
      const PlannedParam& p = plan.params[i];
      if (p.stage != s) continue;
      if (!communicated(plan, p)) {
        m.not_communicated[static_cast<std::size_t>(s)].push_back(i);
        continue;
      }
      const Mesh& mesh = plan.mesh_of(p);
      auto [it, fresh] = by_key.try_emplace(layout_key(p, mesh), m.groups.size());
      if (fresh) {
        MuonGroup g;
        g.key = it->first;
        g.mesh = p.mesh;
        g.stage = s;
        g.splits = stage_splits(p);
        const auto dims = axis_dims(p, mesh.axes.size());
        const int pp = p.mesh == MeshKind::Expert ? plan.expert_pipeline_axis : plan.pipeline_axis;
        for (std::size_t a = 0; a < dims.size(); ++a)
          if (dims[a] < 0 && static_cast<int>(a) != pp)
            g.replicate_axes.push_back(static_cast<int>(a));
        m.groups.push_back(std::move(g));
      }
      m.groups[it->second].params.push_back(i);
    }
    for (std::size_t g = first_group; g < m.groups.size(); ++g) {
      const Mesh& mesh = m.groups[g].mesh == MeshKind::Expert ? *plan.expert : plan.dense;
      assign_owners(m.groups[g], plan, mesh);
      make_batches(m.groups[g], plan, spec.max_batch_numel);
    }
  }
  return m;
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

MuonStage build_stage(const MuonGroup& g, const MuonBatch& b, std::size_t stage_no,
                      const StageRank& rank) {
  const Plan& plan = rank.plan;
  const Mesh& mesh = rank.mesh;
  const std::span<const std::int64_t> coords = rank.coords;
  const std::int64_t alignment_bytes = rank.alignment_bytes;
  const auto [dim, index] = g.splits[stage_no];
  const PlannedParam& first = plan.params[b.params.front()];
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
    mark_gathered(undone, first.geometry, g.splits[s].first, g.splits[s].second);
  for (std::size_t i : b.params) {
    const PlannedParam& p = plan.params[i];
    MuonStageParam sp;
    sp.param = i;
    sp.tensor_dim = dim;
    // Members differ only on `dim` (each mesh axis shards one dim), so this
    // rank's piece is the stage input shape of every member.
    sp.split_sizes.reserve(member_coords.size());
    for (const auto& member : member_coords)
      sp.split_sizes.push_back(
          partial_shape(p.geometry, member, undone)[static_cast<std::size_t>(dim)]);
    MuonStageSizes sizes =
        muon_stage_sizes(partial_shape(p.geometry, coords, undone), dim, sp.split_sizes, st.index,
                         muon_align_elements(alignment_bytes, p.dtype));
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

MuonRankGroup muon_group_for_rank(const MuonPlan& muon, const MuonGroup& g, const Plan& plan,
                                  std::int64_t rank) {
  const Mesh& mesh = g.mesh == MeshKind::Expert ? *plan.expert : plan.dense;
  const auto coords = mesh_coords(mesh, rank);
  MuonRankGroup rg;
  rg.group = &g;
  for (int a : g.replicate_axes) rg.replicate_coord.push_back(coords[static_cast<std::size_t>(a)]);
  for (const MuonBatch& b : g.batches) {
    MuonRankBatch rb{b.dtype, {}};
    for (std::size_t s = 0; s < g.splits.size(); ++s)
      rb.stages.push_back(build_stage(g, b, s, {plan, mesh, coords, muon.alignment_bytes}));
    rg.batches.push_back(std::move(rb));
  }
  // Slice-back: per param, the stages in reverse.
  std::map<std::size_t, std::vector<SliceStep>> steps;
  for (const MuonRankBatch& rb : rg.batches)
    for (auto st = rb.stages.rbegin(); st != rb.stages.rend(); ++st)
      for (const MuonStageParam& sp : st->params)
        steps[sp.param].push_back(muon_slice_step(sp.tensor_dim, sp.split_sizes, st->index));
  for (std::size_t i : g.params) rg.slice_back.push_back(steps[i]);
  return rg;
}

std::vector<int> muon_split_axes(const MuonGroup& g, const Plan& plan) {
  std::vector<int> axes;
  if (g.batches.empty()) return axes;
  const ParamGeometry& geom = plan.params[g.batches.front().params.front()].geometry;
  for (const auto& [dim, index] : g.splits)
    for (int a : geom.per_dim[static_cast<std::size_t>(dim)][static_cast<std::size_t>(index)].axes)
      axes.push_back(a);
  std::sort(axes.begin(), axes.end());
  axes.erase(std::unique(axes.begin(), axes.end()), axes.end());
  return axes;
}

std::vector<MuonStageRanks> muon_stage_ranks(const MuonGroup& g, const Plan& plan,
                                             std::int64_t rank) {
  std::vector<MuonStageRanks> out;
  if (g.batches.empty()) return out;
  const Mesh& mesh = g.mesh == MeshKind::Expert ? *plan.expert : plan.dense;
  const auto coords = mesh_coords(mesh, rank);
  const ParamGeometry& geom = plan.params[g.batches.front().params.front()].geometry;
  out.reserve(g.splits.size());
  for (const auto& [dim, index] : g.splits) {
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
  for (const MuonGroup& g : muon.groups)
    if (g.stage == stage) out.groups.push_back(muon_group_for_rank(muon, g, plan, rank));
  return out;
}

}  // namespace shardc
