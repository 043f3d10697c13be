// verify: the rank files agree with the manifest. Every sampled rank holds
// exactly the params whose plan.json shards list it, with the local shape,
// global offset and padded shape of that shard.
#include <unordered_map>

#include "support/rank_set.hpp"
#include "verify/engine.hpp"

namespace shardc::verify {
namespace {

// For one param: sampled rank -> index of the plan.json shard that lists it.
std::unordered_map<std::int64_t, std::size_t> shard_of_rank(const PlanParam& param,
                                                            const std::vector<std::int64_t>& sample,
                                                            std::int64_t world, Report& report) {
  std::unordered_map<std::int64_t, std::size_t> out;
  for (std::size_t i = 0; i < param.shards.size(); ++i) {
    std::string error;
    const auto set = RankSet::parse(param.shards[i].ranks, world, error);
    if (!set) {
      report.mismatch("plan.json " + param.name + " shard " + std::to_string(i) + ": " + error);
      continue;
    }
    for (std::int64_t rank : sample) {
      if (!set->contains(rank)) continue;
      if (!out.emplace(rank, i).second)
        report.mismatch("plan.json " + param.name + ": rank " + std::to_string(rank) +
                        " is listed by two shards");
    }
  }
  return out;
}

void compare(const PlanParam& param, const readback::PlanShard& shard,
             const readback::RankParam& held, std::int64_t rank, Report& report) {
  const std::string where = param.name + " on rank " + std::to_string(rank) + ": ";
  if (held.local_shape != shard.local_shape)
    report.mismatch(where + "rank file local_shape " + shape_text(held.local_shape) +
                    " but plan.json " + shape_text(shard.local_shape));
  if (held.global_offset != shard.global_offset)
    report.mismatch(where + "rank file global_offset " + shape_text(held.global_offset) +
                    " but plan.json " + shape_text(shard.global_offset));
  if (held.padded_shape != shard.padded_shape)
    report.mismatch(where + "rank file padded_shape " + shape_text(held.padded_shape) +
                    " but plan.json " + shape_text(shard.padded_shape));
}

}  // namespace

void check_manifest(Context& cx, const std::vector<std::int64_t>& sample) {
  for (const PlanParam& param : cx.plan.params) {
    const auto shard = shard_of_rank(param, sample, cx.plan.world_size, cx.report);
    for (std::int64_t rank : sample) {
      const RankFile* rank_file = cx.store.get(rank);
      if (rank_file == nullptr) continue;
      const readback::RankParam* held = cx.held(*rank_file, param.name);
      const auto it = shard.find(rank);
      if (it == shard.end()) {
        if (held != nullptr)
          cx.report.mismatch(param.name + ": rank " + std::to_string(rank) +
                             " holds it but no plan.json shard lists the rank");
        continue;
      }
      if (held == nullptr) {
        cx.report.mismatch(param.name + ": plan.json lists rank " + std::to_string(rank) +
                           " but its rank file does not hold it");
        continue;
      }
      compare(param, param.shards[it->second], *held, rank, cx.report);
    }
  }
  // Params a rank file holds that plan.json does not know.
  for (std::int64_t rank : sample) {
    const RankFile* rank_file = cx.store.get(rank);
    if (rank_file == nullptr) continue;
    for (const auto& held : rank_file->params)
      if (cx.param(held.name) == nullptr)
        cx.report.mismatch("rank " + std::to_string(rank) + " holds " + held.name +
                           ", which plan.json does not list");
  }
}

}  // namespace shardc::verify
