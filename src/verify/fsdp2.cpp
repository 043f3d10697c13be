// `shardc verify` for fsdp2_allgather buffers: per unit, every member's
// padded shard packed at its offset, gathered rank-major [W, total] and
// unpacked per param (columns, concatenated along the FSDP dim, padding
// dropped) must rebuild the TP/EP-local tensor.
#include <set>

#include "planner/buffers.hpp"
#include "verify/engine.hpp"

namespace shardc::verify {
namespace {

using readback::Fsdp2Param;
using readback::Fsdp2Unit;

const Fsdp2Unit* find_unit(const RankFile& rank_file, std::size_t buffer_index,
                           const Fsdp2Unit& like) {
  for (const Fsdp2Unit& unit : rank_file.buffers[buffer_index].units)
    if (unit.name == like.name && unit.mesh == like.mesh) return &unit;
  return nullptr;
}

std::string where(const Fsdp2Unit& unit, std::int64_t rank) {
  return "fsdp2 unit '" + fsdp2_unit_label(unit.name) + "' (" + unit.mesh + ") rank " +
         std::to_string(rank);
}

// Offsets, sizes and totals of one member's unit; "" when right.
// (The member's index is its position in ranks: load_members.)
std::string unit_error(Context& cx, const Fsdp2Unit& unit) {
  const auto ways = static_cast<std::int64_t>(unit.ranks.size());
  std::int64_t off = 0;
  std::int64_t bytes = 0;
  // The reader takes each param's local and padded shape from the file's
  // params entry; offset, padded_numel, shard_dim and the totals are stated.
  for (const Fsdp2Param& param : unit.params) {
    const PlanParam* pp = cx.param(param.name);
    if (!pp) return param.name + ": not in plan.json";
    const std::int64_t esize = element_size(pp->dtype);
    const std::int64_t padded = numel(param.padded_shape) * (unit.byte_units ? esize : 1);
    if (param.offset != off)
      return param.name + ": offset " + std::to_string(param.offset) + ", expected " +
             std::to_string(off) + " (previous params end there)";
    if (param.padded_numel != padded)
      return param.name + ": padded_numel " + std::to_string(param.padded_numel) + " != numel(" +
             shape_text(param.padded_shape) + ")" + (unit.byte_units ? " x element size" : "") +
             " = " + std::to_string(padded);
    if (param.shard_dim < 0 || static_cast<std::size_t>(param.shard_dim) >= pp->global_shape.size())
      return param.name + ": shard_dim " + std::to_string(param.shard_dim) + " outside the " +
             std::to_string(pp->global_shape.size()) + " dims of global_shape " +
             shape_text(pp->global_shape);
    off += param.padded_numel;
    bytes += numel(param.padded_shape) * esize;
  }
  if (unit.total != off || unit.total_bytes != bytes ||
      unit.output_shape != std::vector<std::int64_t>{ways, unit.total})
    return "total " + std::to_string(unit.total) + " / total_bytes " +
           std::to_string(unit.total_bytes) + " / output_shape " + shape_text(unit.output_shape) +
           " != sums " + std::to_string(off) + " / " + std::to_string(bytes);
  return "";
}

// How member k's unit `mu` (nullptr: it has none like `unit`) differs from `unit`,
// the unit of rank `rank`, in what the members must share; "" when it does not.
std::string member_difference(const Fsdp2Unit* mu, const Fsdp2Unit& unit, std::size_t k,
                              std::int64_t rank) {
  const std::string theirs = ", rank " + std::to_string(rank) + "'s ";
  if (!mu) return "no such unit in the member's file";
  if (mu->ranks != unit.ranks)
    return "ranks " + shape_text(mu->ranks) + theirs + shape_text(unit.ranks);
  if (mu->index != static_cast<std::int64_t>(k))
    return "index " + std::to_string(mu->index) + ", its position in ranks " +
           shape_text(unit.ranks) + " is " + std::to_string(k);
  if (mu->byte_units != unit.byte_units)
    return std::string("units ") + (mu->byte_units ? "bytes" : "elements") + theirs +
           (unit.byte_units ? "bytes" : "elements");
  if (mu->params.size() != unit.params.size())
    return std::to_string(mu->params.size()) + " params" + theirs +
           std::to_string(unit.params.size());
  return "";
}

struct Members {
  std::vector<std::int64_t> ranks;
  std::vector<const RankFile*> files;
  std::vector<const Fsdp2Unit*> units;
};

// Loads the unit's members; false when one is absent or disagrees.
bool load_members(Context& cx, std::size_t buffer_index, const Fsdp2Unit& unit, std::int64_t rank,
                  Members& members) {
  if (unit.index < 0 || unit.index >= static_cast<std::int64_t>(unit.ranks.size()) ||
      unit.ranks[static_cast<std::size_t>(unit.index)] != rank) {
    cx.report.mismatch(where(unit, rank) + ": index " + std::to_string(unit.index) +
                       " is not rank " + std::to_string(rank) + " in " + shape_text(unit.ranks));
    return false;
  }
  members.ranks = unit.ranks;
  for (std::size_t k = 0; k < unit.ranks.size(); ++k) {
    const RankFile* rank_file = cx.store.get(unit.ranks[k]);
    if (!rank_file) {
      if (cx.store.fatal.empty())
        cx.report.not_verifiable(where(unit, rank) + ": needs member rank " +
                                 std::to_string(unit.ranks[k]) + ", whose rank file is absent");
      return false;
    }
    const Fsdp2Unit* mu = buffer_index < rank_file->buffers.size()
                              ? find_unit(*rank_file, buffer_index, unit)
                              : nullptr;
    if (const std::string difference = member_difference(mu, unit, k, rank); !difference.empty()) {
      cx.report.mismatch(where(unit, unit.ranks[k]) + ": " + difference);
      return false;
    }
    for (std::size_t i = 0; i < unit.params.size(); ++i)
      if (mu->params[i].name != unit.params[i].name ||
          mu->params[i].offset != unit.params[i].offset ||
          mu->params[i].padded_numel != unit.params[i].padded_numel) {
        cx.report.mismatch(where(unit, unit.ranks[k]) + " param " + mu->params[i].name +
                           ": offset " + std::to_string(mu->params[i].offset) + " padded_numel " +
                           std::to_string(mu->params[i].padded_numel) + " (rank " +
                           std::to_string(rank) + ": " + unit.params[i].name + " at " +
                           std::to_string(unit.params[i].offset) + ")");
        return false;
      }
    if (const std::string error = unit_error(cx, *mu); !error.empty()) {
      cx.report.mismatch(where(unit, unit.ranks[k]) + ": " + error);
      return false;
    }
    members.files.push_back(rank_file);
    members.units.push_back(mu);
  }
  return true;
}

// Memo key of one unit simulation: the geometry relative to `anchor`.
std::string memo_key(bool elements, const Shape& global, const std::vector<Fsdp2Member>& fm,
                     const Shape& anchor) {
  return simulation_key(elements ? "fsdp2-e|" : "fsdp2-b|", global, fm, anchor,
                        [](std::string& key, const Fsdp2Param& entry) {
                          append_key(key, entry.padded_shape);
                          append_key(key, entry.unsharded_shape);
                          append_key(key, entry.shard_dim);
                        });
}

// The unsharded tensor every member rebuilds (members agree on the layout,
// so one receiver's view is every receiver's, up to its own shapes).
std::vector<std::optional<Box>> simulate(Context& cx, bool elements, const Shape& global,
                                         const std::vector<Fsdp2Member>& fm,
                                         std::vector<std::string>& why) {
  const Shape anchor = anchor_of(fm, global.size());
  const std::string key = memo_key(elements, global, fm, anchor);
  why.assign(fm.size(), "(same layout as a failed simulation)");
  auto it = cx.memo.find(key);
  if (it != cx.memo.end()) {
    ++cx.report.memo_hits;
  } else {
    std::vector<std::optional<Box>> rel;
    std::map<std::string, std::size_t> same;
    for (std::size_t r = 0; r < fm.size(); ++r) {
      std::string sig;
      append_key(sig, fm[r].entry->unsharded_shape);
      if (const auto seen = same.find(sig); seen != same.end()) {
        rel.push_back(rel[seen->second]);
        why[r] = why[seen->second];
        continue;
      }
      same[sig] = r;
      why[r].clear();
      auto rebuilt = elements ? fsdp2_unpack_elements(global, fm, r, why[r])
                              : fsdp2_unpack_boxes(global, fm, r, why[r]);
      if (rebuilt && !is_empty(*rebuilt))
        for (std::size_t d = 0; d < anchor.size(); ++d) rebuilt->offset[d] -= anchor[d];
      rel.push_back(rebuilt);
    }
    it = cx.memo.emplace(key, std::move(rel)).first;
  }
  auto out = it->second;
  for (auto& rebuilt : out)
    if (rebuilt && !is_empty(*rebuilt))
      for (std::size_t d = 0; d < anchor.size(); ++d) rebuilt->offset[d] += anchor[d];
  return out;
}

void verify_unit_param(Context& cx, const Members& members, std::size_t i) {
  const Fsdp2Param& p0 = members.units[0]->params[i];
  const PlanParam& planned = *cx.param(p0.name);  // looked up by unit_error
  // A packed param's piece is several global boxes: FSDP2 gathers its local
  // tensor like any other, but the one-box simulation below cannot express
  // it; its entries are checked against plan.json (verify_manifest) only.
  if (planned.packed) {
    ++cx.report.packed_skipped;
    return;
  }
  std::vector<Fsdp2Member> fm;
  for (std::size_t k = 0; k < members.files.size(); ++k) {
    const readback::RankParam* held = cx.held(*members.files[k], p0.name);
    fm.push_back({Box{held->global_offset, held->local_shape}, &members.units[k]->params[i]});
  }
  const bool elements = numel(planned.global_shape) <= cx.max_elements;
  std::vector<std::string> why;
  const auto res = simulate(cx, elements, planned.global_shape, fm, why);
  ++(elements ? cx.report.element_params : cx.report.box_params);
  for (std::size_t k = 0; k < fm.size(); ++k) {
    if (!res[k])
      return cx.report.mismatch(where(*members.units[k], members.ranks[k]) + " param " + p0.name +
                                ": " + why[k]);
    // The real rows rebuild the whole unsharded tensor, or (uneven: pad) a
    // prefix of it with pad rows after.
    bool fits = res[k]->shape.size() == fm[k].entry->unsharded_shape.size();
    for (std::size_t e = 0; fits && e < res[k]->shape.size(); ++e)
      fits = planned.uneven == "pad" ? res[k]->shape[e] <= fm[k].entry->unsharded_shape[e]
                                     : res[k]->shape[e] == fm[k].entry->unsharded_shape[e];
    if (!fits || (!is_empty(*res[k]) && *res[k] != *res[0]))
      return cx.report.mismatch(where(*members.units[k], members.ranks[k]) + " param " + p0.name +
                                ": rebuilds " + box_text(*res[k]) + ", member 0 rebuilds " +
                                box_text(*res[0]));
  }
}

}  // namespace

void verify_fsdp2(Context& cx, std::size_t buffer_index, const std::vector<std::int64_t>& sample) {
  std::set<std::tuple<std::string, std::string, std::int64_t>> done;
  for (const std::int64_t rank : sample) {
    const RankFile& rank_file = *cx.store.get(rank);
    check_coverage(cx, rank_file, buffer_index);
    for (const Fsdp2Unit& unit : rank_file.buffers[buffer_index].units) {
      if (done.contains({unit.name, unit.mesh, rank})) continue;
      for (std::int64_t member_rank : unit.ranks) done.insert({unit.name, unit.mesh, member_rank});
      Members members;
      if (!load_members(cx, buffer_index, unit, rank, members)) {
        if (!cx.store.fatal.empty()) return;
        continue;
      }
      ++cx.report.groups;
      for (std::size_t i = 0; i < unit.params.size(); ++i) verify_unit_param(cx, members, i);
    }
  }
}

}  // namespace shardc::verify
