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

bool expert_class(const PlannedParam& param) {
  return param.mesh == MeshKind::Expert || !param.stacked_from.empty();
}

const Mesh& group_mesh(const Plan& plan, const ZeroGroup& group) {
  return group.mesh == MeshKind::Expert && plan.expert ? *plan.expert : plan.dense;
}

// The group's global ranks by ZeRO index (row-major over g.axes, first slowest).
std::vector<std::int64_t> group_ranks(const Plan& plan, const ZeroGroup& group, std::int64_t rank) {
  const Mesh& mesh = group_mesh(plan, group);
  std::vector<std::int64_t> coords = mesh_coords(mesh, rank);
  std::vector<std::int64_t> out;
  const std::int64_t degree = std::max<std::int64_t>(1, group.degree);
  for (std::int64_t k = 0; k < degree; ++k) {
    std::int64_t rest = k;
    for (std::size_t i = group.axes.size(); i-- > 0;) {
      const auto axis = static_cast<std::size_t>(group.axes[i]);
      coords[axis] = rest % mesh.axes[axis].size;
      rest /= mesh.axes[axis].size;
    }
    out.push_back(rank_of(mesh, coords));
  }
  return out;
}

// The param's rank-local tensor as the buffer holds it: the local shape, or
// under ZeRO-3 (FSDP) the shape before the FSDP split (DeepSpeed partitions
// the TP-local tensor flat, not on a dim).
Shape buffer_shape(const Plan& plan, const PlannedParam& param, std::int64_t rank) {
  const auto coords = mesh_coords(plan.mesh_of(param), rank);
  if (param.geometry.fsdp_dim < 0) return shard_at(param.geometry, coords).local_shape;
  std::vector<int> undone(param.global_shape.size(), 0);
  undone[static_cast<std::size_t>(param.geometry.fsdp_dim)] = 1;
  return partial_shape(param.geometry, coords, undone);
}

