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

const Fsdp2Unit* find_unit(const RankFile& f, std::size_t b, const Fsdp2Unit& like) {
  for (const Fsdp2Unit& u : f.buffers[b].units)
    if (u.name == like.name && u.mesh == like.mesh) return &u;
  return nullptr;
}

std::string where(const Fsdp2Unit& u, std::int64_t rank) {
  return "fsdp2 unit '" + fsdp2_unit_label(u.name) + "' (" + u.mesh + ") rank " +
         std::to_string(rank);
}

// Offsets, sizes and totals of one member's unit; "" when right.
// (The member's index is its position in ranks: load_members.)
std::string unit_error(Context& cx, const Fsdp2Unit& u) {
  const auto w = static_cast<std::int64_t>(u.ranks.size());
  std::int64_t off = 0;
  std::int64_t bytes = 0;
  // The reader takes each param's local and padded shape from the file's
  // params entry; offset, padded_numel, shard_dim and the totals are stated.
  for (const Fsdp2Param& p : u.params) {
    const PlanParam* pp = cx.param(p.name);
    if (!pp) return p.name + ": not in plan.json";
    const std::int64_t esize = element_size(pp->dtype);
    const std::int64_t n = numel(p.padded_shape) * (u.byte_units ? esize : 1);
    if (p.offset != off)
      return p.name + ": offset " + std::to_string(p.offset) + ", expected " + std::to_string(off) +
             " (previous params end there)";
    if (p.padded_numel != n)
      return p.name + ": padded_numel " + std::to_string(p.padded_numel) + " != numel(" +
             shape_text(p.padded_shape) + ")" + (u.byte_units ? " x element size" : "") + " = " +
             std::to_string(n);
    if (p.shard_dim < 0 || static_cast<std::size_t>(p.shard_dim) >= pp->global_shape.size())
      return p.name + ": shard_dim " + std::to_string(p.shard_dim) + " outside the " +
             std::to_string(pp->global_shape.size()) + " dims of global_shape " +
             shape_text(pp->global_shape);
    off += p.padded_numel;
    bytes += numel(p.padded_shape) * esize;
  }
  if (u.total != off || u.total_bytes != bytes ||
      u.output_shape != std::vector<std::int64_t>{w, u.total})
    return "total " + std::to_string(u.total) + " / total_bytes " + std::to_string(u.total_bytes) +
           " / output_shape " + shape_text(u.output_shape) + " != sums " + std::to_string(off) +
           " / " + std::to_string(bytes);
  return "";
}

// How member k's unit `mu` (nullptr: it has none like `u`) differs from `u`,
// the unit of rank `rank`, in what the members must share; "" when it does not.
std::string member_difference(const Fsdp2Unit* mu, const Fsdp2Unit& u, std::size_t k,
                              std::int64_t rank) {
  const std::string theirs = ", rank " + std::to_string(rank) + "'s ";
  if (!mu) return "no such unit in the member's file";
  if (mu->ranks != u.ranks) return "ranks " + shape_text(mu->ranks) + theirs + shape_text(u.ranks);
  if (mu->index != static_cast<std::int64_t>(k))
    return "index " + std::to_string(mu->index) + ", its position in ranks " + shape_text(u.ranks) +
           " is " + std::to_string(k);
  if (mu->byte_units != u.byte_units)
    return std::string("units ") + (mu->byte_units ? "bytes" : "elements") + theirs +
           (u.byte_units ? "bytes" : "elements");
  if (mu->params.size() != u.params.size())
    return std::to_string(mu->params.size()) + " params" + theirs + std::to_string(u.params.size());
  return "";
}

struct Members {
  std::vector<std::int64_t> ranks;
  std::vector<const RankFile*> files;
  std::vector<const Fsdp2Unit*> units;
};

// Loads the unit's members; false when one is absent or disagrees.
bool load_members(Context& cx, std::size_t b, const Fsdp2Unit& u, std::int64_t rank, Members& m) {
  if (u.index < 0 || u.index >= static_cast<std::int64_t>(u.ranks.size()) ||
      u.ranks[static_cast<std::size_t>(u.index)] != rank) {
    cx.report.mismatch(where(u, rank) + ": index " + std::to_string(u.index) + " is not rank " +
                       std::to_string(rank) + " in " + shape_text(u.ranks));
    return false;
  }
  m.ranks = u.ranks;
  for (std::size_t k = 0; k < u.ranks.size(); ++k) {
    const RankFile* f = cx.store.get(u.ranks[k]);
    if (!f) {
      if (cx.store.fatal.empty())
        cx.report.not_verifiable(where(u, rank) + ": needs member rank " +
                                 std::to_string(u.ranks[k]) + ", whose rank file is absent");
      return false;
    }
    const Fsdp2Unit* mu = b < f->buffers.size() ? find_unit(*f, b, u) : nullptr;
    if (const std::string e = member_difference(mu, u, k, rank); !e.empty()) {
      cx.report.mismatch(where(u, u.ranks[k]) + ": " + e);
      return false;
    }
    for (std::size_t i = 0; i < u.params.size(); ++i)
      if (mu->params[i].name != u.params[i].name || mu->params[i].offset != u.params[i].offset ||
          mu->params[i].padded_numel != u.params[i].padded_numel) {
        cx.report.mismatch(where(u, u.ranks[k]) + " param " + mu->params[i].name + ": offset " +
                           std::to_string(mu->params[i].offset) + " padded_numel " +
                           std::to_string(mu->params[i].padded_numel) + " (rank " +
                           std::to_string(rank) + ": " + u.params[i].name + " at " +
                           std::to_string(u.params[i].offset) + ")");
        return false;
      }
    if (const std::string e = unit_error(cx, *mu); !e.empty()) {
      cx.report.mismatch(where(u, u.ranks[k]) + ": " + e);
      return false;
    }
    m.files.push_back(f);
    m.units.push_back(mu);
  }
  return true;
}

