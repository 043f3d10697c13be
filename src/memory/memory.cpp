// Per-rank training memory by kind (src/memory/memory.hpp): per-param
// byte factors, summed per shard class with `rank_sums`, plus the transient
// all-gather peaks of the planned buffer layouts.
#include "memory/memory.hpp"

#include <algorithm>
#include <array>
#include <iterator>
#include <map>
#include <tuple>

#include "support/assert.hpp"
#include "support/limits.hpp"

namespace shardc {
namespace {

// Columns of the per-class sums. The kZero* columns hold the bytes ZeRO-1/2
// shards, per group (dense, expert: kZero* + 0 / + 1), divided by the group's
// degree after the sums (Megatron: each rank keeps 1/dp of every bucket).
enum Column : std::size_t {
  kParams,
  kGrads,
  kMaster,
  kState,
  kScaled,
  kZeroGrads,         // + group: grads under ZeRO-2
  kZeroGradCopy = 7,  // + group: fp32 grad copy of the shard (narrower grads)
  kZeroMaster = 9,    // + group
  kZeroState = 11,    // + group
  kGradCopy = 13,     // fp32 grad copy of whole (unsharded, not ZeRO) grads
  kWidth = 14,
};

bool trainable(const PlannedParam& param) { return param.requires_grad; }

// An alias on its source's stage shares the source's storage (rank_sums skips it too).
bool counted_once(const Plan& plan, const PlannedParam& param) {
  return param.alias_of && plan.params[*param.alias_of].stage == param.stage;
}

std::int64_t state_count(const PlannedParam& param, Optimizer optimizer) {
  switch (optimizer) {
    case Optimizer::AdamW:
    case Optimizer::Adam:
      return 2;
    case Optimizer::Sgd:
      return 1;
    case Optimizer::Muon:
      return param.global_shape.size() >= 2 ? 1 : 2;
    case Optimizer::None:
      return 0;
  }
  return 0;
}

// True when FSDP shards `p`, or would (no `fsdp` in the recipe: every
// trainable param of ndim >= 1, contract §5.8).
bool fsdp_scaled(const PlannedParam& param, bool plan_has_fsdp) {
  if (plan_has_fsdp) return param.geometry.fsdp_dim >= 0;
  return trainable(param) && !param.global_shape.empty();
}

// The unsharded gradients of one rank alive at once, in gathered param bytes
// (memory.hpp, fsdp2_reduce_scatter): every unit's under a pipeline, else the
// largest unit's.
std::int64_t unsharded_grads_of(const Plan& plan, std::int64_t every_unit,
                                std::int64_t largest_unit) {
  return plan.num_stages > 1 ? every_unit : largest_unit;
}

// The transient peak of one layout kind (FSDP2: `gathered_peak`, a unit plus
// the next one prefetched, or `gathered` when every unit stays gathered;
// muon: `call_peak`, the largest single call).
std::int64_t peak_of(const Plan& plan, const std::vector<BufferRankBytes>& buffers, BufferKind kind,
                     std::size_t rank) {
  std::int64_t best = 0;
  for (const BufferRankBytes& buffer : buffers) {
    if (buffer.kind != kind) continue;
    const std::vector<std::int64_t>& per_rank =
        kind != BufferKind::Fsdp2AllGather ? buffer.call_peak
        : fsdp2_every_unit_gathered(plan)  ? buffer.gathered
                                           : buffer.gathered_peak;
    if (rank < per_rank.size()) best = std::max(best, per_rank[rank]);
  }
  return best;
}

std::int64_t unsharded_grads_of(const Plan& plan, const std::vector<BufferRankBytes>& buffers,
                                std::size_t rank) {
  std::int64_t best = 0;
  for (const BufferRankBytes& buffer : buffers)
    if (buffer.kind == BufferKind::Fsdp2AllGather && rank < buffer.largest_unit.size())
      best = std::max(best, unsharded_grads_of(plan, buffer.trainable_gathered[rank],
                                               buffer.largest_unit[rank]));
  return best;
}

// The activation bytes of every stage (MemoryReport::stage_activations), or a
// note saying why they are not counted.
void stage_activation_bytes(const Plan& plan, MemoryReport& report) {
  const TrainingLayout& tl = plan.training_layout;
  if (!tl.active) return;
  if (!tl.arch) {
    report.activations_note = "the model has no `" + tl.arch_missing +
                              "` attribute (copy it from config.json): activations are not counted";
    return;
  }
  report.activations_counted = true;
  const std::int64_t esize = element_size(tl.activation_dtype);
  for (std::size_t stage = 0; stage < tl.stages.size(); ++stage) {
    const std::int64_t in_flight =
        microbatches_in_flight(tl.schedule, plan.num_stages, plan.virtual_stages,
                               static_cast<std::int64_t>(stage), tl.microbatches);
    // 1F1B and GPipe run one chunk per stage: the planner refuses them with virtual stages.
    const StagePosition position{static_cast<int>(stage), in_flight, plan.virtual_stages};
    report.stage_activations.push_back(stage_activations(*tl.arch, plan.training.shape, esize,
                                                         tl.degrees, tl.stages[stage], position));
  }
}

void fsdp_degrees(const Plan& plan, MemoryReport& report) {
  for (const PlannedParam& param : plan.params) {
    if (param.geometry.fsdp_dim < 0) continue;
    if (param.mesh == MeshKind::Dense)
      report.fsdp_degree = std::max(report.fsdp_degree, param.geometry.fsdp_ways);
    if (param.mesh == MeshKind::Expert) {
      report.expert_fsdp_degree = std::max(report.expert_fsdp_degree, param.geometry.fsdp_ways);
    }
  }
}

// Params, grads, master weights and optimizer state the device keeps; `training.offload`
// moves the rest to `rm.host` (set here). Applies with or without a training shape (trial
// D 5: offload was ignored without seq_len and the budget counted host state). ZeRO-Offload
// keeps the fp32 grad copy of the shard on the host with the optimizer (DeepSpeed
// stage_1_and_2.py: `self.device = 'cpu'` under cpu_offload, the fp32 grad partition
// allocated there, reduced grads copied straight into it), and under ZeRO-2 no device grad
// partition at all.
std::int64_t model_state_on_device(const Plan& plan, RankMemory& rm) {
  const OffloadSpec& off = plan.training.shape.offload;
  rm.host = 0;
  std::int64_t device = 0;
  auto place = [&](std::int64_t bytes, bool host) { (host ? rm.host : device) += bytes; };
  const std::int64_t grads = rm.of(MemoryKind::Grads);
  // The fp32 copy moves with the optimizer; under ZeRO-2 the reduced 16-bit shard is copied
  // straight into it (copy_grads_in_partition) and never kept.
  const std::int64_t with_optimizer = off.optimizer ? rm.grad_copy : 0;
  const std::int64_t dropped =
      off.optimizer && plan.zero.stage == 2 && rm.grad_copy > 0 ? grads - rm.grad_copy : 0;
  place(grads - with_optimizer - dropped, off.grads);
  place(with_optimizer, true);
  place(rm.of(MemoryKind::Params), off.params);
  place(rm.of(MemoryKind::MasterWeights), off.optimizer);
  place(rm.of(MemoryKind::OptimizerState), off.optimizer);
  return device;
}

// The peak of a whole step with the training shape (src/memory/memory.hpp):
// activations, the gradient side of the buffers and offload.
void step_peak(const Plan& plan, std::int64_t unsharded_grads_bytes, std::int64_t rank,
               const MemoryReport& report, RankMemory& rm) {
  const int stage = plan.stage_of_rank(rank);
  for (const StageActivations& sa : report.stage_activations)
    if (sa.stage == stage) rm.activations = sa.bytes;
  // The reduce-scatter input: the unsharded grads in the reduce dtype.
  const std::int64_t unit = unsharded_grads_bytes;
  if (unit > 0) {
    const std::int64_t param_size = element_size(plan.params.front().dtype);
    const std::int64_t grad_size =
        plan.training.grad_dtype ? element_size(*plan.training.grad_dtype) : param_size;
    rm.fsdp2_reduce_scatter = unit / param_size * grad_size;
  }
  rm.muon_grad_copy = rm.of(MemoryKind::MuonAllGather);
  const std::int64_t device = model_state_on_device(plan, rm);
  rm.step_transient =
      std::max(rm.activations + rm.of(MemoryKind::Fsdp2AllGather) + rm.fsdp2_reduce_scatter,
               rm.of(MemoryKind::MuonAllGather) + rm.muon_grad_copy);
  rm.total = device + rm.step_transient;
}

}  // namespace

bool fsdp2_every_unit_gathered(const Plan& plan) {
  return plan.num_stages > 1 || plan.fsdp_reshard_after_forward == std::optional<bool>(false);
}

const char* memory_kind_name(MemoryKind kind) {
  switch (kind) {
    case MemoryKind::Params:
      return "params";
    case MemoryKind::Grads:
      return "grads";
    case MemoryKind::MasterWeights:
      return "master_weights";
    case MemoryKind::OptimizerState:
      return "optimizer_state";
    case MemoryKind::Fsdp2AllGather:
      return "fsdp2_allgather";
    case MemoryKind::MuonAllGather:
      return "muon_allgather";
  }
  return "params";
}

ParamMemoryRule param_memory_rule(const PlannedParam& param, const TrainingSpec& training) {
  ParamMemoryRule rule;
  rule.param_bytes = element_size(param.dtype);
  rule.state_dtype = param.dtype;
  if (!trainable(param)) return rule;
  rule.grad_bytes = element_size(training.grad_dtype.value_or(param.dtype));
  if (training.optimizer == Optimizer::None) return rule;
  const bool master =
      training.master_weights && element_size(param.dtype) < element_size(*training.master_weights);
  if (master) {
    rule.master_bytes = element_size(*training.master_weights);
    rule.state_dtype = *training.master_weights;
  }
  if (training.state_dtype) rule.state_dtype = *training.state_dtype;
  rule.state_count = state_count(param, training.optimizer);
  rule.state_bytes = rule.state_count * element_size(rule.state_dtype);
  // The optimizer steps on the master and needs grads of its dtype (torch optimizers take
  // a grad of the param's dtype): grads kept narrower than the master add an fp32 copy,
  // with or without ZeRO (trial D 7: only ZeRO-1/2 counted it, so `zero: 1` over one rank
  // cost 4 bytes per param more than no ZeRO). Megatron: Float16OptimizerWithFloat16Params
  // `main_param.grad = model_param.main_grad.float()`, DistributedOptimizer
  // `shard_main_param.grad = shard_model_grad.float()` (no-ops for fp32 grads); its table
  // ("Distributed Optimizer") gives fp16 params and grads 20 bytes per param without it,
  // 4 + 16/d with; DeepSpeed stage_1_and_2.py's fp32 `single_grad_partition`.
  if (master && rule.grad_bytes < rule.master_bytes) rule.grad_copy_bytes = rule.master_bytes;
  return rule;
}

namespace {

// Adds one held shard of `p` to the rank's columns (kWidth of them).
void add_shard(const Plan& plan, bool has_fsdp, const PlannedParam& param, const ShardGeom& shard,
               std::span<std::int64_t> out) {
  const int zero_stage = plan.zero.stage;
  const ParamMemoryRule rule = param_memory_rule(param, plan.training);
  const std::int64_t padded = numel(shard.padded_shape);
  const std::int64_t local = numel(shard.local_shape);
  const std::int64_t params = padded * rule.param_bytes;
  const std::int64_t grads = padded * rule.grad_bytes;
  const std::int64_t master = local * rule.master_bytes;
  const std::int64_t state = local * rule.state_bytes;
  out[kParams] += params;
  if (fsdp_scaled(param, has_fsdp)) {
    // On the device only: what `training.offload` keeps on the host does not shrink the
    // device's bytes as FSDP grows (trial D 6: the budget hint asked for 52 ranks, not 13).
    const OffloadSpec& off = plan.training.shape.offload;
    out[kScaled] +=
        (off.params ? 0 : params) + (off.grads ? 0 : grads) + (off.optimizer ? 0 : master + state);
  }
  if (zero_stage != 1 && zero_stage != 2) {
    // FSDP2 reduce-scatters into the sharded grad itself (cast to the sharded param's
    // dtype): no separate copy. Unsharded (DDP, Megatron without its distributed
    // optimizer): the fp32 copy of the rank's grads.
    out[kGrads] += grads;
    if (param.geometry.fsdp_dim < 0) out[kGradCopy] += local * rule.grad_copy_bytes;
    out[kMaster] += master;
    out[kState] += state;
    return;
  }
  const std::size_t group = &plan.zero_group_of(param) == &plan.zero.expert ? 1 : 0;
  out[(zero_stage == 2 ? kZeroGrads + group : kGrads)] += grads;
  out[kZeroGradCopy + group] += local * rule.grad_copy_bytes;
  out[kZeroMaster + group] += master;
  out[kZeroState + group] += state;
}

bool plan_has_fsdp(const Plan& plan) {
  return std::any_of(plan.params.begin(), plan.params.end(),
                     [](const PlannedParam& param) { return param.geometry.fsdp_dim >= 0; });
}

// A rank's memory from its columns and its all-gather peaks.
RankMemory finish_rank(const Plan& plan, const std::int64_t* sums, std::int64_t fsdp2_peak,
                       std::int64_t muon_peak) {
  // ZeRO-1/2: each rank of a group of degree d owns 1/d of the group's
  // flattened state (ceil: the even share Megatron's and DeepSpeed's padded
  // buffers give, Megatron's formula 6 + 12/d bytes per param for bf16
  // params with fp32 grads and Adam; docs "Distributed Optimizer").
  const std::array<std::int64_t, 2> degree = {std::max<std::int64_t>(1, plan.zero.dense.degree),
                                              std::max<std::int64_t>(1, plan.zero.expert.degree)};
  const auto share = [&degree, sums](std::size_t column) {
    std::int64_t sum = 0;
    for (std::size_t group = 0; group < 2; ++group) {
      const std::int64_t value = sums[column + group];
      sum += (value + degree[group] - 1) / degree[group];
    }
    return sum;
  };
  RankMemory rm;
  rm.grad_copy = sums[kGradCopy] + share(kZeroGradCopy);
  rm.bytes = {sums[kParams],
              sums[kGrads] + share(kZeroGrads) + rm.grad_copy,
              sums[kMaster] + share(kZeroMaster),
              sums[kState] + share(kZeroState),
              fsdp2_peak,
              muon_peak};
  rm.fsdp_scaled = sums[kScaled];
  rm.total = model_state_on_device(plan, rm) +
             std::max(rm.of(MemoryKind::Fsdp2AllGather), rm.of(MemoryKind::MuonAllGather));
  return rm;
}

void declared_layouts(const Plan& plan, MemoryReport& report) {
  for (const BufferSpec& spec : plan.buffers) {
    if (spec.kind == BufferKind::Fsdp2AllGather) {
      report.fsdp2_declared = true;
      report.fsdp2_every_unit = fsdp2_every_unit_gathered(plan);
    }
    if (spec.kind == BufferKind::MuonAllGather) report.muon_declared = true;
  }
}

// Ranks of one stage with equal memory, every figure included, form one class.
using ClassKey = std::tuple<int, std::array<std::int64_t, kMemoryKinds>, std::int64_t, std::int64_t,
                            std::array<std::int64_t, 5>>;
ClassKey class_key(int stage, const RankMemory& rm) {
  return {stage,
          rm.bytes,
          rm.total,
          rm.fsdp_scaled,
          {rm.activations, rm.fsdp2_reduce_scatter, rm.muon_grad_copy, rm.host, rm.step_transient}};
}

// The peak and its ranks from the classes, and the peak's stage.
void set_peak(const Plan& plan, MemoryReport& report) {
  report.peak = 0;
  std::vector<Progression> runs;
  bool any = false;
  for (const MemoryClass& memory_class : report.classes) {
    if (!any || memory_class.memory.total > report.peak) {
      report.peak = memory_class.memory.total;
      runs.clear();
      any = true;
    }
    if (memory_class.memory.total == report.peak)
      runs.insert(runs.end(), memory_class.ranks.runs().begin(), memory_class.ranks.runs().end());
  }
  report.peak_ranks = RankSet::from_disjoint(std::move(runs));
  if (any) report.peak_stage = plan.stage_of_rank(report.peak_ranks.first());
}

}  // namespace

MemoryReport compute_memory(const Plan& plan, const std::vector<BufferRankBytes>& buffer_bytes) {
  MemoryReport report;
  fsdp_degrees(plan, report);
  declared_layouts(plan, report);
  stage_activation_bytes(plan, report);
  const bool has_fsdp = plan_has_fsdp(plan);
  const std::vector<std::int64_t> sums =
      rank_sums(plan, kWidth,
                [&](const PlannedParam& param, const ShardGeom& shard,
                    std::span<std::int64_t> out) { add_shard(plan, has_fsdp, param, shard, out); });
  const auto world = static_cast<std::size_t>(plan.world_size);
  report.ranks.resize(world);
  for (std::size_t r = 0; r < world; ++r) {
    report.ranks[r] = finish_rank(plan, &sums[r * kWidth],
                                  peak_of(plan, buffer_bytes, BufferKind::Fsdp2AllGather, r),
                                  peak_of(plan, buffer_bytes, BufferKind::MuonAllGather, r));
    if (report.activations_counted) {
      step_peak(plan, unsharded_grads_of(plan, buffer_bytes, r), static_cast<std::int64_t>(r),
                report, report.ranks[r]);
    }
  }
  // The classes: ranks of one stage with equal memory (first-seen order = lowest rank).
  std::vector<std::vector<std::int64_t>> members;
  std::map<ClassKey, std::size_t> index;
  for (std::size_t r = 0; r < world; ++r) {
    const RankMemory& rm = report.ranks[r];
    const int stage = plan.stage_of_rank(static_cast<std::int64_t>(r));
    auto [it, fresh] = index.try_emplace(class_key(stage, rm), members.size());
    if (fresh) {
      members.emplace_back();
      report.classes.push_back({stage, rm, {}, 0});
    }
    members[it->second].push_back(static_cast<std::int64_t>(r));
  }
  for (std::size_t k = 0; k < members.size(); ++k) {
    report.classes[k].count = static_cast<std::int64_t>(members[k].size());
    report.classes[k].ranks = RankSet::from_sorted(members[k]);
  }
  set_peak(plan, report);
  return report;
}

const RankMemory& MemoryReport::at(std::int64_t rank) const {
  if (!ranks.empty()) return ranks.at(static_cast<std::size_t>(rank));
  for (const MemoryClass& memory_class : classes)
    if (memory_class.ranks.contains(rank)) return memory_class.memory;
  SHARDC_ASSERT(false, "rank " + std::to_string(rank) + " is in no memory class");
  return classes.front().memory;
}

namespace {

// Memory classes from mesh-coordinate runs (memory_classes_by_runs). A dim's piece depends
// only on the coordinates of the axes its chain names (`dim_piece_at`), so two coordinates v,
// v' of an axis are interchangeable when, for every chain naming the axis, the pieces at v
// and v' agree for every combination of the chain's other axes: they are compared by a
// 128-bit hash of that sequence, consecutive coordinates only, which cuts each axis into
// runs. A rank's memory is then a function of its run on every axis and its stage: one
// representative per cell of runs, cells of equal memory merged.
struct Hash128 {
  std::uint64_t a = 0x243f6a8885a308d3ULL;
  std::uint64_t b = 0x13198a2e03707344ULL;
  bool operator==(const Hash128&) const = default;
  void add(std::uint64_t value) {
    a = splitmix(a ^ value);
    b = splitmix(b + value * 0x9e3779b97f4a7c15ULL + 0x632be59bd9b4e019ULL);
  }
  static std::uint64_t splitmix(std::uint64_t state) {
    state += 0x9e3779b97f4a7c15ULL;
    state = (state ^ (state >> 30)) * 0xbf58476d1ce4e5b9ULL;
    state = (state ^ (state >> 27)) * 0x94d049bb133111ebULL;
    return state ^ (state >> 31);
  }
};

struct Chain {
  const ParamGeometry* geom = nullptr;
  std::size_t dim = 0;
  std::vector<int> axes;  // sorted, distinct
};

// A key of what `dim_piece_at` reads for one dim (equal keys: equal pieces everywhere).
std::string chain_key(const ParamGeometry& geom, std::size_t dim) {
  std::string key;
  const auto put = [&key](std::int64_t value) {
    key.append(reinterpret_cast<const char*>(&value), sizeof value);
  };
  const bool packed = !geom.parts.empty() && static_cast<int>(dim) == geom.parts_dim;
  put(packed ? -1 : geom.global_shape[dim]);
  if (packed) {
    put(static_cast<std::int64_t>(geom.parts.size()));
    for (std::int64_t part : geom.parts) put(part);
  }
  for (const DimSplit& split : geom.per_dim[dim]) {
    put(static_cast<std::int64_t>(split.axes.size()));
    for (std::size_t i = 0; i < split.axes.size(); ++i) {
      put(split.axes[i]);
      put(split.axis_sizes[i]);
    }
    put(split.split_factor);
    put(split.ways);
    put(static_cast<std::int64_t>(split.rule));
    put(split.fsdp ? 1 : 0);
    put(split.pad_multiple);
    put(split.unit);
  }
  return key;
}

}  // namespace

std::optional<MemoryReport> memory_classes_by_runs(const Plan& plan, std::string* why) {
  const auto refuse = [why](std::string text) -> std::optional<MemoryReport> {
    if (why) *why = std::move(text);
    return std::nullopt;
  };
  if (plan.expert) {
    return refuse("the plan has an expert mesh: the per-class report above " +
                  std::to_string(limits::kMaxMemoryReportWorld) +
                  " ranks covers dense meshes only");
  }
  const Mesh& mesh = plan.dense;
  const std::size_t naxes = mesh.axes.size();
  std::vector<std::int64_t> strides(naxes, 1);
  for (std::size_t i = naxes; i-- > 1;) strides[i - 1] = strides[i] * mesh.axes[i].size;
  // Distinct chains.
  std::map<std::string, Chain> chains;
  for (const PlannedParam& param : plan.params) {
    for (std::size_t d = 0; d < param.geometry.per_dim.size(); ++d) {
      if (param.geometry.per_dim[d].empty()) continue;
      auto [it, fresh] = chains.try_emplace(chain_key(param.geometry, d));
      if (!fresh) continue;
      Chain& chain = it->second;
      chain.geom = &param.geometry;
      chain.dim = d;
      for (const DimSplit& split : param.geometry.per_dim[d])
        chain.axes.insert(chain.axes.end(), split.axes.begin(), split.axes.end());
      std::sort(chain.axes.begin(), chain.axes.end());
      chain.axes.erase(std::unique(chain.axes.begin(), chain.axes.end()), chain.axes.end());
    }
  }
  // Run starts per axis: the pipeline axis one run per stage, an axis no chain names one run.
  std::vector<std::vector<std::int64_t>> starts(naxes, std::vector<std::int64_t>{0});
  const auto max_runs = static_cast<std::size_t>(limits::kMaxMemoryReportWorld);
  for (std::size_t a = 0; a < naxes; ++a) {
    if (static_cast<int>(a) == plan.pipeline_axis) {
      for (std::int64_t v = 1; v < mesh.axes[a].size; ++v) starts[a].push_back(v);
    }
  }
  std::vector<std::int64_t> coords(naxes, 0);
  for (const auto& entry : chains) {
    const Chain& chain = entry.second;  // a named reference: lambdas below capture it
    for (const int axis : chain.axes) {
      const auto axis_index = static_cast<std::size_t>(axis);
      std::vector<std::int64_t> breaks;
      const std::vector<DimSplit>& splits = chain.geom->per_dim[chain.dim];
      const bool packed =
          !chain.geom->parts.empty() && static_cast<int>(chain.dim) == chain.geom->parts_dim;
      const bool monotone = splits.size() == 1 && splits[0].axes.size() == 1 && !packed &&
                            splits[0].split_factor == 1;
      if (monotone) {
        // One split on one axis: every rule's piece (split_piece: chunk, even, balanced, pad,
        // units, FSDP) has alloc and real rows non-increasing in the coordinate, so equal
        // pieces at both ends of a range mean one piece throughout: bisect for the breaks.
        std::fill(coords.begin(), coords.end(), 0);
        const auto piece = [&](std::int64_t coord) {
          coords[axis_index] = coord;
          const DimPiece dim_piece = dim_piece_at(*chain.geom, chain.dim, coords);
          return std::pair{dim_piece.alloc, dim_piece.real};
        };
        std::vector<std::pair<std::int64_t, std::int64_t>> todo{
            {0, mesh.axes[axis_index].size - 1}};
        while (!todo.empty()) {
          const auto [lo, hi] = todo.back();
          todo.pop_back();
          if (lo >= hi || piece(lo) == piece(hi)) continue;
          if (hi - lo == 1) {
            breaks.push_back(hi);
            if (breaks.size() > max_runs) {
              return refuse("mesh axis '" + mesh.axes[axis_index].name + "' has over " +
                            std::to_string(max_runs) + " coordinates of distinct memory");
            }
            continue;
          }
          const std::int64_t mid = lo + (hi - lo) / 2;
          todo.push_back({mid, hi});
          todo.push_back({lo, mid});
        }
        std::sort(breaks.begin(), breaks.end());
      }
      Hash128 prev;
      for (std::int64_t v = 0; !monotone && v < mesh.axes[axis_index].size; ++v) {
        std::fill(coords.begin(), coords.end(), 0);
        coords[axis_index] = v;
        Hash128 hash;
        while (true) {
          const DimPiece piece = dim_piece_at(*chain.geom, chain.dim, coords);
          hash.add(static_cast<std::uint64_t>(piece.alloc));
          hash.add(static_cast<std::uint64_t>(piece.real));
          // Odometer over the chain's other axes (last fastest).
          std::size_t i = chain.axes.size();
          while (i-- > 0) {
            const auto other = static_cast<std::size_t>(chain.axes[i]);
            if (other == axis_index) continue;
            if (++coords[other] < mesh.axes[other].size) break;
            coords[other] = 0;
          }
          if (i == static_cast<std::size_t>(-1)) break;
        }
        if (v > 0 && !(hash == prev)) {
          breaks.push_back(v);
          if (breaks.size() > max_runs) {
            return refuse("mesh axis '" + mesh.axes[axis_index].name + "' has over " +
                          std::to_string(max_runs) + " coordinates of distinct memory");
          }
        }
        prev = hash;
      }
      std::vector<std::int64_t> merged;
      std::set_union(starts[axis_index].begin(), starts[axis_index].end(), breaks.begin(),
                     breaks.end(), std::back_inserter(merged));
      starts[axis_index] = std::move(merged);
    }
  }
  std::int64_t cells = 1;
  for (const auto& axis_starts : starts) {
    cells *= static_cast<std::int64_t>(axis_starts.size());
    if (cells > limits::kMaxMemoryReportWorld) {
      return refuse("over " + std::to_string(limits::kMaxMemoryReportWorld) +
                    " classes of ranks with distinct memory");
    }
  }
  MemoryReport report;
  fsdp_degrees(plan, report);
  declared_layouts(plan, report);
  stage_activation_bytes(plan, report);
  const bool has_fsdp = plan_has_fsdp(plan);
  const std::vector<PlannedBuffer> buffers = plan_buffers(plan);
  std::vector<std::size_t> run(naxes, 0);
  std::map<ClassKey, std::size_t> index;
  std::vector<std::vector<Progression>> members;
  std::size_t progressions = 0;
  for (std::int64_t cell = 0; cell < cells; ++cell) {
    std::int64_t rank = 0;
    for (std::size_t a = 0; a < naxes; ++a) {
      coords[a] = starts[a][run[a]];
      rank += coords[a] * strides[a];
    }
    std::array<std::int64_t, kWidth> cols{};
    for (const PlannedParam& param : plan.params) {
      if (!plan.holds(rank, param) || counted_once(plan, param)) continue;
      add_shard(plan, has_fsdp, param, shard_at(param.geometry, coords), cols);
    }
    std::int64_t fsdp2 = 0;
    std::int64_t muon = 0;
    std::int64_t unsharded_grads = 0;
    for (const BufferBytesAt& bytes : buffer_bytes_at(plan, buffers, rank)) {
      if (bytes.kind == BufferKind::Fsdp2AllGather) {
        fsdp2 =
            std::max(fsdp2, fsdp2_every_unit_gathered(plan) ? bytes.gathered : bytes.gathered_peak);
        unsharded_grads =
            std::max(unsharded_grads,
                     unsharded_grads_of(plan, bytes.trainable_gathered, bytes.largest_unit));
      }
      muon = std::max(muon, bytes.call_peak);
    }
    RankMemory rm = finish_rank(plan, cols.data(), fsdp2, muon);
    if (report.activations_counted) step_peak(plan, unsharded_grads, rank, report, rm);
    const int stage = plan.stage_of_rank(rank);
    auto [it, fresh] = index.try_emplace(class_key(stage, rm), members.size());
    if (fresh) {
      members.emplace_back();
      report.classes.push_back({stage, rm, {}, 0});
    }
    // The cell's ranks: the innermost axis's run is one progression, repeated over every
    // coordinate of the outer axes' runs.
    const auto end_of = [&](std::size_t axis) {
      return run[axis] + 1 < starts[axis].size() ? starts[axis][run[axis] + 1]
                                                 : mesh.axes[axis].size;
    };
    std::int64_t count = 1;
    std::vector<std::int64_t> bases{0};
    for (std::size_t a = 0; a + 1 < naxes; ++a) {
      std::vector<std::int64_t> next;
      for (std::int64_t base : bases)
        for (std::int64_t v = starts[a][run[a]]; v < end_of(a); ++v)
          next.push_back(base + v * strides[a]);
      bases = std::move(next);
      progressions += bases.size();
      if (progressions > (std::size_t{1} << 24)) {
        return refuse("the classes' rank sets need over 2^24 runs of ranks");
      }
    }
    const std::int64_t inner_lo = naxes ? starts[naxes - 1][run[naxes - 1]] : 0;
    const std::int64_t inner_len = naxes ? end_of(naxes - 1) - inner_lo : 1;
    for (std::int64_t base : bases) members[it->second].push_back({base + inner_lo, 1, inner_len});
    count = static_cast<std::int64_t>(bases.size()) * inner_len;
    report.classes[it->second].count += count;
    for (std::size_t a = naxes; a-- > 0;) {  // odometer over the runs
      if (++run[a] < starts[a].size()) break;
      run[a] = 0;
    }
  }
  for (std::size_t k = 0; k < members.size(); ++k)
    report.classes[k].ranks = RankSet::from_disjoint(std::move(members[k]));
  // Lowest rank first, as compute_memory orders its classes.
  std::sort(report.classes.begin(), report.classes.end(),
            [](const MemoryClass& left, const MemoryClass& right) {
              return left.ranks.first() < right.ranks.first();
            });
  set_peak(plan, report);
  return report;
}

std::optional<MemoryReport> memory_classes(const Plan& plan, std::string* why) {
  if (plan.world_size <= limits::kMaxMemoryReportWorld) return compute_memory(plan);
  return memory_classes_by_runs(plan, why);
}

MemoryReport compute_memory(const Plan& plan) {
  return compute_memory(plan, buffer_rank_bytes(plan, plan_buffers(plan)));
}

std::vector<StageMemory> stage_memory(const Plan& plan, const MemoryReport& report) {
  // Per stage: (value, ranks) pairs sorted by value; the lower median is the value at
  // position (n - 1) / 2 of the stage's n ranks.
  std::vector<std::vector<const MemoryClass*>> by_stage(static_cast<std::size_t>(plan.num_stages));
  for (const MemoryClass& memory_class : report.classes)
    by_stage[static_cast<std::size_t>(memory_class.stage)].push_back(&memory_class);
  auto stats = [](const std::vector<const MemoryClass*>& cs, auto value) {
    std::vector<std::pair<std::int64_t, std::int64_t>> values;
    values.reserve(cs.size());
    std::int64_t ranks = 0;
    for (const MemoryClass* memory_class : cs) {
      values.emplace_back(value(memory_class->memory), memory_class->count);
      ranks += memory_class->count;
    }
    std::sort(values.begin(), values.end());
    const std::int64_t at = (ranks - 1) / 2;
    std::int64_t median = values.back().first;
    std::int64_t seen = 0;
    for (const auto& [x, count] : values) {
      seen += count;
      if (seen > at) {
        median = x;
        break;
      }
    }
    return KindStats{values.front().first, median, values.back().first};
  };
  std::vector<StageMemory> out;
  for (std::size_t s = 0; s < by_stage.size(); ++s) {
    if (by_stage[s].empty()) continue;
    StageMemory sm;
    sm.stage = static_cast<int>(s);
    for (const MemoryClass* memory_class : by_stage[s]) sm.num_ranks += memory_class->count;
    for (std::size_t k = 0; k < kMemoryKinds; ++k)
      sm.kinds[k] = stats(by_stage[s], [k](const RankMemory& rm) { return rm.bytes[k]; });
    sm.step = {stats(by_stage[s], [](const RankMemory& rm) { return rm.activations; }),
               stats(by_stage[s], [](const RankMemory& rm) { return rm.fsdp2_reduce_scatter; }),
               stats(by_stage[s], [](const RankMemory& rm) { return rm.muon_grad_copy; }),
               stats(by_stage[s], [](const RankMemory& rm) { return rm.host; })};
    sm.total = stats(by_stage[s], [](const RankMemory& rm) { return rm.total; });
    out.push_back(sm);
  }
  return out;
}

std::string rank_coords_text(const Plan& plan, std::int64_t rank) {
  auto mesh_text = [rank](const Mesh& mesh) {
    const std::vector<std::int64_t> coords = mesh_coords(mesh, rank);
    std::string axes;
    for (std::size_t i = 0; i < mesh.axes.size(); ++i) {
      if (i > 0) axes += ' ';
      axes += mesh.axes[i].name + "=" + std::to_string(coords[i]);
    }
    return axes;
  };
  std::string text = mesh_text(plan.dense);
  if (plan.expert) text += " | " + mesh_text(*plan.expert);
  return text;
}

}  // namespace shardc
