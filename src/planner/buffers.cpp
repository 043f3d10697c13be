// The recipe's `buffers:` entries planned once per compile, and per-rank
// buffer bytes for the plan.json summary (contract §6.3).
#include <algorithm>
#include <map>

#include "planner/buffer_util.hpp"
#include "planner/buffers.hpp"

namespace shardc {
namespace {

// The axes whose coordinates a group's (or unit's) sizes depend on, in mesh
// order, and every rank's class index over them.
struct ClassAxes {
  std::vector<int> axes;
  std::vector<std::int64_t> sizes;
  std::int64_t num_classes = 1;
};

ClassAxes class_axes(std::vector<int> axes, const Mesh& mesh) {
  std::sort(axes.begin(), axes.end());
  axes.erase(std::unique(axes.begin(), axes.end()), axes.end());
  ClassAxes c;
  c.axes = std::move(axes);
  for (int a : c.axes) {
    c.sizes.push_back(mesh.axes[static_cast<std::size_t>(a)].size);
    c.num_classes *= c.sizes.back();
  }
  return c;
}

std::int64_t class_of(const ClassAxes& c, std::span<const std::int64_t> coords) {
  return axes_index(c.axes, c.sizes, coords);
}

// A representative rank of class `k` on pipeline stage `stage`: the class
// axes set from `k`, the pipeline axis at `stage`, every other axis 0.
std::int64_t representative(const ClassAxes& c, std::int64_t k, const Mesh& mesh, int pp_axis,
                            int stage) {
  std::vector<std::int64_t> coords(mesh.axes.size(), 0);
  if (pp_axis >= 0) coords[static_cast<std::size_t>(pp_axis)] = stage;
  set_axes_coords(c.axes, c.sizes, k, coords);
  return rank_of(mesh, coords);
}

struct Sizes {
  std::int64_t pack = 0;
  std::int64_t gathered = 0;
  std::int64_t peak = 0;  // muon: largest one-call output (fsdp2 uses `gathered`)
};

int pp_axis_of(const Plan& plan, MeshKind kind) {
  return kind == MeshKind::Expert ? plan.expert_pipeline_axis : plan.pipeline_axis;
}

// Adds `table[class of r]` to every rank r on `stage`. With `prev` (FSDP2:
// the rank's previous unit's gathered bytes) also raises `gathered_peak` to
// this unit plus the previous one (the prefetch overlap). Muon (`call_peak`
// non-empty) keeps the largest single call per rank.
// The ranks a buffer's table covers: its mesh, its pipeline stage and how a
// rank's coordinates pick its class.
struct TableRanks {
  MeshKind kind;
  int stage;
  const ClassAxes& c;
};

void add_per_rank(const Plan& plan, const TableRanks& ranks, const std::vector<Sizes>& table,
                  BufferRankBytes& out, std::vector<std::int64_t>* prev = nullptr) {
  const MeshKind kind = ranks.kind;
  const int stage = ranks.stage;
  const ClassAxes& c = ranks.c;
  const Mesh& mesh = kind == MeshKind::Expert ? *plan.expert : plan.dense;
  const int pp = pp_axis_of(plan, kind);
  std::vector<std::int64_t> coords(mesh.axes.size(), 0);
  for (std::int64_t r = 0; r < plan.world_size; ++r) {
    if (pp < 0 || coords[static_cast<std::size_t>(pp)] == stage) {
      const Sizes& s = table[static_cast<std::size_t>(class_of(c, coords))];
      out.pack[static_cast<std::size_t>(r)] += s.pack;
      out.gathered[static_cast<std::size_t>(r)] += s.gathered;
      if (!out.call_peak.empty()) {
        auto& call = out.call_peak[static_cast<std::size_t>(r)];
        call = std::max(call, s.peak);
      }
      if (prev) {
        auto& last = (*prev)[static_cast<std::size_t>(r)];
        auto& peak = out.gathered_peak[static_cast<std::size_t>(r)];
        peak = std::max(peak, last + s.gathered);
        last = s.gathered;
        auto& largest = out.largest_unit[static_cast<std::size_t>(r)];
        largest = std::max(largest, s.gathered);
      }
    }
    for (std::size_t a = coords.size(); a-- > 0;) {  // odometer, rank-major
      if (++coords[a] < mesh.axes[a].size) break;
      coords[a] = 0;
    }
  }
}

// Params of a muon group that share shape, dtype and split rule have the
// same sizes: one representative each, with its multiplicity.
struct Signature {
  const PlannedParam* param = nullptr;
  std::int64_t count = 0;
};

std::vector<Signature> signatures(const Plan& plan, const std::vector<std::size_t>& params) {
  std::vector<Signature> out;
  for (std::size_t i : params) {
    const PlannedParam& p = plan.params[i];
    auto same = [&](const Signature& s) {
      return s.param->global_shape == p.global_shape && s.param->dtype == p.dtype &&
             s.param->uneven == p.uneven;
    };
    auto it = std::find_if(out.begin(), out.end(), same);
    if (it == out.end()) {
      out.push_back({&p, 1});
    } else {
      ++it->count;
    }
  }
  return out;
}

// Pack and gathered bytes of one class (representative coordinates), summed
// over batches and stages, and the largest output of one (batch, stage)
// all-gather call. The pad shape of a stage is the piece of the split's
// member 0: with chunk and balanced splits the first piece is the largest.
Sizes muon_class_sizes(const MuonGroup& g, const std::vector<std::vector<Signature>>& batches,
                       std::span<const std::int64_t> coords, std::int64_t alignment_bytes) {
  Sizes total;
  for (const std::vector<Signature>& sigs : batches) {
    std::vector<std::int64_t> stage_out(g.splits.size(), 0);
    for (const Signature& sig : sigs) {
      const PlannedParam& p = *sig.param;
      const std::int64_t esize = element_size(p.dtype);
      const std::int64_t align = std::max<std::int64_t>(1, alignment_bytes / esize);
      std::vector<int> undone(p.global_shape.size(), 0);
      for (std::size_t st = 0; st < g.splits.size(); ++st) {
        const auto& [dim, index] = g.splits[st];
        const DimSplit& s =
            p.geometry.per_dim[static_cast<std::size_t>(dim)][static_cast<std::size_t>(index)];
        const auto member0 = with_split_coord(s, coords, 0);
        const std::int64_t pad = numel(partial_shape(p.geometry, member0, undone));
        const std::int64_t padded = (pad + align - 1) / align * align;
        total.pack += padded * esize * sig.count;
        total.gathered += padded * esize * s.ways * sig.count;
        stage_out[st] += padded * esize * s.ways * sig.count;
        mark_gathered(undone, p.geometry, dim, index);
      }
    }
    for (std::int64_t b : stage_out) total.peak = std::max(total.peak, b);
  }
  return total;
}

// The axes a muon group's sizes depend on: the first stage's split (the innermost) is member
// 0 at stage 0 and undone afterwards, so the rank's coordinate on its axes never changes a size.
ClassAxes muon_group_axes(const Plan& plan, const MuonGroup& g, const Mesh& mesh) {
  const PlannedParam& first = plan.params[g.params.front()];
  std::vector<int> axes;
  for (std::size_t st = 1; st < g.splits.size(); ++st) {
    const auto& [dim, index] = g.splits[st];
    const DimSplit& s =
        first.geometry.per_dim[static_cast<std::size_t>(dim)][static_cast<std::size_t>(index)];
    axes.insert(axes.end(), s.axes.begin(), s.axes.end());
  }
  return class_axes(std::move(axes), mesh);
}

std::vector<std::vector<Signature>> muon_batches(const Plan& plan, const MuonGroup& g) {
  std::vector<std::vector<Signature>> batches;
  for (const MuonBatch& b : g.batches) batches.push_back(signatures(plan, b.params));
  return batches;
}

void muon_bytes(const Plan& plan, const MuonPlan& muon, BufferRankBytes& out) {
  for (const MuonGroup& g : muon.groups) {
    const Mesh& mesh = g.mesh == MeshKind::Expert ? *plan.expert : plan.dense;
    const ClassAxes c = muon_group_axes(plan, g, mesh);
    const std::vector<std::vector<Signature>> batches = muon_batches(plan, g);
    std::vector<Sizes> table;
    for (std::int64_t k = 0; k < c.num_classes; ++k) {
      const std::int64_t rep = representative(c, k, mesh, pp_axis_of(plan, g.mesh), g.stage);
      const auto coords = mesh_coords(mesh, rep);
      table.push_back(muon_class_sizes(g, batches, coords, muon.alignment_bytes));
    }
    add_per_rank(plan, {g.mesh, g.stage, c}, table, out);
  }
}

// A unit's slot (the rank's padded shards, bytes) depends only on the
// coordinates of the non-FSDP splits: FSDP2 pads every member of the FSDP
// group to the same (first-chunk) size, so the FSDP coordinate never changes
// it. One class per combination of the other splitting axes.
ClassAxes fsdp2_unit_axes(const Plan& plan, const Fsdp2Unit& u, const Mesh& mesh) {
  std::vector<int> axes;
  for (std::size_t i : u.params)
    for (const auto& chain : plan.params[i].geometry.per_dim)
      for (const DimSplit& s : chain)
        if (!s.fsdp) axes.insert(axes.end(), s.axes.begin(), s.axes.end());
  return class_axes(std::move(axes), mesh);
}

// The unit's sizes at a class representative's coordinates.
Sizes fsdp2_unit_sizes(const Plan& plan, const Fsdp2Unit& u, std::span<const std::int64_t> coords) {
  const ParamGeometry& first = plan.params[u.params.front()].geometry;
  const std::int64_t ways = first.per_dim[static_cast<std::size_t>(first.fsdp_dim)].back().ways;
  std::int64_t slot = 0;
  for (std::size_t i : u.params) {
    const PlannedParam& p = plan.params[i];
    slot += numel(shard_at(p.geometry, coords).padded_shape) * element_size(p.dtype);
  }
  return {slot, slot * ways, slot * ways};
}

void fsdp2_bytes(const Plan& plan, const Fsdp2Plan& fsdp2, BufferRankBytes& out) {
  std::vector<std::int64_t> prev(static_cast<std::size_t>(plan.world_size), 0);
  out.gathered_peak.assign(prev.size(), 0);
  out.largest_unit.assign(prev.size(), 0);
  for (const Fsdp2Unit& u : fsdp2.units) {
    const Mesh& mesh = u.mesh == MeshKind::Expert ? *plan.expert : plan.dense;
    const ClassAxes c = fsdp2_unit_axes(plan, u, mesh);
    std::vector<Sizes> table;
    for (std::int64_t k = 0; k < c.num_classes; ++k) {
      const std::int64_t rep = representative(c, k, mesh, pp_axis_of(plan, u.mesh), u.stage);
      table.push_back(fsdp2_unit_sizes(plan, u, mesh_coords(mesh, rep)));
    }
    add_per_rank(plan, {u.mesh, u.stage, c}, table, out, &prev);
  }
}

// Flat optimizer buffers: `pack` is the rank's shard of every bucket (the
// param all-gather's input, padding included), `gathered` the whole buffers
// (its output), BYTES of the param dtype. A rank's sizes depend on its stage
// and its coordinates off the ZeRO groups' axes only (the shard index changes
// which ranges it owns, never how many elements a shard has): one layout per
// such class.
void flat_bytes(const Plan& plan, const BufferSpec& spec, BufferRankBytes& out) {
  std::map<std::vector<std::int64_t>, std::pair<std::int64_t, std::int64_t>> memo;
  auto key_part = [&](const Mesh& mesh, const ZeroGroup& g, MeshKind kind, std::int64_t r,
                      std::vector<std::int64_t>& key) {
    std::vector<std::int64_t> c = mesh_coords(mesh, r);
    if (g.mesh == kind)
      for (int a : g.axes) c[static_cast<std::size_t>(a)] = 0;
    key.insert(key.end(), c.begin(), c.end());
  };
  for (std::int64_t r = 0; r < plan.world_size; ++r) {
    std::vector<std::int64_t> key;
    key_part(plan.dense, plan.zero.dense, MeshKind::Dense, r, key);
    if (plan.zero.has_experts && plan.zero.expert.mesh == MeshKind::Dense) {
      std::vector<std::int64_t> c = mesh_coords(plan.dense, r);
      for (int a : plan.zero.expert.axes) c[static_cast<std::size_t>(a)] = 0;
      key.insert(key.end(), c.begin(), c.end());
    }
    if (plan.expert && plan.zero.has_experts)
      key_part(*plan.expert, plan.zero.expert, MeshKind::Expert, r, key);
    auto it = memo.find(key);
    if (it == memo.end()) {
      std::int64_t pack = 0;
      std::int64_t gathered = 0;
      for (const FlatRankBuffer& b : flat_for_rank(plan, spec, r).buffers) {
        pack += b.shard_numel * element_size(b.param_dtype);
        gathered += b.numel * element_size(b.param_dtype);
      }
      it = memo.emplace(std::move(key), std::make_pair(pack, gathered)).first;
    }
    out.pack[static_cast<std::size_t>(r)] = it->second.first;
    out.gathered[static_cast<std::size_t>(r)] = it->second.second;
  }
}

// The class representative of `rank` on the mesh of a group / unit on `stage`, or -1 when
// the rank is not on that stage.
std::int64_t representative_of(const Plan& plan, MeshKind kind, int stage, const ClassAxes& c,
                               std::int64_t rank) {
  const Mesh& mesh = kind == MeshKind::Expert ? *plan.expert : plan.dense;
  const int pp = pp_axis_of(plan, kind);
  const std::vector<std::int64_t> coords = mesh_coords(mesh, rank);
  if (pp >= 0 && coords[static_cast<std::size_t>(pp)] != stage) return -1;
  return representative(c, class_of(c, coords), mesh, pp, stage);
}

}  // namespace

std::int64_t fsdp2_gathered_peak(const std::vector<std::int64_t>& unit_gathered) {
  std::int64_t peak = 0;
  for (std::size_t i = 0; i < unit_gathered.size(); ++i)
    peak = std::max(peak, unit_gathered[i] + (i > 0 ? unit_gathered[i - 1] : 0));
  return peak;
}

std::string fsdp2_unit_label(std::string_view name) {
  return name.empty() ? "(root)" : std::string(name);
}

const char* buffer_kind_name(BufferKind k) {
  switch (k) {
    case BufferKind::MuonAllGather:
      return "muon_allgather";
    case BufferKind::Fsdp2AllGather:
      return "fsdp2_allgather";
    case BufferKind::MegatronDistOpt:
      return "megatron_distopt";
    case BufferKind::DeepSpeedZero:
      return "deepspeed_zero";
  }
  return "muon_allgather";
}

std::vector<PlannedBuffer> plan_buffers(const Plan& plan) {
  std::vector<PlannedBuffer> out;
  for (const BufferSpec& spec : plan.buffers) {
    PlannedBuffer b{spec, std::nullopt, std::nullopt};
    if (spec.kind == BufferKind::MuonAllGather) b.muon = plan_muon(plan, spec);
    if (spec.kind == BufferKind::Fsdp2AllGather) b.fsdp2 = plan_fsdp2(plan, spec);
    // Flat optimizer buffers need no rank-independent part: flat_for_rank.
    out.push_back(std::move(b));
  }
  return out;
}

std::vector<BufferRankBytes> buffer_rank_bytes(const Plan& plan,
                                               const std::vector<PlannedBuffer>& buffers) {
  std::vector<BufferRankBytes> out;
  const auto w = static_cast<std::size_t>(plan.world_size);
  for (const PlannedBuffer& b : buffers) {
    BufferRankBytes r{
        b.spec.kind, std::vector<std::int64_t>(w, 0), std::vector<std::int64_t>(w, 0), {}, {}, {}};
    if (b.muon) {
      r.call_peak.assign(w, 0);
      muon_bytes(plan, *b.muon, r);
    }
    if (b.fsdp2) fsdp2_bytes(plan, *b.fsdp2, r);
    if (b.spec.kind == BufferKind::MegatronDistOpt || b.spec.kind == BufferKind::DeepSpeedZero)
      flat_bytes(plan, b.spec, r);
    out.push_back(std::move(r));
  }
  return out;
}

std::vector<BufferBytesAt> buffer_bytes_at(const Plan& plan,
                                           const std::vector<PlannedBuffer>& buffers,
                                           std::int64_t rank) {
  std::vector<BufferBytesAt> out;
  for (const PlannedBuffer& b : buffers) {
    BufferBytesAt r;
    r.kind = b.spec.kind;
    if (b.muon) {
      for (const MuonGroup& g : b.muon->groups) {
        const Mesh& mesh = g.mesh == MeshKind::Expert ? *plan.expert : plan.dense;
        const ClassAxes c = muon_group_axes(plan, g, mesh);
        const std::int64_t rep = representative_of(plan, g.mesh, g.stage, c, rank);
        if (rep < 0) continue;
        const Sizes s = muon_class_sizes(g, muon_batches(plan, g), mesh_coords(mesh, rep),
                                         b.muon->alignment_bytes);
        r.pack += s.pack;
        r.gathered += s.gathered;
        r.call_peak = std::max(r.call_peak, s.peak);
      }
    }
    if (b.fsdp2) {
      std::int64_t prev = 0;
      for (const Fsdp2Unit& u : b.fsdp2->units) {
        const Mesh& mesh = u.mesh == MeshKind::Expert ? *plan.expert : plan.dense;
        const ClassAxes c = fsdp2_unit_axes(plan, u, mesh);
        const std::int64_t rep = representative_of(plan, u.mesh, u.stage, c, rank);
        if (rep < 0) continue;
        const Sizes s = fsdp2_unit_sizes(plan, u, mesh_coords(mesh, rep));
        r.pack += s.pack;
        r.gathered += s.gathered;
        r.gathered_peak = std::max(r.gathered_peak, prev + s.gathered);
        prev = s.gathered;
        r.largest_unit = std::max(r.largest_unit, s.gathered);
      }
    }
    if (b.spec.kind == BufferKind::MegatronDistOpt || b.spec.kind == BufferKind::DeepSpeedZero) {
      for (const FlatRankBuffer& fb : flat_for_rank(plan, b.spec, rank).buffers) {
        r.pack += fb.shard_numel * element_size(fb.param_dtype);
        r.gathered += fb.numel * element_size(fb.param_dtype);
      }
    }
    out.push_back(r);
  }
  return out;
}

}  // namespace shardc