std::string memo_key(bool elements, const Shape& global, const std::vector<Fsdp2Member>& fm,
                     const Shape& anchor) {
  std::string k = elements ? "fsdp2-e|" : "fsdp2-b|";
  append_key(k, global);
  for (const Fsdp2Member& m : fm) {
    append_piece_key(k, m.box, anchor);
    append_key(k, m.entry->padded_shape);
    append_key(k, m.entry->unsharded_shape);
    append_key(k, m.entry->shard_dim);
  }
  return k;
}

// The unsharded tensor every member rebuilds (members agree on the layout,
// so one receiver's view is every receiver's, up to its own shapes).
std::vector<std::optional<Box>> simulate(Context& cx, bool elements, const Shape& global,
                                         const std::vector<Fsdp2Member>& fm,
                                         std::vector<std::string>& why) {
  Shape anchor(global.size(), 0);
  for (const Fsdp2Member& m : fm)
    if (!is_empty(m.box)) {
      anchor = m.box.offset;
      break;
    }
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
      if (const auto s = same.find(sig); s != same.end()) {
        rel.push_back(rel[s->second]);
        why[r] = why[s->second];
        continue;
      }
      same[sig] = r;
      why[r].clear();
      auto b = elements ? fsdp2_unpack_elements(global, fm, r, why[r])
                        : fsdp2_unpack_boxes(global, fm, r, why[r]);
      if (b && !is_empty(*b))
        for (std::size_t d = 0; d < anchor.size(); ++d) b->offset[d] -= anchor[d];
      rel.push_back(b);
    }
    it = cx.memo.emplace(key, std::move(rel)).first;
  }
  auto out = it->second;
  for (auto& b : out)
    if (b && !is_empty(*b))
      for (std::size_t d = 0; d < anchor.size(); ++d) b->offset[d] += anchor[d];
  return out;
}

void verify_unit_param(Context& cx, const Members& m, std::size_t i) {
  const Fsdp2Param& p0 = m.units[0]->params[i];
  const PlanParam& planned = *cx.param(p0.name);  // looked up by unit_error
  // A packed param's piece is several global boxes: FSDP2 gathers its local
  // tensor like any other, but the one-box simulation below cannot express
  // it; its entries are checked against plan.json (verify_manifest) only.
  if (planned.packed) {
    ++cx.report.packed_skipped;
    return;
  }
  std::vector<Fsdp2Member> fm;
  for (std::size_t k = 0; k < m.files.size(); ++k) {
    const readback::RankParam* held = cx.held(*m.files[k], p0.name);
    fm.push_back({Box{held->global_offset, held->local_shape}, &m.units[k]->params[i]});
  }
  const bool elements = numel(planned.global_shape) <= cx.max_elements;
  std::vector<std::string> why;
  const auto res = simulate(cx, elements, planned.global_shape, fm, why);
  ++(elements ? cx.report.element_params : cx.report.box_params);
  for (std::size_t k = 0; k < fm.size(); ++k) {
    if (!res[k])
      return cx.report.mismatch(where(*m.units[k], m.ranks[k]) + " param " + p0.name + ": " +
                                why[k]);
    // The real rows rebuild the whole unsharded tensor, or (uneven: pad) a
    // prefix of it with pad rows after.
    bool fits = res[k]->shape.size() == fm[k].entry->unsharded_shape.size();
    for (std::size_t e = 0; fits && e < res[k]->shape.size(); ++e)
      fits = planned.uneven == "pad" ? res[k]->shape[e] <= fm[k].entry->unsharded_shape[e]
                                     : res[k]->shape[e] == fm[k].entry->unsharded_shape[e];
    if (!fits || (!is_empty(*res[k]) && *res[k] != *res[0]))
      return cx.report.mismatch(where(*m.units[k], m.ranks[k]) + " param " + p0.name +
                                ": rebuilds " + box_text(*res[k]) + ", member 0 rebuilds " +
                                box_text(*res[0]));
  }
}

}  // namespace

void verify_fsdp2(Context& cx, std::size_t b, const std::vector<std::int64_t>& sample) {
  std::set<std::tuple<std::string, std::string, std::int64_t>> done;
  for (const std::int64_t r : sample) {
    const RankFile& f = *cx.store.get(r);
    check_coverage(cx, f, b);
    for (const Fsdp2Unit& u : f.buffers[b].units) {
      if (done.contains({u.name, u.mesh, r})) continue;
      for (std::int64_t q : u.ranks) done.insert({u.name, u.mesh, q});
      Members m;
      if (!load_members(cx, b, u, r, m)) {
        if (!cx.store.fatal.empty()) return;
        continue;
      }
      ++cx.report.groups;
      for (std::size_t i = 0; i < u.params.size(); ++i) verify_unit_param(cx, m, i);
    }
  }
}

}  // namespace shardc::verify
