// Per-rank training memory by kind (include/shardc/memory.hpp): per-param
// byte factors, summed per shard class with `rank_sums`, plus the transient
// all-gather peaks of the planned buffer layouts.
#include "shardc/memory.hpp"

#include <algorithm>
#include <array>

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
  kWidth = 13,
};

bool trainable(const PlannedParam& p) { return p.requires_grad; }

std::int64_t state_count(const PlannedParam& p, Optimizer o) {
  switch (o) {
    case Optimizer::AdamW:
    case Optimizer::Adam:
      return 2;
    case Optimizer::Sgd:
      return 1;
    case Optimizer::Muon:
      return p.global_shape.size() >= 2 ? 1 : 2;
    case Optimizer::None:
      return 0;
  }
  return 0;
}

// True when FSDP shards `p`, or would (no `fsdp` in the recipe: every
// trainable param of ndim >= 1, contract §5.8).
bool fsdp_scaled(const PlannedParam& p, bool plan_has_fsdp) {
  if (plan_has_fsdp) return p.geometry.fsdp_dim >= 0;
  return trainable(p) && !p.global_shape.empty();
}

// The transient peak of one layout kind (FSDP2: `gathered_peak`, a unit plus
// the next one prefetched; muon: `call_peak`, the largest single call).
std::int64_t peak_of(const std::vector<BufferRankBytes>& buffers, BufferKind kind, std::size_t r) {
  std::int64_t best = 0;
  for (const BufferRankBytes& b : buffers) {
    if (b.kind != kind) continue;
    const std::vector<std::int64_t>& v =
        kind == BufferKind::Fsdp2AllGather ? b.gathered_peak : b.call_peak;
    if (r < v.size()) best = std::max(best, v[r]);
  }
  return best;
}

std::int64_t largest_unit_of(const std::vector<BufferRankBytes>& buffers, std::size_t r) {
  std::int64_t best = 0;
  for (const BufferRankBytes& b : buffers)
    if (b.kind == BufferKind::Fsdp2AllGather && r < b.largest_unit.size())
      best = std::max(best, b.largest_unit[r]);
  return best;
}

// The activation bytes of every stage (MemoryReport::stage_activations), or a
// note saying why they are not counted.
void stage_activation_bytes(const Plan& plan, MemoryReport& m) {
  const TrainingLayout& tl = plan.training_layout;
  if (!tl.active) return;
  if (!tl.arch) {
    m.activations_note = "the model has no `" + tl.arch_missing +
                         "` attribute (copy it from config.json): activations are not counted";
    return;
  }
  m.activations_counted = true;
  const std::int64_t e = element_size(tl.activation_dtype);
  for (std::size_t stage = 0; stage < tl.stages.size(); ++stage) {
    const std::int64_t in_flight =
        microbatches_in_flight(tl.schedule, plan.num_stages, plan.virtual_stages,
                               static_cast<std::int64_t>(stage), tl.microbatches);
    m.stage_activations.push_back(stage_activations(
        *tl.arch, plan.training.shape, e, tl.degrees, tl.stages[stage], static_cast<int>(stage),
        in_flight, tl.schedule == PipelineScheduleKind::Interleaved ? plan.virtual_stages : 1));
  }
}

void fsdp_degrees(const Plan& plan, MemoryReport& m) {
  for (const PlannedParam& p : plan.params) {
    if (p.geometry.fsdp_dim < 0) continue;
    if (p.mesh == MeshKind::Dense) m.fsdp_degree = std::max(m.fsdp_degree, p.geometry.fsdp_ways);
    if (p.mesh == MeshKind::Expert) {
      m.expert_fsdp_degree = std::max(m.expert_fsdp_degree, p.geometry.fsdp_ways);
    }
  }
}

// The peak of a whole step with the training shape (include/shardc/memory.hpp):
// activations, the gradient side of the buffers and offload.
void step_peak(const Plan& plan, const std::vector<BufferRankBytes>& buffer_bytes, std::size_t r,
               const MemoryReport& m, RankMemory& rm) {
  const int stage = plan.stage_of_rank(static_cast<std::int64_t>(r));
  for (const StageActivations& sa : m.stage_activations)
    if (sa.stage == stage) rm.activations = sa.bytes;
  // The unit's reduce-scatter input: its unsharded grads in the reduce dtype.
  const std::int64_t unit = largest_unit_of(buffer_bytes, r);
  if (unit > 0) {
    const std::int64_t param_size = element_size(plan.params.front().dtype);
    const std::int64_t grad_size =
        plan.training.grad_dtype ? element_size(*plan.training.grad_dtype) : param_size;
    rm.fsdp2_reduce_scatter = unit / param_size * grad_size;
  }
  rm.muon_grad_copy = rm.of(MemoryKind::MuonAllGather);
  const OffloadSpec& off = plan.training.shape.offload;
  std::int64_t device = 0;
  auto place = [&](std::int64_t bytes, bool host) { (host ? rm.host : device) += bytes; };
  place(rm.of(MemoryKind::Params), off.params);
  place(rm.of(MemoryKind::Grads), off.grads);
  place(rm.of(MemoryKind::MasterWeights), off.optimizer);
  place(rm.of(MemoryKind::OptimizerState), off.optimizer);
  rm.step_transient =
      std::max(rm.activations + rm.of(MemoryKind::Fsdp2AllGather) + rm.fsdp2_reduce_scatter,
               rm.of(MemoryKind::MuonAllGather) + rm.muon_grad_copy);
  rm.total = device + rm.step_transient;
}

}  // namespace

