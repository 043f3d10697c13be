// verify: the rank files agree with the manifest. Every sampled rank holds
// exactly the params whose plan.json shards list it, with the local shape,
// global offset and padded shape of that shard.
#include <unordered_map>

#include "support/rank_set.hpp"
#include "verify/engine.hpp"

namespace shardc::verify {
namespace {

// For one param: sampled rank -> index of the plan.json shard that lists it.
std::unordered_map<std::int64_t, std::size_t> shard_of_rank(const PlanParam& p,
                                                            const std::vector<std::int64_t>& sample,
                                                            std::int64_t world, Report& report) {
  std::unordered_map<std::int64_t, std::size_t> out;
  for (std::size_t i = 0; i < p.shards.size(); ++i) {
    std::string error;
    const auto set = RankSet::parse(p.shards[i].ranks, world, error);
    if (!set) {
      report.mismatch("plan.json " + p.name + " shard " + std::to_string(i) + ": " + error);
      continue;
    }
    for (std::int64_t r : sample) {
      if (!set->contains(r)) continue;
      if (!out.emplace(r, i).second)
        report.mismatch("plan.json " + p.name + ": rank " + std::to_string(r) +
                        " is listed by two shards");
    }
  }
  return out;
}

void compare(const PlanParam& p, const readback::PlanShard& s, const readback::RankParam& held,
             std::int64_t rank, Report& report) {
  const std::string where = p.name + " on rank " + std::to_string(rank) + ": ";
  if (held.local_shape != s.local_shape)
    report.mismatch(where + "rank file local_shape " + shape_text(held.local_shape) +
                    " but plan.json " + shape_text(s.local_shape));
  if (held.global_offset != s.global_offset)
    report.mismatch(where + "rank file global_offset " + shape_text(held.global_offset) +
                    " but plan.json " + shape_text(s.global_offset));
  if (held.padded_shape != s.padded_shape)
    report.mismatch(where + "rank file padded_shape " + shape_text(held.padded_shape) +
                    " but plan.json " + shape_text(s.padded_shape));
}

}  // namespace

void check_manifest(Context& cx, const std::vector<std::int64_t>& sample) {
  for (const PlanParam& p : cx.plan.params) {
    const auto shard = shard_of_rank(p, sample, cx.plan.world_size, cx.report);
    for (std::int64_t r : sample) {
      const RankFile* f = cx.store.get(r);
      if (f == nullptr) continue;
      const readback::RankParam* held = cx.held(*f, p.name);
      const auto it = shard.find(r);
      if (it == shard.end()) {
        if (held != nullptr)
          cx.report.mismatch(p.name + ": rank " + std::to_string(r) +
                             " holds it but no plan.json shard lists the rank");
        continue;
      }
      if (held == nullptr) {
        cx.report.mismatch(p.name + ": plan.json lists rank " + std::to_string(r) +
                           " but its rank file does not hold it");
        continue;
      }
      compare(p, p.shards[it->second], *held, r, cx.report);
    }
  }
  // Params a rank file holds that plan.json does not know.
  for (std::int64_t r : sample) {
    const RankFile* f = cx.store.get(r);
    if (f == nullptr) continue;
    for (const auto& held : f->params)
      if (cx.param(held.name) == nullptr)
        cx.report.mismatch("rank " + std::to_string(r) + " holds " + held.name +
                           ", which plan.json does not list");
  }
}

}  // namespace shardc::verify
