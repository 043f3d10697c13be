// The ranks whose rank files complete a rank's buffer groups (`compile
// --with-groups`): the closure of every muon group and FSDP2 unit it joins,
// and the DP group of every flat optimizer buffer.
#include <algorithm>

#include "planner/buffers.hpp"

namespace shardc {

std::vector<std::int64_t> buffer_peers(const Plan& plan, const std::vector<PlannedBuffer>& buffers,
                                       std::int64_t rank) {
  std::vector<std::int64_t> out{rank};
  for (const PlannedBuffer& buffer : buffers) {
    if (buffer.muon) {
      for (const MuonRankGroup& group : muon_for_rank(*buffer.muon, plan, rank).groups) {
        std::vector<std::vector<std::int64_t>> stages;
        for (const MuonRankBatch& batch : group.batches)
          for (const MuonStage& st : batch.stages) stages.push_back(st.ranks);
        const auto closure = group_closure(rank, stages);
        out.insert(out.end(), closure.begin(), closure.end());
      }
    }
    if (buffer.fsdp2) {
      for (const Fsdp2RankUnit& unit : fsdp2_for_rank(*buffer.fsdp2, plan, rank).units)
        out.insert(out.end(), unit.ranks.begin(), unit.ranks.end());
    }
    if (buffer.spec.kind == BufferKind::MegatronDistOpt ||
        buffer.spec.kind == BufferKind::DeepSpeedZero) {
      for (const FlatRankBuffer& flat : flat_for_rank(plan, buffer.spec, rank).buffers)
        out.insert(out.end(), flat.ranks.begin(), flat.ranks.end());
    }
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

}  // namespace shardc
