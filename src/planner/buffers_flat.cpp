// megatron_distopt and deepspeed_zero layouts (src/planner/buffers.hpp,
// "flat optimizer buffers", where every rule is cited): the flat param/grad
// buffers ZeRO shards over a data-parallel group, and which param ranges each
// DP rank's fp32 main-param / optimizer shard owns.
#include <algorithm>
#include <map>
#include <numeric>
#include <set>
#include <tuple>

#include "planner/buffer_util.hpp"
#include "planner/buffers.hpp"

namespace shardc {
namespace {

constexpr std::int64_t kMegatronParamAlign = 64;     // param_layout.py pad_param_start
constexpr std::int64_t kMegatronBucketAlign = 128;   // param_layout.py bucket_end_divisor
constexpr std::int64_t kHighBusbwAlign = 1LL << 16;  // pad_for_high_nccl_busbw
constexpr std::int64_t kDeepSpeedAlignFactor = 2;    // stage_1_and_2.py nccl_start_alignment_factor

bool expert_class(const PlannedParam& p) {
  return p.mesh == MeshKind::Expert || !p.stacked_from.empty();
}

const Mesh& group_mesh(const Plan& plan, const ZeroGroup& g) {
  return g.mesh == MeshKind::Expert && plan.expert ? *plan.expert : plan.dense;
}

// The group's global ranks by ZeRO index (row-major over g.axes, first slowest).
std::vector<std::int64_t> group_ranks(const Plan& plan, const ZeroGroup& g, std::int64_t rank) {
  const Mesh& mesh = group_mesh(plan, g);
  std::vector<std::int64_t> coords = mesh_coords(mesh, rank);
  std::vector<std::int64_t> out;
  const std::int64_t degree = std::max<std::int64_t>(1, g.degree);
  for (std::int64_t k = 0; k < degree; ++k) {
    std::int64_t rest = k;
    for (std::size_t i = g.axes.size(); i-- > 0;) {
      const auto a = static_cast<std::size_t>(g.axes[i]);
      coords[a] = rest % mesh.axes[a].size;
      rest /= mesh.axes[a].size;
    }
    out.push_back(rank_of(mesh, coords));
  }
  return out;
}

// The param's rank-local tensor as the buffer holds it: the local shape, or
// under ZeRO-3 (FSDP) the shape before the FSDP split (DeepSpeed partitions
// the TP-local tensor flat, not on a dim).
Shape buffer_shape(const Plan& plan, const PlannedParam& p, std::int64_t rank) {
  const auto coords = mesh_coords(plan.mesh_of(p), rank);
  if (p.geometry.fsdp_dim < 0) return shard_at(p.geometry, coords).local_shape;
  std::vector<int> undone(p.global_shape.size(), 0);
  undone[static_cast<std::size_t>(p.geometry.fsdp_dim)] = 1;
  return partial_shape(p.geometry, coords, undone);
}

// A cross-stage tie end (Megatron marks both copies `shared_embedding`).
std::set<std::string> cross_stage_tie_ends(const Plan& plan) {
  std::set<std::string> out;
  for (const TieSyncGroups& t : plan.tie_sync) {
    out.insert(t.source);
    out.insert(t.alias);
  }
  return out;
}

struct ParamPiece {
  std::size_t param = 0;
  std::int64_t param_offset = 0;
  std::int64_t numel = 0;
  bool own_bucket = false;
};

// The pieces of one param: a stacked expert param's local experts (dim 0,
// contiguous), else the whole local tensor.
void add_pieces(const PlannedParam& p, std::size_t i, const Shape& shape, bool own_bucket,
                std::vector<ParamPiece>& out) {
  const std::int64_t n = numel(shape);
  if (!p.stacked_from.empty() && !shape.empty() && shape[0] > 1) {
    const std::int64_t per = n / shape[0];
    for (std::int64_t e = 0; e < shape[0]; ++e) out.push_back({i, e * per, per, own_bucket});
    return;
  }
  out.push_back({i, 0, n, own_bucket});
}

struct BufferKey {
  int virtual_stage = 0;
  DType param_dtype = DType::BFloat16;
  DType grad_dtype = DType::BFloat16;
  bool expert = false;
  auto operator<=>(const BufferKey&) const = default;
};

// Megatron's _compute_per_buffer_param_layout over `pieces` (model order).
void megatron_layout(const std::vector<ParamPiece>& pieces, std::int64_t bucket_size,
                     std::int64_t divisor, FlatRankBuffer& b) {
  std::int64_t param_start = 0;
  std::int64_t bucket_start = 0;
  std::int64_t param_end = 0;
  std::int64_t bucket_id = 0;
  bool open = false;
  auto finalize = [&](std::int64_t end) {
    const std::int64_t padded = round_up(end, divisor);
    b.buckets.push_back({bucket_start, padded, end - bucket_start});
    bucket_start = padded;
    ++bucket_id;
    open = false;
  };
  for (auto it = pieces.rbegin(); it != pieces.rend(); ++it) {
    param_start = round_up(param_start, kMegatronParamAlign);
    if (it->own_bucket && open) {
      finalize(param_start);
      param_start = bucket_start;
    }
    param_end = param_start + it->numel;
    b.entries.push_back({it->param, it->param_offset, it->numel, param_start, bucket_id});
    open = true;
    if ((bucket_size > 0 && param_end - bucket_start >= bucket_size) || it->own_bucket) {
      finalize(param_end);
      param_start = bucket_start;
    } else {
      param_start = param_end;
    }
  }
  if (open) finalize(param_end);
}

// DeepSpeed ZeRO-1/2: one flat group, model order, padded to 2 x dp.
void deepspeed_flat_layout(const std::vector<ParamPiece>& pieces, std::int64_t dp,
                           FlatRankBuffer& b) {
  std::int64_t at = 0;
  for (const ParamPiece& pc : pieces) {
    b.entries.push_back({pc.param, pc.param_offset, pc.numel, at, 0});
    at += pc.numel;
  }
  b.buckets.push_back({0, round_up(at, kDeepSpeedAlignFactor * dp), at});
}

// DeepSpeed ZeRO-3: every param its own partitioned tensor, padded to dp.
void deepspeed_param_layout(const std::vector<ParamPiece>& pieces, std::int64_t dp,
                            FlatRankBuffer& b) {
  std::int64_t at = 0;
  for (const ParamPiece& pc : pieces) {
    const auto id = static_cast<std::int64_t>(b.buckets.size());
    b.entries.push_back({pc.param, pc.param_offset, pc.numel, at, id});
    b.buckets.push_back({at, at + round_up(pc.numel, dp), pc.numel});
    at = b.buckets.back().end;
  }
}

}  // namespace

std::int64_t megatron_bucket_end_divisor(std::int64_t dp, bool pad_for_high_nccl_busbw) {
  const std::int64_t d = std::lcm(std::max<std::int64_t>(1, dp), kMegatronBucketAlign);
  return pad_for_high_nccl_busbw ? std::lcm(d, kHighBusbwAlign) : d;
}

std::int64_t megatron_default_bucket_size(std::int64_t dp) {
  return std::max<std::int64_t>(40'000'000, 1'000'000 * std::max<std::int64_t>(1, dp));
}

std::vector<FlatOwned> flat_owned(const std::vector<FlatEntry>& entries, const FlatBucket& bucket,
                                  std::int64_t bucket_index, std::int64_t degree,
                                  std::int64_t shard) {
  std::vector<FlatOwned> out;
  const std::int64_t size = (bucket.end - bucket.start) / std::max<std::int64_t>(1, degree);
  const std::int64_t lo = bucket.start + shard * size;
  const std::int64_t hi = lo + size;
  for (std::size_t k = 0; k < entries.size(); ++k) {
    const FlatEntry& e = entries[k];
    if (e.bucket != bucket_index) continue;
    const std::int64_t from = std::max(lo, e.start);
    const std::int64_t to = std::min(hi, e.start + e.numel);
    if (to > from) out.push_back({k, e.param_offset + (from - e.start), to - from, from});
  }
  return out;
}

FlatRankLayout flat_for_rank(const Plan& plan, const BufferSpec& spec, std::int64_t rank) {
  FlatRankLayout out;
  const int stage = plan.stage_of_rank(rank);
  const bool megatron = spec.kind == BufferKind::MegatronDistOpt;
  const bool per_param = !megatron && plan.zero.stage == 3;
  const std::set<std::string> shared = cross_stage_tie_ends(plan);
  std::map<BufferKey, std::size_t> index;
  std::vector<std::vector<ParamPiece>> pieces;
  for (std::size_t i = 0; i < plan.params.size(); ++i) {
    const PlannedParam& p = plan.params[i];
    if (p.stage != stage) continue;
    const bool alias = p.alias_of && plan.params[*p.alias_of].stage == p.stage;
    if (!p.requires_grad || alias) {
      out.not_communicated.push_back(i);
      continue;
    }
    BufferKey key{megatron ? p.virtual_stage : 0, p.dtype,
                  plan.training.grad_dtype.value_or(p.dtype), expert_class(p)};
    auto [it, fresh] = index.try_emplace(key, out.buffers.size());
    if (fresh) {
      FlatRankBuffer b;
      const ZeroGroup& g = plan.zero_group_of(p);
      b.mesh = g.mesh;
      b.expert = key.expert;
      b.virtual_stage = key.virtual_stage;
      b.param_dtype = key.param_dtype;
      b.grad_dtype = key.grad_dtype;
      b.ranks = group_ranks(plan, g, rank);
      b.index = plan.zero_index(g, rank);
      out.buffers.push_back(std::move(b));
      pieces.emplace_back();
    }
    const bool own = megatron && plan.num_stages > 1 && shared.contains(p.name);
    add_pieces(p, i, buffer_shape(plan, p, rank), own, pieces[it->second]);
  }
  // Megatron keeps one DDP instance per model chunk: chunk order, then first appearance.
  std::vector<std::size_t> order(out.buffers.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return out.buffers[a].virtual_stage < out.buffers[b].virtual_stage;
  });
  std::vector<FlatRankBuffer> sorted;
  for (std::size_t k : order) {
    FlatRankBuffer& b = out.buffers[k];
    const auto dp = static_cast<std::int64_t>(b.ranks.size());
    if (megatron) {
      const std::int64_t dense_dp = std::max<std::int64_t>(1, plan.zero.dense.degree);
      const bool bucketing = spec.bucket_size >= 0 && stage == 0 && b.virtual_stage == 0;
      b.bucket_size = !bucketing ? -1
                                 : (spec.bucket_size > 0 ? spec.bucket_size
                                                         : megatron_default_bucket_size(dense_dp));
      megatron_layout(pieces[k], b.bucket_size,
                      megatron_bucket_end_divisor(dp, spec.pad_for_high_nccl_busbw), b);
    } else if (per_param) {
      deepspeed_param_layout(pieces[k], dp, b);
    } else {
      deepspeed_flat_layout(pieces[k], dp, b);
    }
    b.numel = b.buckets.empty() ? 0 : b.buckets.back().end;
    for (std::size_t j = 0; j < b.buckets.size(); ++j) {
      const auto owned =
          flat_owned(b.entries, b.buckets[j], static_cast<std::int64_t>(j), dp, b.index);
      b.owned.insert(b.owned.end(), owned.begin(), owned.end());
      b.shard_numel += (b.buckets[j].end - b.buckets[j].start) / std::max<std::int64_t>(1, dp);
    }
    for (const FlatOwned& o : b.owned) b.owned_numel += o.numel;
    sorted.push_back(std::move(b));
  }
  out.buffers = std::move(sorted);
  return out;
}

}  // namespace shardc
