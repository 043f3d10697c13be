// `shardc verify` for muon_allgather buffers: per group, the closure of
// ranks its stages connect is simulated stage by stage, one param at a
// time; plus offsets, padding, owners and the slice-back recipe.
#include <algorithm>
#include <set>

#include "verify/engine.hpp"

namespace shardc::verify {
namespace {

using readback::MuonGroup;
using readback::MuonStage;
using readback::MuonStageParam;

struct Member {
  const RankFile* file = nullptr;
  const MuonGroup* group = nullptr;
};

// Closure of a group: every rank its stages connect, with its file.
using Closure = std::map<std::int64_t, Member>;

const MuonGroup* find_group(const RankFile& f, std::size_t b, const std::string& key) {
  for (const MuonGroup& g : f.buffers[b].groups)
    if (g.key == key) return &g;
  return nullptr;
}

std::string where(const std::string& key, std::int64_t rank) {
  return "muon group '" + key + "' rank " + std::to_string(rank);
}

// Loads every rank the group's stages connect to `start`; nullopt when a
// file is missing (not verifiable) or lacks the group (mismatch).
std::optional<Closure> closure_of(Context& cx, std::size_t b, const std::string& key,
                                  std::int64_t start) {
  Closure c;
  std::vector<std::int64_t> todo{start};
  while (!todo.empty()) {
    const std::int64_t r = todo.back();
    todo.pop_back();
    if (c.contains(r)) continue;
    const RankFile* f = cx.store.get(r);
    if (!f) {
      if (cx.store.fatal.empty())
        cx.report.not_verifiable(where(key, start) + ": needs rank " + std::to_string(r) +
                                 " of its groups, whose rank file is absent");
      return std::nullopt;
    }
    const MuonGroup* g = b < f->buffers.size() ? find_group(*f, b, key) : nullptr;
    if (!g) {
      cx.report.mismatch(where(key, r) + ": group missing from the rank file of a member");
      return std::nullopt;
    }
    c[r] = {f, g};
    for (const auto& batch : g->batches)
      for (const MuonStage& st : batch.stages)
        todo.insert(todo.end(), st.ranks.begin(), st.ranks.end());
  }
  return c;
}

Shape elementwise_max(const std::vector<Shape>& shapes) {
  Shape out = shapes.empty() ? Shape{} : shapes.front();
  for (const Shape& s : shapes)
    for (std::size_t d = 0; d < s.size() && d < out.size(); ++d) out[d] = std::max(out[d], s[d]);
  return out;
}

// The layout arithmetic of one stage param; "" when consistent.
std::string param_layout_error(const MuonStageParam& p, const MuonStage& st, std::int64_t align,
                               std::size_t ndim) {
  const std::size_t n = st.ranks.size();
  if (p.tensor_dim < 0 || static_cast<std::size_t>(p.tensor_dim) >= ndim)
    return "tensor_dim out of range";
  if (p.split_sizes.size() != n || p.rank_shapes.size() != n)
    return "split_sizes/rank_shapes size != group size";
  for (std::size_t k = 0; k < n; ++k)
    if (p.rank_shapes[k].size() != ndim ||
        p.split_sizes[k] != p.rank_shapes[k][static_cast<std::size_t>(p.tensor_dim)])
      return "split_sizes[" + std::to_string(k) + "] != rank_shapes[" + std::to_string(k) +
             "][tensor_dim]";
  if (p.pad_shape != elementwise_max(p.rank_shapes))
    return "pad_shape is not the element-wise max of rank_shapes";
  if (p.padded_numel != round_up(numel(p.pad_shape), align))
    return "padded_numel " + std::to_string(p.padded_numel) + " != numel(pad_shape) rounded to " +
           std::to_string(align);
  if (p.actual_numel != numel(p.rank_shapes[static_cast<std::size_t>(st.index)]))
    return "actual_numel != numel(own rank_shape)";
  if (p.padded_numel < p.actual_numel) return "padded_numel < actual_numel";
  return "";
}

// Offsets, padding and totals of one stage in one rank file.
void check_stage(Context& cx, std::int64_t rank, const std::string& key, DType dtype,
                 std::int64_t alignment, const MuonStage& st, std::size_t s) {
  const std::string at = where(key, rank) + " stage " + std::to_string(s);
  const auto n = static_cast<std::int64_t>(st.ranks.size());
  if (st.index < 0 || st.index >= n || st.ranks[static_cast<std::size_t>(st.index)] != rank)
    return cx.report.mismatch(at + ": index " + std::to_string(st.index) + " is not this rank in " +
                              shape_text(st.ranks));
  const std::int64_t align = std::max<std::int64_t>(1, alignment / element_size(dtype));
  std::int64_t end = 0;
  std::int64_t sum = 0;
  for (const MuonStageParam& p : st.params) {
    const PlanParam* pp = cx.param(p.name);
    std::string e = !pp                  ? "not in plan.json"
                    : pp->dtype != dtype ? "dtype differs from its batch"
                                         : "";
    if (e.empty()) e = param_layout_error(p, st, align, pp->global_shape.size());
    if (e.empty() && (p.offset < end || p.offset % align != 0))
      e = "offset " + std::to_string(p.offset) + " overlaps the previous param (ends at " +
          std::to_string(end) + ") or is not aligned to " + std::to_string(align);
    if (!e.empty()) return cx.report.mismatch(at + " param " + p.name + ": " + e);
    end = p.offset + p.padded_numel;
    sum += p.padded_numel;
  }
  if (st.total_numel != sum || end > st.total_numel || st.gathered_numel != sum * n)
    cx.report.mismatch(at + ": total_numel " + std::to_string(st.total_numel) +
                       " / gathered_numel " + std::to_string(st.gathered_numel) +
                       " != sum of padded_numel " + std::to_string(sum) + " (x " +
                       std::to_string(n) + ")");
}

void check_structure(Context& cx, const Closure& c, const std::string& key,
                     std::int64_t alignment) {
  for (const auto& [rank, m] : c)
    for (const auto& batch : m.group->batches)
      for (std::size_t s = 0; s < batch.stages.size(); ++s)
        check_stage(cx, rank, key, batch.dtype, alignment, batch.stages[s], s);
}

// Where a param sits in a group: batch and position in each stage's list.
struct Slot {
  std::size_t batch = 0;
  std::size_t pos = 0;
};

std::optional<Slot> slot_of(const MuonGroup& g, const std::string& name) {
  for (std::size_t b = 0; b < g.batches.size(); ++b) {
    if (g.batches[b].stages.empty()) continue;
    const auto& ps = g.batches[b].stages.front().params;
    for (std::size_t i = 0; i < ps.size(); ++i)
      if (ps[i].name == name) return Slot{b, i};
  }
  return std::nullopt;
}

const MuonStageParam* entry_at(const Member& m, const Slot& slot, std::size_t s,
                               const std::string& name) {
  if (slot.batch >= m.group->batches.size()) return nullptr;
  const auto& stages = m.group->batches[slot.batch].stages;
  if (s >= stages.size() || slot.pos >= stages[s].params.size()) return nullptr;
  const MuonStageParam& e = stages[s].params[slot.pos];
  return e.name == name ? &e : nullptr;
}

// Memo keys are raw bytes: each vector as its length, then its values.
void append(std::string& k, std::int64_t x) {
  k.append(reinterpret_cast<const char*>(&x), sizeof x);
}

void append(std::string& k, const std::vector<std::int64_t>& v) {
  append(k, static_cast<std::int64_t>(v.size()));
  if (!v.empty())
    k.append(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(std::int64_t));
}

// Memo key of one stage simulation: the geometry relative to `anchor`.
std::string memo_key(bool elements, const Shape& global, const std::vector<MuonMember>& mm,
                     const Shape& anchor) {
  std::string k = elements ? "muon-e|" : "muon-b|";
  append(k, global);
  for (const MuonMember& m : mm) {
    Shape rel = m.box.offset;
    for (std::size_t d = 0; d < rel.size(); ++d) rel[d] -= anchor[d];
    if (is_empty(m.box)) rel.assign(1, -1);
    append(k, rel);
    append(k, m.box.shape);
    append(k, m.entry->split_sizes);
    append(k, m.entry->tensor_dim);
    append(k, m.entry->padded_numel);
  }
  return k;
}

Shape anchor_of(const std::vector<MuonMember>& mm, std::size_t ndim) {
  for (const MuonMember& m : mm)
    if (!is_empty(m.box)) return m.box.offset;
  return Shape(ndim, 0);
}

// Results of every receiver (relative to the anchor), memoized.
std::vector<std::optional<Box>> simulate(Context& cx, bool elements, const Shape& global,
                                         const std::vector<MuonMember>& mm,
                                         std::vector<std::string>& why) {
  const Shape anchor = anchor_of(mm, global.size());
  const std::string key = memo_key(elements, global, mm, anchor);
  why.assign(mm.size(), "");
  if (const auto it = cx.memo.find(key); it != cx.memo.end()) {
    ++cx.report.memo_hits;
    for (std::size_t r = 0; r < mm.size(); ++r)
      if (!it->second[r]) why[r] = "(same layout as a failed simulation)";
    auto out = it->second;
    for (auto& b : out)
      if (b && !is_empty(*b))
        for (std::size_t d = 0; d < anchor.size(); ++d) b->offset[d] += anchor[d];
    return out;
  }
  std::vector<std::optional<Box>> out;
  std::map<std::string, std::size_t> same;  // receivers with identical views
  for (std::size_t r = 0; r < mm.size(); ++r) {
    std::string sig;
    append(sig, mm[r].box.shape);
    append(sig, mm[r].entry->split_sizes);
    append(sig, mm[r].entry->tensor_dim);
    append(sig, mm[r].entry->padded_numel);
    if (const auto it = same.find(sig); it != same.end()) {
      out.push_back(out[it->second]);
      why[r] = why[it->second];
      continue;
    }
    same[sig] = r;
    out.push_back(elements ? muon_unpack_elements(global, mm, r, why[r])
                           : muon_unpack_boxes(global, mm, r, why[r]));
  }
  auto rel = out;
  for (auto& b : rel)
    if (b && !is_empty(*b))
      for (std::size_t d = 0; d < anchor.size(); ++d) b->offset[d] -= anchor[d];
  cx.memo.emplace(key, std::move(rel));
  return out;
}

using State = std::map<std::int64_t, Box>;

struct ParamRun {
  const std::string& key;
  const std::string& name;
  const Shape& global;
  bool elements = true;
  Slot slot;
};

// One stage of one param over a closure: what stage_members reads.
struct StageRun {
  Context& cx;
  const Closure& c;
  const State& state;
  const ParamRun& pr;
  std::size_t s;  ///< the stage
};

// The group of `rank` at stage s for one param: members in order; false
// (mismatch reported) when the members' files disagree.
bool stage_members(const StageRun& run, std::int64_t rank, std::vector<std::int64_t>& ranks,
                   std::vector<MuonMember>& mm) {
  auto& [cx, c, state, pr, s] = run;
  const MuonStageParam* mine = entry_at(c.at(rank), pr.slot, s, pr.name);
  const std::string at = where(pr.key, rank) + " stage " + std::to_string(s) + " param " + pr.name;
  if (!mine) return cx.report.mismatch(at + ": missing from the stage"), false;
  ranks = c.at(rank).group->batches[pr.slot.batch].stages[s].ranks;
  for (std::size_t k = 0; k < ranks.size(); ++k) {
    const auto it = c.find(ranks[k]);
    const MuonStageParam* e = it == c.end() ? nullptr : entry_at(it->second, pr.slot, s, pr.name);
    const auto& st = it == c.end() ? nullptr : &it->second.group->batches[pr.slot.batch].stages[s];
    if (!e || st->ranks != ranks || st->index != static_cast<std::int64_t>(k))
      return cx.report.mismatch(at + ": member " + std::to_string(ranks[k]) +
                                " does not list the same group " + shape_text(ranks)),
             false;
    const Box& box = state.at(ranks[k]);
    if (e->split_sizes != mine->split_sizes || e->rank_shapes != mine->rank_shapes ||
        e->offset != mine->offset || e->padded_numel != mine->padded_numel)
      return cx.report.mismatch(at + ": member " + std::to_string(ranks[k]) +
                                " has other split_sizes, or offset " + std::to_string(e->offset) +
                                " padded_numel " + std::to_string(e->padded_numel) +
                                " (this rank: " + std::to_string(mine->offset) + ", " +
                                std::to_string(mine->padded_numel) + ")"),
             false;
    if (mine->rank_shapes[k] != box.shape)
      return cx.report.mismatch(at + ": split_sizes[" + std::to_string(k) + "] gives member " +
                                std::to_string(ranks[k]) + " the shape " +
                                shape_text(mine->rank_shapes[k]) + " but it holds " +
                                shape_text(box.shape)),
             false;
    mm.push_back({box, e});
  }
  return true;
}

// Runs one stage over the closure; false on a mismatch.
bool run_stage(Context& cx, const Closure& c, State& state, const ParamRun& pr, std::size_t s) {
  State next;
  for (const auto& [rank, m] : c) {
    if (next.contains(rank)) continue;
    std::vector<std::int64_t> ranks;
    std::vector<MuonMember> mm;
    if (!stage_members({cx, c, state, pr, s}, rank, ranks, mm)) return false;
    std::vector<std::string> why;
    const auto res = simulate(cx, pr.elements, pr.global, mm, why);
    for (std::size_t k = 0; k < ranks.size(); ++k) {
      if (!res[k]) {
        cx.report.mismatch(where(pr.key, ranks[k]) + " stage " + std::to_string(s) + " param " +
                           pr.name + " (group " + shape_text(ranks) + "): " + why[k]);
        return false;
      }
      next[ranks[k]] = *res[k];
    }
  }
  state = std::move(next);
  return true;
}

void verify_param(Context& cx, const Closure& c, const std::string& key, const std::string& name) {
  const PlanParam* pp = cx.param(name);
  const Member& first = c.begin()->second;
  const bool gathers = std::any_of(first.group->batches.begin(), first.group->batches.end(),
                                   [](const auto& b) { return !b.stages.empty(); });
  const auto slot = gathers ? slot_of(*first.group, name) : std::optional<Slot>(Slot{});
  if (!pp || !slot)
    return cx.report.mismatch(where(key, c.begin()->first) + " param " + name +
                              ": in no batch or not in plan.json");
  const ParamRun pr{key, name, pp->global_shape, numel(pp->global_shape) <= cx.max_elements, *slot};
  State state;
  for (const auto& [rank, m] : c) {
    const readback::RankParam* held = cx.held(*m.file, name);
    if (!held)
      return cx.report.mismatch(where(key, rank) + " param " + name + ": not held by this member");
    state[rank] = Box{held->global_offset, held->local_shape};
  }
  const std::size_t stages = gathers ? first.group->batches[slot->batch].stages.size() : 0;
  for (std::size_t s = 0; s < stages; ++s)
    if (!run_stage(cx, c, state, pr, s)) return;
  ++(pr.elements ? cx.report.element_params : cx.report.box_params);
  const Box global{Shape(pr.global.size(), 0), pr.global};
  for (const auto& [rank, box] : state)
    if (box.shape != global.shape || (!is_empty(box) && box != global))
      return cx.report.mismatch(where(key, rank) + " param " + name +
                                ": after the last stage holds " + box_text(box) +
                                ", not the global tensor " + shape_text(pr.global));
}

void verify_closure(Context& cx, const Closure& c, const std::string& key, std::int64_t alignment) {
  ++cx.report.groups;
  const std::int64_t before = cx.report.num_mismatches;
  check_structure(cx, c, key, alignment);
  const MuonGroup& g = *c.begin()->second.group;
  for (const auto& [rank, m] : c)
    if (m.group->params != g.params)
      cx.report.mismatch(where(key, rank) + ": params differ from member " +
                         std::to_string(c.begin()->first) + "'s");
  if (cx.report.num_mismatches != before) return;
  for (const std::string& name : g.params) verify_param(cx, c, key, name);
}

}  // namespace

void verify_muon(Context& cx, std::size_t b, const std::vector<std::int64_t>& sample) {
  std::set<std::pair<std::string, std::int64_t>> done;
  for (const std::int64_t r : sample) {
    const RankFile& f = *cx.store.get(r);
    check_coverage(cx, f, b);
    for (const MuonGroup& g : f.buffers[b].groups) {
      check_owners_and_slices(cx, f, g);
      if (done.contains({g.key, r})) continue;
      const auto c = closure_of(cx, b, g.key, r);
      if (!cx.store.fatal.empty()) return;
      if (!c) continue;
      for (const auto& [rank, m] : *c) done.insert({g.key, rank});
      verify_closure(cx, *c, g.key, f.buffers[b].alignment_bytes);
    }
  }
}

}  // namespace shardc::verify