// A cross-stage tie end (Megatron marks both copies `shared_embedding`).
std::set<std::string> cross_stage_tie_ends(const Plan& plan) {
  std::set<std::string> out;
  for (const TieSyncGroups& tie : plan.tie_sync) {
    out.insert(tie.source);
    out.insert(tie.alias);
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
void add_pieces(const PlannedParam& param, std::size_t i, const Shape& shape, bool own_bucket,
                std::vector<ParamPiece>& out) {
  const std::int64_t elements = numel(shape);
  if (!param.stacked_from.empty() && !shape.empty() && shape[0] > 1) {
    const std::int64_t per = elements / shape[0];
    for (std::int64_t e = 0; e < shape[0]; ++e) out.push_back({i, e * per, per, own_bucket});
    return;
  }
  out.push_back({i, 0, elements, own_bucket});
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
                     std::int64_t divisor, FlatRankBuffer& buffer) {
  std::int64_t param_start = 0;
  std::int64_t bucket_start = 0;
  std::int64_t param_end = 0;
  std::int64_t bucket_id = 0;
  bool open = false;
  auto finalize = [&](std::int64_t end) {
    const std::int64_t padded = round_up(end, divisor);
    buffer.buckets.push_back({bucket_start, padded, end - bucket_start});
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
    buffer.entries.push_back({it->param, it->param_offset, it->numel, param_start, bucket_id});
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
                           FlatRankBuffer& buffer) {
  std::int64_t at = 0;
  for (const ParamPiece& pc : pieces) {
    buffer.entries.push_back({pc.param, pc.param_offset, pc.numel, at, 0});
    at += pc.numel;
  }
  buffer.buckets.push_back({0, round_up(at, kDeepSpeedAlignFactor * dp), at});
}

// DeepSpeed ZeRO-3: every param its own partitioned tensor, padded to dp.
void deepspeed_param_layout(const std::vector<ParamPiece>& pieces, std::int64_t dp,
                            FlatRankBuffer& buffer) {
  std::int64_t at = 0;
  for (const ParamPiece& pc : pieces) {
    const auto id = static_cast<std::int64_t>(buffer.buckets.size());
    buffer.entries.push_back({pc.param, pc.param_offset, pc.numel, at, id});
    buffer.buckets.push_back({at, at + round_up(pc.numel, dp), pc.numel});
    at = buffer.buckets.back().end;
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
    const FlatEntry& entry = entries[k];
    if (entry.bucket != bucket_index) continue;
    const std::int64_t from = std::max(lo, entry.start);
    const std::int64_t to = std::min(hi, entry.start + entry.numel);
    if (to > from) out.push_back({k, entry.param_offset + (from - entry.start), to - from, from});
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
    const PlannedParam& param = plan.params[i];
    if (param.stage != stage) continue;
    const bool alias = param.alias_of && plan.params[*param.alias_of].stage == param.stage;
    if (!param.requires_grad || alias) {
      out.not_communicated.push_back(i);
      continue;
    }
    BufferKey key{megatron ? param.virtual_stage : 0, param.dtype,
                  plan.training.grad_dtype.value_or(param.dtype), expert_class(param)};
    auto [it, fresh] = index.try_emplace(key, out.buffers.size());
    if (fresh) {
      FlatRankBuffer buffer;
      const ZeroGroup& group = plan.zero_group_of(param);
      buffer.mesh = group.mesh;
      buffer.expert = key.expert;
      buffer.virtual_stage = key.virtual_stage;
      buffer.param_dtype = key.param_dtype;
      buffer.grad_dtype = key.grad_dtype;
      buffer.ranks = group_ranks(plan, group, rank);
      buffer.index = plan.zero_index(group, rank);
      out.buffers.push_back(std::move(buffer));
      pieces.emplace_back();
    }
    const bool own = megatron && plan.num_stages > 1 && shared.contains(param.name);
    add_pieces(param, i, buffer_shape(plan, param, rank), own, pieces[it->second]);
  }
  // Megatron keeps one DDP instance per model chunk: chunk order, then first appearance.
  std::vector<std::size_t> order(out.buffers.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](std::size_t left, std::size_t right) {
    return out.buffers[left].virtual_stage < out.buffers[right].virtual_stage;
  });
  std::vector<FlatRankBuffer> sorted;
  for (std::size_t k : order) {
    FlatRankBuffer& buffer = out.buffers[k];
    const auto dp = static_cast<std::int64_t>(buffer.ranks.size());
    if (megatron) {
      const std::int64_t dense_dp = std::max<std::int64_t>(1, plan.zero.dense.degree);
      const bool bucketing = spec.bucket_size >= 0 && stage == 0 && buffer.virtual_stage == 0;
      buffer.bucket_size =
          !bucketing
              ? -1
              : (spec.bucket_size > 0 ? spec.bucket_size : megatron_default_bucket_size(dense_dp));
      megatron_layout(pieces[k], buffer.bucket_size,
                      megatron_bucket_end_divisor(dp, spec.pad_for_high_nccl_busbw), buffer);
    } else if (per_param) {
      deepspeed_param_layout(pieces[k], dp, buffer);
    } else {
      deepspeed_flat_layout(pieces[k], dp, buffer);
    }
    buffer.numel = buffer.buckets.empty() ? 0 : buffer.buckets.back().end;
    for (std::size_t j = 0; j < buffer.buckets.size(); ++j) {
      const auto owned = flat_owned(buffer.entries, buffer.buckets[j], static_cast<std::int64_t>(j),
                                    dp, buffer.index);
      buffer.owned.insert(buffer.owned.end(), owned.begin(), owned.end());
      buffer.shard_numel +=
          (buffer.buckets[j].end - buffer.buckets[j].start) / std::max<std::int64_t>(1, dp);
    }
    for (const FlatOwned& owned : buffer.owned) buffer.owned_numel += owned.numel;
    sorted.push_back(std::move(buffer));
  }
  out.buffers = std::move(sorted);
  return out;
}

}  // namespace shardc