const char* memory_kind_name(MemoryKind k) {
  switch (k) {
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

ParamMemoryRule param_memory_rule(const PlannedParam& p, const TrainingSpec& t) {
  ParamMemoryRule r;
  r.param_bytes = element_size(p.dtype);
  r.state_dtype = p.dtype;
  if (!trainable(p)) return r;
  r.grad_bytes = element_size(t.grad_dtype.value_or(p.dtype));
  if (t.optimizer == Optimizer::None) return r;
  const bool master = t.master_weights && element_size(p.dtype) < element_size(*t.master_weights);
  if (master) {
    r.master_bytes = element_size(*t.master_weights);
    r.state_dtype = *t.master_weights;
  }
  if (t.state_dtype) r.state_dtype = *t.state_dtype;
  r.state_count = state_count(p, t.optimizer);
  r.state_bytes = r.state_count * element_size(r.state_dtype);
  // ZeRO-1/2 step on an fp32 copy of the shard's grads when they are kept
  // narrower than the master: Megatron DistributedOptimizer
  // _copy_model_grads_to_main_grads, `shard_main_param.grad =
  // shard_model_grad.float()` (a no-op for fp32 grads); DeepSpeed
  // stage_1_and_2.py, the fp32 `single_grad_partition` of each group.
  const int stage = t.zero.stage;
  if ((stage == 1 || stage == 2) && master && r.grad_bytes < r.master_bytes) {
    r.grad_copy_bytes = r.master_bytes;
  }
  return r;
}

MemoryReport compute_memory(const Plan& plan, const std::vector<BufferRankBytes>& buffer_bytes) {
  MemoryReport m;
  fsdp_degrees(plan, m);
  const bool has_fsdp = std::any_of(plan.params.begin(), plan.params.end(),
                                    [](const PlannedParam& p) { return p.geometry.fsdp_dim >= 0; });
  const int zero_stage = plan.zero.stage;
  stage_activation_bytes(plan, m);
  const std::vector<std::int64_t> sums = rank_sums(
      plan, kWidth, [&](const PlannedParam& p, const ShardGeom& g, std::span<std::int64_t> out) {
        const ParamMemoryRule rule = param_memory_rule(p, plan.training);
        const std::int64_t padded = numel(g.padded_shape);
        const std::int64_t local = numel(g.local_shape);
        const std::int64_t params = padded * rule.param_bytes;
        const std::int64_t grads = padded * rule.grad_bytes;
        const std::int64_t master = local * rule.master_bytes;
        const std::int64_t state = local * rule.state_bytes;
        out[kParams] += params;
        if (fsdp_scaled(p, has_fsdp)) out[kScaled] += params + grads + master + state;
        if (zero_stage != 1 && zero_stage != 2) {
          out[kGrads] += grads;
          out[kMaster] += master;
          out[kState] += state;
          return;
        }
        const std::size_t group = &plan.zero_group_of(p) == &plan.zero.expert ? 1 : 0;
        out[(zero_stage == 2 ? kZeroGrads + group : kGrads)] += grads;
        out[kZeroGradCopy + group] += local * rule.grad_copy_bytes;
        out[kZeroMaster + group] += master;
        out[kZeroState + group] += state;
      });
  // ZeRO-1/2: each rank of a group of degree d owns 1/d of the group's
  // flattened state (ceil: the even share Megatron's and DeepSpeed's padded
  // buffers give, Megatron's formula 6 + 12/d bytes per param for bf16
  // params with fp32 grads and Adam; docs "Distributed Optimizer").
  const std::array<std::int64_t, 2> degree = {std::max<std::int64_t>(1, plan.zero.dense.degree),
                                              std::max<std::int64_t>(1, plan.zero.expert.degree)};
  const auto share = [&degree](const std::int64_t* s, std::size_t column) {
    std::int64_t sum = 0;
    for (std::size_t group = 0; group < 2; ++group) {
      const std::int64_t v = s[column + group];
      sum += (v + degree[group] - 1) / degree[group];
    }
    return sum;
  };
  for (const BufferRankBytes& b : buffer_bytes) {
    if (b.kind == BufferKind::Fsdp2AllGather) m.fsdp2_declared = true;
    if (b.kind == BufferKind::MuonAllGather) m.muon_declared = true;
  }
  const auto w = static_cast<std::size_t>(plan.world_size);
  m.ranks.resize(w);
  std::vector<std::int64_t> peak_ranks;
  for (std::size_t r = 0; r < w; ++r) {
    RankMemory& rm = m.ranks[r];
    const std::int64_t* s = &sums[r * kWidth];
    rm.bytes = {s[kParams],
                s[kGrads] + share(s, kZeroGrads) + share(s, kZeroGradCopy),
                s[kMaster] + share(s, kZeroMaster),
                s[kState] + share(s, kZeroState),
                peak_of(buffer_bytes, BufferKind::Fsdp2AllGather, r),
                peak_of(buffer_bytes, BufferKind::MuonAllGather, r)};
    rm.fsdp_scaled = s[kScaled];
    rm.total = rm.of(MemoryKind::Params) + rm.of(MemoryKind::Grads) +
               rm.of(MemoryKind::MasterWeights) + rm.of(MemoryKind::OptimizerState) +
               std::max(rm.of(MemoryKind::Fsdp2AllGather), rm.of(MemoryKind::MuonAllGather));
    if (m.activations_counted) step_peak(plan, buffer_bytes, r, m, rm);
    if (rm.total > m.peak || peak_ranks.empty()) {
      m.peak = rm.total;
      peak_ranks.clear();
    }
    if (rm.total == m.peak) peak_ranks.push_back(static_cast<std::int64_t>(r));
  }
  m.peak_ranks = RankSet::from_sorted(peak_ranks);
  if (!peak_ranks.empty()) m.peak_stage = plan.stage_of_rank(peak_ranks.front());
  return m;
}

MemoryReport compute_memory(const Plan& plan) {
  return compute_memory(plan, buffer_rank_bytes(plan, plan_buffers(plan)));
}

std::vector<StageMemory> stage_memory(const Plan& plan, const MemoryReport& m) {
  std::vector<std::vector<std::int64_t>> ranks(static_cast<std::size_t>(plan.num_stages));
  for (std::int64_t r = 0; r < plan.world_size; ++r)
    ranks[static_cast<std::size_t>(plan.stage_of_rank(r))].push_back(r);
  auto stats = [&](const std::vector<std::int64_t>& rs, auto value) {
    std::vector<std::int64_t> v;
    v.reserve(rs.size());
    for (std::int64_t r : rs) v.push_back(value(m.ranks[static_cast<std::size_t>(r)]));
    std::sort(v.begin(), v.end());
    return KindStats{v.front(), v[(v.size() - 1) / 2], v.back()};
  };
  std::vector<StageMemory> out;
  for (std::size_t s = 0; s < ranks.size(); ++s) {
    if (ranks[s].empty()) continue;
    StageMemory sm;
    sm.stage = static_cast<int>(s);
    sm.num_ranks = static_cast<std::int64_t>(ranks[s].size());
    for (std::size_t k = 0; k < kMemoryKinds; ++k)
      sm.kinds[k] = stats(ranks[s], [k](const RankMemory& rm) { return rm.bytes[k]; });
    sm.step = {stats(ranks[s], [](const RankMemory& rm) { return rm.activations; }),
               stats(ranks[s], [](const RankMemory& rm) { return rm.fsdp2_reduce_scatter; }),
               stats(ranks[s], [](const RankMemory& rm) { return rm.muon_grad_copy; }),
               stats(ranks[s], [](const RankMemory& rm) { return rm.host; })};
    sm.total = stats(ranks[s], [](const RankMemory& rm) { return rm.total; });
    out.push_back(sm);
  }
  return out;
}

std::string rank_coords_text(const Plan& plan, std::int64_t rank) {
  auto text = [rank](const Mesh& mesh) {
    const std::vector<std::int64_t> c = mesh_coords(mesh, rank);
    std::string s;
    for (std::size_t i = 0; i < mesh.axes.size(); ++i) {
      if (i > 0) s += ' ';
      s += mesh.axes[i].name + "=" + std::to_string(c[i]);
    }
    return s;
  };
  std::string s = text(plan.dense);
  if (plan.expert) s += " | " + text(*plan.expert);
  return s;
}

}  // namespace shardc
