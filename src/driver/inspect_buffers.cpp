// `shardc inspect` text for a rank's buffer-packing layouts (contract §6.3).
#include "driver/inspect_buffers.hpp"

#include <algorithm>
#include <ostream>

#include "driver/text_format.hpp"
#include "memory/memory.hpp"
#include "planner/buffers.hpp"

namespace shardc::driver {
namespace {

std::string ranks_text(const std::vector<std::int64_t>& ranks) {
  if (std::is_sorted(ranks.begin(), ranks.end())) return RankSet::from_sorted(ranks).to_string();
  std::vector<std::string> parts;
  for (std::int64_t rank : ranks) parts.push_back(std::to_string(rank));
  return join(parts, ",");
}

std::string size_text(std::int64_t numel, std::int64_t bytes) {
  return group_digits(numel) + " el (" + binary_bytes_text(bytes) + ")";
}

std::string axes_text(const Mesh& mesh, const std::vector<int>& axes) {
  std::vector<std::string> names;
  for (int axis : axes) names.push_back(mesh.axes.at(static_cast<std::size_t>(axis)).name);
  return join(names, "+");
}

void print_muon(const Plan& plan, const MuonPlan& muon, std::int64_t rank, std::ostream& out) {
  out << "  muon_allgather (alignment " << muon.alignment_bytes << " B):";
  const MuonRankLayout layout = muon_for_rank(muon, plan, rank);
  out << (layout.groups.empty() ? " no groups\n" : "\n");
  for (const MuonRankGroup& rg : layout.groups) {
    const MuonGroup& group = *rg.group;
    const Mesh& mesh = group.mesh == MeshKind::Expert ? *plan.expert : plan.dense;
    const auto owned = std::count(group.owners.begin(), group.owners.end(), rg.replicate_coord);
    out << "    group '" << group.key << "': " << group.params.size() << " params, owner of "
        << owned << ", " << group.batches.size()
        << (group.batches.size() == 1 ? " batch\n" : " batches\n");
    for (std::size_t b = 0; b < rg.batches.size(); ++b) {
      const MuonRankBatch& rb = rg.batches[b];
      const std::int64_t esize = element_size(rb.dtype);
      if (rb.stages.empty())
        out << "      batch " << b << " " << dtype_name(rb.dtype) << ": nothing to gather\n";
      for (std::size_t s = 0; s < rb.stages.size(); ++s) {
        const MuonStage& st = rb.stages[s];
        out << "      batch " << b << " " << dtype_name(rb.dtype) << " stage " << s << " over "
            << axes_text(mesh, st.axes) << ", ranks " << ranks_text(st.ranks) << " (index "
            << st.index << "): pack " << size_text(st.total_numel, st.total_numel * esize)
            << ", gathered " << size_text(st.gathered_numel, st.gathered_numel * esize) << "\n";
      }
    }
  }
  out << "    not communicated: " << layout.not_communicated->size() << " params\n";
}

void print_fsdp2(const Plan& plan, const Fsdp2Plan& fsdp2, std::int64_t rank, std::ostream& out) {
  const Fsdp2RankLayout layout = fsdp2_for_rank(fsdp2, plan, rank);
  out << "  fsdp2_allgather:" << (layout.units.empty() ? " no units\n" : "\n");
  std::vector<std::int64_t> gathered;  // the units but the root, in module order
  std::int64_t root = 0;
  std::int64_t sum = 0;
  for (const Fsdp2RankUnit& ru : layout.units) {
    const auto ways = static_cast<std::int64_t>(ru.ranks.size());
    (ru.unit->held_whole_step ? root : gathered.emplace_back()) += ru.total_bytes * ways;
    sum += ru.total_bytes * ways;
    const std::string name = fsdp2_unit_label(ru.unit->name);
    out << "    unit '" << name << "' (" << mesh_kind_name(ru.unit->mesh) << ", "
        << ru.params.size() << " params" << (ru.unit->byte_units ? ", byte units" : "")
        << "): ranks " << ranks_text(ru.ranks) << " (index " << ru.index << "), slot "
        << binary_bytes_text(ru.total_bytes) << ", gathered [" << ways << ", "
        << group_digits(ru.total) << "] " << binary_bytes_text(ru.total_bytes * ways) << "\n";
  }
  if (fsdp2_every_unit_gathered(plan)) {
    out << "    gathered peak " << binary_bytes_text(sum) << " (every unit: "
        << (plan.num_stages > 1 ? "a pipeline keeps them gathered until the last micro-batch"
                                : "reshard_after_forward: false")
        << "; docs/memory.md)\n";
  } else {
    out << "    gathered peak " << binary_bytes_text(fsdp2_gathered_peak(gathered, root))
        << (root > 0 ? " (the root unit, gathered the whole step, + the largest unit + the next "
                       "one prefetched)"
                     : " (largest unit + the next one prefetched)")
        << "; sum over units " << binary_bytes_text(sum) << " (never all live at once)\n";
  }
  out << "    not communicated: " << layout.not_communicated->size() << " params\n";
}

// One line per flat buffer: its group, buckets and what this rank's shards own.
void print_flat(const Plan& plan, const BufferSpec& spec, std::int64_t rank, std::ostream& out) {
  const FlatRankLayout layout = flat_for_rank(plan, spec, rank);
  out << "  " << buffer_kind_name(spec.kind) << " (ZeRO-" << plan.zero.stage
      << "):" << (layout.buffers.empty() ? " no buffers\n" : "\n");
  for (const FlatRankBuffer& buffer : layout.buffers) {
    const std::int64_t esize = element_size(buffer.param_dtype);
    out << "    " << (buffer.expert ? "expert" : "dense") << " chunk " << buffer.virtual_stage
        << " " << dtype_name(buffer.param_dtype) << "/" << dtype_name(buffer.grad_dtype)
        << ": ranks " << ranks_text(buffer.ranks) << " (index " << buffer.index << "), "
        << buffer.entries.size() << " pieces, " << buffer.buckets.size()
        << (buffer.buckets.size() == 1 ? " bucket" : " buckets")
        << (buffer.bucket_size < 0 ? " (no bucketing)"
                                   : " of >= " + group_digits(buffer.bucket_size))
        << ", buffer " << size_text(buffer.numel, buffer.numel * esize) << "; shard "
        << size_text(buffer.shard_numel, buffer.shard_numel * esize) << ", owns "
        << group_digits(buffer.owned_numel) << " el in " << buffer.owned.size() << " ranges\n";
  }
  out << "    not communicated: " << layout.not_communicated.size() << " params\n";
}

}  // namespace

void print_rank_buffers(const Plan& plan, std::int64_t rank, std::ostream& out) {
  if (plan.buffers.empty()) return;
  out << "\nbuffers:\n";
  for (const PlannedBuffer& buffer : plan_buffers(plan)) {
    if (buffer.muon) print_muon(plan, *buffer.muon, rank, out);
    if (buffer.fsdp2) print_fsdp2(plan, *buffer.fsdp2, rank, out);
    if (buffer.spec.kind == BufferKind::MegatronDistOpt ||
        buffer.spec.kind == BufferKind::DeepSpeedZero)
      print_flat(plan, buffer.spec, rank, out);
  }
}

}  // namespace shardc::driver
