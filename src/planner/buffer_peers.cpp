// The ranks whose rank files complete a rank's buffer groups (`compile
// --with-groups`): the closure of every muon group and FSDP2 unit it joins,
// and the DP group of every flat optimizer buffer.
#include <algorithm>

#include "planner/buffers.hpp"

namespace shardc {

std::vector<std::int64_t> buffer_peers(const Plan& plan, const std::vector<PlannedBuffer>& buffers,
                                       std::int64_t rank) {
  std::vector<std::int64_t> out{rank};
  for (const PlannedBuffer& b : buffers) {
    if (b.muon) {
      for (const MuonRankGroup& g : muon_for_rank(*b.muon, plan, rank).groups) {
        std::vector<std::vector<std::int64_t>> stages;
        for (const MuonRankBatch& batch : g.batches)
          for (const MuonStage& st : batch.stages) stages.push_back(st.ranks);
        const auto c = group_closure(rank, stages);
        out.insert(out.end(), c.begin(), c.end());
      }
    }
    if (b.fsdp2) {
      for (const Fsdp2RankUnit& u : fsdp2_for_rank(*b.fsdp2, plan, rank).units)
        out.insert(out.end(), u.ranks.begin(), u.ranks.end());
    }
    if (b.spec.kind == BufferKind::MegatronDistOpt || b.spec.kind == BufferKind::DeepSpeedZero) {
      for (const FlatRankBuffer& f : flat_for_rank(plan, b.spec, rank).buffers)
        out.insert(out.end(), f.ranks.begin(), f.ranks.end());
    }
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

}  // namespace shardc
