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
  ClassAxes classes;
  classes.axes = std::move(axes);
  for (int axis : classes.axes) {
    classes.sizes.push_back(mesh.axes[static_cast<std::size_t>(axis)].size);
    classes.num_classes *= classes.sizes.back();
  }
  return classes;
}

std::int64_t class_of(const ClassAxes& classes, std::span<const std::int64_t> coords) {
  return axes_index(classes.axes, classes.sizes, coords);
}

// A representative rank of class `k` on pipeline stage `stage`: the class
// axes set from `k`, the pipeline axis at `stage`, every other axis 0.
std::int64_t representative(const ClassAxes& classes, std::int64_t k, const Mesh& mesh, int pp_axis,
                            int stage) {
  std::vector<std::int64_t> coords(mesh.axes.size(), 0);
  if (pp_axis >= 0) coords[static_cast<std::size_t>(pp_axis)] = stage;
  set_axes_coords(classes.axes, classes.sizes, k, coords);
  return rank_of(mesh, coords);
}

struct Sizes {
  std::int64_t pack = 0;
  std::int64_t gathered = 0;
  std::int64_t peak = 0;       // muon: largest one-call output (fsdp2 uses `gathered`)
  std::int64_t trainable = 0;  // fsdp2: `gathered` of the requires_grad members only
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
                  BufferRankBytes& out, std::vector<std::int64_t>* prev = nullptr,
                  std::vector<std::int64_t>* root = nullptr) {
  const MeshKind kind = ranks.kind;
  const int stage = ranks.stage;
  const ClassAxes& classes = ranks.c;
  const Mesh& mesh = kind == MeshKind::Expert ? *plan.expert : plan.dense;
  const int pp = pp_axis_of(plan, kind);
  std::vector<std::int64_t> coords(mesh.axes.size(), 0);
  for (std::int64_t r = 0; r < plan.world_size; ++r) {
    if (pp < 0 || coords[static_cast<std::size_t>(pp)] == stage) {
      const Sizes& sizes = table[static_cast<std::size_t>(class_of(classes, coords))];
      out.pack[static_cast<std::size_t>(r)] += sizes.pack;
      out.gathered[static_cast<std::size_t>(r)] += sizes.gathered;
      if (!out.call_peak.empty()) {
        auto& call = out.call_peak[static_cast<std::size_t>(r)];
        call = std::max(call, sizes.peak);
      }
      if (root) {
        (*root)[static_cast<std::size_t>(r)] += sizes.gathered;  // gathered the whole step
      } else if (prev) {
        auto& last = (*prev)[static_cast<std::size_t>(r)];
        auto& peak = out.gathered_peak[static_cast<std::size_t>(r)];
        peak = std::max(peak, last + sizes.gathered);
        last = sizes.gathered;
      }
      if (prev) {
        auto& largest = out.largest_unit[static_cast<std::size_t>(r)];
        largest = std::max(largest, sizes.trainable);
        out.trainable_gathered[static_cast<std::size_t>(r)] += sizes.trainable;
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
    const PlannedParam& param = plan.params[i];
    auto same = [&](const Signature& sig) {
      return sig.param->global_shape == param.global_shape && sig.param->dtype == param.dtype &&
             sig.param->uneven == param.uneven;
    };
    auto it = std::find_if(out.begin(), out.end(), same);
    if (it == out.end()) {
      out.push_back({&param, 1});
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
Sizes muon_class_sizes(const MuonGroup& group, const std::vector<std::vector<Signature>>& batches,
                       std::span<const std::int64_t> coords, std::int64_t alignment_bytes) {
  Sizes total;
  for (const std::vector<Signature>& sigs : batches) {
    std::vector<std::int64_t> stage_out(group.splits.size(), 0);
    for (const Signature& sig : sigs) {
      const PlannedParam& param = *sig.param;
      const std::int64_t esize = element_size(param.dtype);
      const std::int64_t align = std::max<std::int64_t>(1, alignment_bytes / esize);
      std::vector<int> undone(param.global_shape.size(), 0);
      for (std::size_t st = 0; st < group.splits.size(); ++st) {
        const auto& [dim, index] = group.splits[st];
        const DimSplit& split =
            param.geometry.per_dim[static_cast<std::size_t>(dim)][static_cast<std::size_t>(index)];
        const auto member0 = with_split_coord(split, coords, 0);
        const std::int64_t pad = numel(partial_shape(param.geometry, member0, undone));
        const std::int64_t padded = (pad + align - 1) / align * align;
        total.pack += padded * esize * sig.count;
        total.gathered += padded * esize * split.ways * sig.count;
        stage_out[st] += padded * esize * split.ways * sig.count;
        mark_gathered(undone, param.geometry, dim, index);
      }
    }
    for (std::int64_t bytes : stage_out) total.peak = std::max(total.peak, bytes);
  }
  return total;
}

// The axes a muon group's sizes depend on: the first stage's split (the innermost) is member
// 0 at stage 0 and undone afterwards, so the rank's coordinate on its axes never changes a size.
ClassAxes muon_group_axes(const Plan& plan, const MuonGroup& group, const Mesh& mesh) {
  const PlannedParam& first = plan.params[group.params.front()];
  std::vector<int> axes;
  for (std::size_t st = 1; st < group.splits.size(); ++st) {
    const auto& [dim, index] = group.splits[st];
    const DimSplit& split =
        first.geometry.per_dim[static_cast<std::size_t>(dim)][static_cast<std::size_t>(index)];
    axes.insert(axes.end(), split.axes.begin(), split.axes.end());
  }
  return class_axes(std::move(axes), mesh);
}

std::vector<std::vector<Signature>> muon_batches(const Plan& plan, const MuonGroup& group) {
  std::vector<std::vector<Signature>> batches;
  for (const MuonBatch& batch : group.batches) batches.push_back(signatures(plan, batch.params));
  return batches;
}

void muon_bytes(const Plan& plan, const MuonPlan& muon, BufferRankBytes& out) {
  for (const MuonGroup& group : muon.groups) {
    const Mesh& mesh = group.mesh == MeshKind::Expert ? *plan.expert : plan.dense;
    const ClassAxes classes = muon_group_axes(plan, group, mesh);
    const std::vector<std::vector<Signature>> batches = muon_batches(plan, group);
    std::vector<Sizes> table;
    for (std::int64_t k = 0; k < classes.num_classes; ++k) {
      const std::int64_t rep =
          representative(classes, k, mesh, pp_axis_of(plan, group.mesh), group.stage);
      const auto coords = mesh_coords(mesh, rep);
      table.push_back(muon_class_sizes(group, batches, coords, muon.alignment_bytes));
    }
    add_per_rank(plan, {group.mesh, group.stage, classes}, table, out);
  }
}

// A unit's slot (the rank's padded shards, bytes) depends only on the
// coordinates of the non-FSDP splits: FSDP2 pads every member of the FSDP
// group to the same (first-chunk) size, so the FSDP coordinate never changes
// it. One class per combination of the other splitting axes.
ClassAxes fsdp2_unit_axes(const Plan& plan, const Fsdp2Unit& unit, const Mesh& mesh) {
  std::vector<int> axes;
  for (std::size_t i : unit.params)
    for (const auto& chain : plan.params[i].geometry.per_dim)
      for (const DimSplit& split : chain)
        if (!split.fsdp) axes.insert(axes.end(), split.axes.begin(), split.axes.end());
  return class_axes(std::move(axes), mesh);
}

// The unit's sizes at a class representative's coordinates.
Sizes fsdp2_unit_sizes(const Plan& plan, const Fsdp2Unit& unit,
                       std::span<const std::int64_t> coords) {
  const ParamGeometry& first = plan.params[unit.params.front()].geometry;
  const std::int64_t ways = first.per_dim[static_cast<std::size_t>(first.fsdp_dim)].back().ways;
  std::int64_t slot = 0;
  std::int64_t trainable = 0;
  for (std::size_t i : unit.params) {
    const PlannedParam& param = plan.params[i];
    const std::int64_t bytes =
        numel(shard_at(param.geometry, coords).padded_shape) * element_size(param.dtype);
    slot += bytes;
    if (param.requires_grad) trainable += bytes;
  }
  return {slot, slot * ways, slot * ways, trainable * ways};
}

void fsdp2_bytes(const Plan& plan, const Fsdp2Plan& fsdp2, BufferRankBytes& out) {
  std::vector<std::int64_t> prev(static_cast<std::size_t>(plan.world_size), 0);
  std::vector<std::int64_t> root(prev.size(), 0);  // the root unit's gathered bytes
  out.gathered_peak.assign(prev.size(), 0);
  out.largest_unit.assign(prev.size(), 0);
  out.trainable_gathered.assign(prev.size(), 0);
  for (const Fsdp2Unit& unit : fsdp2.units) {
    const Mesh& mesh = unit.mesh == MeshKind::Expert ? *plan.expert : plan.dense;
    const ClassAxes classes = fsdp2_unit_axes(plan, unit, mesh);
    std::vector<Sizes> table;
    for (std::int64_t k = 0; k < classes.num_classes; ++k) {
      const std::int64_t rep =
          representative(classes, k, mesh, pp_axis_of(plan, unit.mesh), unit.stage);
      table.push_back(fsdp2_unit_sizes(plan, unit, mesh_coords(mesh, rep)));
    }
    // The root unit held the whole step (Fsdp2Unit::held_whole_step) beside every pair.
    add_per_rank(plan, {unit.mesh, unit.stage, classes}, table, out, &prev,
                 unit.held_whole_step ? &root : nullptr);
  }
  for (std::size_t r = 0; r < root.size(); ++r) out.gathered_peak[r] += root[r];
}

// Flat optimizer buffers: `pack` is the rank's shard of every bucket (the
// param all-gather's input, padding included), `gathered` the whole buffers
// (its output), BYTES of the param dtype. A rank's sizes depend on its stage
// and its coordinates off the ZeRO groups' axes only (the shard index changes
// which ranges it owns, never how many elements a shard has): one layout per
// such class.
void flat_bytes(const Plan& plan, const BufferSpec& spec, BufferRankBytes& out) {
  std::map<std::vector<std::int64_t>, std::pair<std::int64_t, std::int64_t>> memo;
  auto key_part = [&](const Mesh& mesh, const ZeroGroup& group, MeshKind kind, std::int64_t rank,
                      std::vector<std::int64_t>& key) {
    std::vector<std::int64_t> coords = mesh_coords(mesh, rank);
    if (group.mesh == kind)
      for (int axis : group.axes) coords[static_cast<std::size_t>(axis)] = 0;
    key.insert(key.end(), coords.begin(), coords.end());
  };
  for (std::int64_t r = 0; r < plan.world_size; ++r) {
    std::vector<std::int64_t> key;
    key_part(plan.dense, plan.zero.dense, MeshKind::Dense, r, key);
    if (plan.zero.has_experts && plan.zero.expert.mesh == MeshKind::Dense) {
      std::vector<std::int64_t> coords = mesh_coords(plan.dense, r);
      for (int axis : plan.zero.expert.axes) coords[static_cast<std::size_t>(axis)] = 0;
      key.insert(key.end(), coords.begin(), coords.end());
    }
    if (plan.expert && plan.zero.has_experts)
      key_part(*plan.expert, plan.zero.expert, MeshKind::Expert, r, key);
    auto it = memo.find(key);
    if (it == memo.end()) {
      std::int64_t pack = 0;
      std::int64_t gathered = 0;
      for (const FlatRankBuffer& flat : flat_for_rank(plan, spec, r).buffers) {
        pack += flat.shard_numel * element_size(flat.param_dtype);
        gathered += flat.numel * element_size(flat.param_dtype);
      }
      it = memo.emplace(std::move(key), std::make_pair(pack, gathered)).first;
    }
    out.pack[static_cast<std::size_t>(r)] = it->second.first;
    out.gathered[static_cast<std::size_t>(r)] = it->second.second;
  }
}

// The class representative of `rank` on the mesh of a group / unit on `stage`, or -1 when
// the rank is not on that stage.
std::int64_t representative_of(const Plan& plan, MeshKind kind, int stage, const ClassAxes& classes,
                               std::int64_t rank) {
  const Mesh& mesh = kind == MeshKind::Expert ? *plan.expert : plan.dense;
  const int pp = pp_axis_of(plan, kind);
  const std::vector<std::int64_t> coords = mesh_coords(mesh, rank);
  if (pp >= 0 && coords[static_cast<std::size_t>(pp)] != stage) return -1;
  return representative(classes, class_of(classes, coords), mesh, pp, stage);
}

}  // namespace

std::int64_t fsdp2_gathered_peak(const std::vector<std::int64_t>& unit_gathered,
                                 std::int64_t root_gathered) {
  std::int64_t peak = 0;
  for (std::size_t i = 0; i < unit_gathered.size(); ++i)
    peak = std::max(peak, unit_gathered[i] + (i > 0 ? unit_gathered[i - 1] : 0));
  return root_gathered + peak;
}

std::string fsdp2_unit_label(std::string_view name) {
  return name.empty() ? "(root)" : std::string(name);
}

const char* buffer_kind_name(BufferKind kind) {
  switch (kind) {
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
    PlannedBuffer planned{spec, std::nullopt, std::nullopt};
    if (spec.kind == BufferKind::MuonAllGather) planned.muon = plan_muon(plan, spec);
    if (spec.kind == BufferKind::Fsdp2AllGather) planned.fsdp2 = plan_fsdp2(plan, spec);
    // Flat optimizer buffers need no rank-independent part: flat_for_rank.
    out.push_back(std::move(planned));
  }
  return out;
}

std::vector<BufferRankBytes> buffer_rank_bytes(const Plan& plan,
                                               const std::vector<PlannedBuffer>& buffers) {
  std::vector<BufferRankBytes> out;
  const auto world = static_cast<std::size_t>(plan.world_size);
  for (const PlannedBuffer& buffer : buffers) {
    BufferRankBytes bytes;
    bytes.kind = buffer.spec.kind;
    bytes.pack.assign(world, 0);
    bytes.gathered.assign(world, 0);
    if (buffer.muon) {
      bytes.call_peak.assign(world, 0);
      muon_bytes(plan, *buffer.muon, bytes);
    }
    if (buffer.fsdp2) fsdp2_bytes(plan, *buffer.fsdp2, bytes);
    if (buffer.spec.kind == BufferKind::MegatronDistOpt ||
        buffer.spec.kind == BufferKind::DeepSpeedZero)
      flat_bytes(plan, buffer.spec, bytes);
    out.push_back(std::move(bytes));
  }
  return out;
}

std::vector<BufferBytesAt> buffer_bytes_at(const Plan& plan,
                                           const std::vector<PlannedBuffer>& buffers,
                                           std::int64_t rank) {
  std::vector<BufferBytesAt> out;
  for (const PlannedBuffer& buffer : buffers) {
    BufferBytesAt bytes;
    bytes.kind = buffer.spec.kind;
    if (buffer.muon) {
      for (const MuonGroup& group : buffer.muon->groups) {
        const Mesh& mesh = group.mesh == MeshKind::Expert ? *plan.expert : plan.dense;
        const ClassAxes classes = muon_group_axes(plan, group, mesh);
        const std::int64_t rep = representative_of(plan, group.mesh, group.stage, classes, rank);
        if (rep < 0) continue;
        const Sizes sizes = muon_class_sizes(group, muon_batches(plan, group),
                                             mesh_coords(mesh, rep), buffer.muon->alignment_bytes);
        bytes.pack += sizes.pack;
        bytes.gathered += sizes.gathered;
        bytes.call_peak = std::max(bytes.call_peak, sizes.peak);
      }
    }
    if (buffer.fsdp2) {
      std::vector<std::int64_t> units;  // but the root, in module order
      std::int64_t root = 0;
      for (const Fsdp2Unit& unit : buffer.fsdp2->units) {
        const Mesh& mesh = unit.mesh == MeshKind::Expert ? *plan.expert : plan.dense;
        const ClassAxes classes = fsdp2_unit_axes(plan, unit, mesh);
        const std::int64_t rep = representative_of(plan, unit.mesh, unit.stage, classes, rank);
        if (rep < 0) continue;
        const Sizes sizes = fsdp2_unit_sizes(plan, unit, mesh_coords(mesh, rep));
        bytes.pack += sizes.pack;
        bytes.gathered += sizes.gathered;
        (unit.held_whole_step ? root : units.emplace_back()) += sizes.gathered;
        bytes.largest_unit = std::max(bytes.largest_unit, sizes.trainable);
        bytes.trainable_gathered += sizes.trainable;
      }
      bytes.gathered_peak = fsdp2_gathered_peak(units, root);
    }
    if (buffer.spec.kind == BufferKind::MegatronDistOpt ||
        buffer.spec.kind == BufferKind::DeepSpeedZero) {
      for (const FlatRankBuffer& fb : flat_for_rank(plan, buffer.spec, rank).buffers) {
        bytes.pack += fb.shard_numel * element_size(fb.param_dtype);
        bytes.gathered += fb.numel * element_size(fb.param_dtype);
      }
    }
    out.push_back(bytes);
  }
  return out;
}

}  // namespace shardc
