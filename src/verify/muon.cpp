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

const MuonGroup* find_group(const RankFile& rank_file, std::size_t buffer_index,
                            const std::string& key) {
  for (const MuonGroup& group : rank_file.buffers[buffer_index].groups)
    if (group.key == key) return &group;
  return nullptr;
}

std::string where(const std::string& key, std::int64_t rank) {
  return "muon group '" + key + "' rank " + std::to_string(rank);
}

// Loads every rank the group's stages connect to `start`; nullopt when a
// file is missing (not verifiable) or lacks the group (mismatch).
std::optional<Closure> closure_of(Context& cx, std::size_t buffer_index, const std::string& key,
                                  std::int64_t start) {
  Closure closure;
  std::vector<std::int64_t> todo{start};
  while (!todo.empty()) {
    const std::int64_t rank = todo.back();
    todo.pop_back();
    if (closure.contains(rank)) continue;
    const RankFile* rank_file = cx.store.get(rank);
    if (!rank_file) {
      if (cx.store.fatal.empty())
        cx.report.not_verifiable(where(key, start) + ": needs rank " + std::to_string(rank) +
                                 " of its groups, whose rank file is absent");
      return std::nullopt;
    }
    const MuonGroup* group = buffer_index < rank_file->buffers.size()
                                 ? find_group(*rank_file, buffer_index, key)
                                 : nullptr;
    if (!group) {
      cx.report.mismatch(where(key, rank) + ": group missing from the rank file of a member");
      return std::nullopt;
    }
    closure[rank] = {rank_file, group};
    for (const auto& batch : group->batches)
      for (const MuonStage& st : batch.stages)
        todo.insert(todo.end(), st.ranks.begin(), st.ranks.end());
  }
  return closure;
}

// The fields of one stage param that the rank file states (tensor_dim, one
// split size per member) and the dims of the piece the rank holds, against
// plan.json and the stage; "" when they fit. The rest of the entry (rank_shapes, pad_shape,
// actual_numel, padded_numel, offset) the reader derives from these with the
// planner's arithmetic (muon_stage_sizes), so checking it against that
// arithmetic again could not fail: the simulation and the members' agreement
// (stage_members) are what test it.
std::string param_entry_error(const MuonStageParam& param, const MuonStage& st,
                              const PlanParam& planned, const readback::RankParam& held) {
  const std::size_t ndim = planned.global_shape.size();
  if (held.local_shape.size() != ndim)
    return "local_shape " + shape_text(held.local_shape) + " has " +
           std::to_string(held.local_shape.size()) + " dims, plan.json's global_shape " +
           shape_text(planned.global_shape) + " " + std::to_string(ndim);
  if (param.tensor_dim < 0 || static_cast<std::size_t>(param.tensor_dim) >= ndim)
    return "tensor_dim " + std::to_string(param.tensor_dim) + " outside the " +
           std::to_string(ndim) + " dims of global_shape " + shape_text(planned.global_shape);
  if (param.split_sizes.size() != st.ranks.size())
    return "split_sizes " + shape_text(param.split_sizes) + " has " +
           std::to_string(param.split_sizes.size()) + " sizes, the stage " +
           std::to_string(st.ranks.size()) + " members " + shape_text(st.ranks);
  return "";
}

// The stated fields of one stage in one rank file: this rank's index, each
// param's entry and dtype, the batch's total_numel (the one size of a stage
// the file states; the offsets and gathered_numel are derived from it and
// the entries' padded sizes).
void check_stage(Context& cx, const RankFile& file, const readback::MuonBatch& batch,
                 std::size_t stage, const std::string& key) {
  const std::int64_t rank = file.rank;
  const MuonStage& st = batch.stages[stage];
  const std::string at = where(key, rank) + " stage " + std::to_string(stage);
  const auto members = static_cast<std::int64_t>(st.ranks.size());
  if (st.index < 0 || st.index >= members || st.ranks[static_cast<std::size_t>(st.index)] != rank)
    return cx.report.mismatch(at + ": index " + std::to_string(st.index) + " is not rank " +
                              std::to_string(rank) + " in " + shape_text(st.ranks));
  std::int64_t sum = 0;
  for (const MuonStageParam& param : st.params) {
    const PlanParam* pp = cx.param(param.name);
    std::string error;
    if (!pp)
      error = "not in plan.json";
    else if (pp->dtype != batch.dtype)
      error = "dtype " + std::string(dtype_name(pp->dtype)) + " in plan.json, its batch's " +
              std::string(dtype_name(batch.dtype));
    else
      error = param_entry_error(param, st, *pp, *cx.held(file, param.name));
    if (!error.empty()) return cx.report.mismatch(at + " param " + param.name + ": " + error);
    sum += param.padded_numel;
  }
  if (st.total_numel != sum)
    cx.report.mismatch(at + ": total_numel " + std::to_string(st.total_numel) +
                       " but its params' padded_numel sum to " + std::to_string(sum));
}

void check_structure(Context& cx, const Closure& closure, const std::string& key) {
  for (const auto& member : closure)
    for (const auto& batch : member.second.group->batches)
      for (std::size_t s = 0; s < batch.stages.size(); ++s)
        check_stage(cx, *member.second.file, batch, s, key);
}

// Where a param sits in a group: batch and position in each stage's list.
struct Slot {
  std::size_t batch = 0;
  std::size_t pos = 0;
};

std::optional<Slot> slot_of(const MuonGroup& group, const std::string& name) {
  for (std::size_t b = 0; b < group.batches.size(); ++b) {
    if (group.batches[b].stages.empty()) continue;
    const auto& ps = group.batches[b].stages.front().params;
    for (std::size_t i = 0; i < ps.size(); ++i)
      if (ps[i].name == name) return Slot{b, i};
  }
  return std::nullopt;
}

const MuonStageParam* entry_at(const Member& member, const Slot& slot, std::size_t stage,
                               const std::string& name) {
  if (slot.batch >= member.group->batches.size()) return nullptr;
  const auto& stages = member.group->batches[slot.batch].stages;
  if (stage >= stages.size() || slot.pos >= stages[stage].params.size()) return nullptr;
  const MuonStageParam& entry = stages[stage].params[slot.pos];
  return entry.name == name ? &entry : nullptr;
}

// Memo key of one stage simulation: the geometry relative to `anchor`.
std::string memo_key(bool elements, const Shape& global, const std::vector<MuonMember>& mm,
                     const Shape& anchor) {
  return simulation_key(elements ? "muon-e|" : "muon-b|", global, mm, anchor,
                        [](std::string& key, const MuonStageParam& entry) {
                          append_key(key, entry.split_sizes);
                          append_key(key, entry.tensor_dim);
                          append_key(key, entry.padded_numel);
                        });
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
    for (auto& rebuilt : out)
      if (rebuilt && !is_empty(*rebuilt))
        for (std::size_t d = 0; d < anchor.size(); ++d) rebuilt->offset[d] += anchor[d];
    return out;
  }
  std::vector<std::optional<Box>> out;
  std::map<std::string, std::size_t> same;  // receivers with identical views
  for (std::size_t r = 0; r < mm.size(); ++r) {
    std::string sig;
    append_key(sig, mm[r].box.shape);
    append_key(sig, mm[r].entry->split_sizes);
    append_key(sig, mm[r].entry->tensor_dim);
    append_key(sig, mm[r].entry->padded_numel);
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
  for (auto& rebuilt : rel)
    if (rebuilt && !is_empty(*rebuilt))
      for (std::size_t d = 0; d < anchor.size(); ++d) rebuilt->offset[d] -= anchor[d];
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
  const Closure& closure;
  const State& state;
  const ParamRun& pr;
  std::size_t stage;
};

// The group of `rank` at `stage` for one param: members in order; false
// (mismatch reported) when the members' files disagree.
bool stage_members(const StageRun& run, std::int64_t rank, std::vector<std::int64_t>& ranks,
                   std::vector<MuonMember>& mm) {
  auto& [cx, closure, state, pr, stage] = run;
  const std::string at =
      where(pr.key, rank) + " stage " + std::to_string(stage) + " param " + pr.name;
  const std::string place = "batch " + std::to_string(pr.slot.batch) + " position " +
                            std::to_string(pr.slot.pos) + " of the stage";
  const MuonStageParam* mine = entry_at(closure.at(rank), pr.slot, stage, pr.name);
  if (!mine) return cx.report.mismatch(at + ": not at " + place + " in this rank's file"), false;
  ranks = closure.at(rank).group->batches[pr.slot.batch].stages[stage].ranks;
  for (std::size_t k = 0; k < ranks.size(); ++k) {
    const Member& member = closure.at(ranks[k]);  // the closure holds every rank a stage lists
    const std::string who = ": member " + std::to_string(ranks[k]);
    const MuonStageParam* entry = entry_at(member, pr.slot, stage, pr.name);
    if (!entry) return cx.report.mismatch(at + who + " does not list it at " + place), false;
    const MuonStage& st = member.group->batches[pr.slot.batch].stages[stage];
    if (st.ranks != ranks || st.index != static_cast<std::int64_t>(k))
      return cx.report.mismatch(at + who + " lists the group " + shape_text(st.ranks) +
                                " at index " + std::to_string(st.index) + ", this rank " +
                                shape_text(ranks) + " at index " + std::to_string(k)),
             false;
    if (entry->split_sizes != mine->split_sizes)
      return cx.report.mismatch(at + who + " has split_sizes " + shape_text(entry->split_sizes) +
                                ", this rank " + shape_text(mine->split_sizes)),
             false;
    // With the same split sizes the derived sizes differ only by the
    // members' alignment_bytes or by an earlier param of the batch.
    if (entry->offset != mine->offset || entry->padded_numel != mine->padded_numel)
      return cx.report.mismatch(at + who + " packs it at offset " + std::to_string(entry->offset) +
                                " in padded_numel " + std::to_string(entry->padded_numel) +
                                ", this rank at " + std::to_string(mine->offset) + " in " +
                                std::to_string(mine->padded_numel)),
             false;
    // Member k's own rank_shapes equal this rank's once this holds for every
    // k: both are the stage input (= the member's piece so far) with
    // tensor_dim set to the same split sizes.
    const Box& box = state.at(ranks[k]);
    if (mine->rank_shapes[k] != box.shape)
      return cx.report.mismatch(at + ": split_sizes[" + std::to_string(k) + "] gives member " +
                                std::to_string(ranks[k]) + " the shape " +
                                shape_text(mine->rank_shapes[k]) + " but it holds " +
                                shape_text(box.shape)),
             false;
    mm.push_back({box, entry});
  }
  return true;
}

// Runs one stage over the closure; false on a mismatch.
bool run_stage(Context& cx, const Closure& closure, State& state, const ParamRun& pr,
               std::size_t stage) {
  State next;
  for (const auto& [rank, member] : closure) {
    if (next.contains(rank)) continue;
    std::vector<std::int64_t> ranks;
    std::vector<MuonMember> mm;
    if (!stage_members({cx, closure, state, pr, stage}, rank, ranks, mm)) return false;
    std::vector<std::string> why;
    const auto res = simulate(cx, pr.elements, pr.global, mm, why);
    for (std::size_t k = 0; k < ranks.size(); ++k) {
      if (!res[k]) {
        cx.report.mismatch(where(pr.key, ranks[k]) + " stage " + std::to_string(stage) + " param " +
                           pr.name + " (group " + shape_text(ranks) + "): " + why[k]);
        return false;
      }
      next[ranks[k]] = *res[k];
    }
  }
  state = std::move(next);
  return true;
}

void verify_param(Context& cx, const Closure& closure, const std::string& key,
                  const std::string& name) {
  const Member& first = closure.begin()->second;
  const bool gathers = std::any_of(first.group->batches.begin(), first.group->batches.end(),
                                   [](const auto& batch) { return !batch.stages.empty(); });
  const auto slot = gathers ? slot_of(*first.group, name) : std::optional<Slot>(Slot{});
  if (!slot)
    return cx.report.mismatch(where(key, closure.begin()->first) + " param " + name +
                              ": in the group's params but in none of its batches");
  // check_stage has looked every batch param up; a group without stages has none.
  const PlanParam* pp = cx.param(name);
  if (!pp)
    return cx.report.mismatch(where(key, closure.begin()->first) + " param " + name +
                              ": not in plan.json");
  const ParamRun pr{key, name, pp->global_shape, numel(pp->global_shape) <= cx.max_elements, *slot};
  State state;
  // Every member lists the group's params (verify_closure), and the reader
  // lists only params its file holds.
  for (const auto& [rank, member] : closure) {
    const readback::RankParam& held = *cx.held(*member.file, name);
    state[rank] = Box{held.global_offset, held.local_shape};
  }
  const std::size_t stages = gathers ? first.group->batches[slot->batch].stages.size() : 0;
  for (std::size_t s = 0; s < stages; ++s)
    if (!run_stage(cx, closure, state, pr, s)) return;
  ++(pr.elements ? cx.report.element_params : cx.report.box_params);
  const Box global{Shape(pr.global.size(), 0), pr.global};
  for (const auto& [rank, box] : state)
    if (box.shape != global.shape || (!is_empty(box) && box != global))
      return cx.report.mismatch(where(key, rank) + " param " + name +
                                ": after the last stage holds " + box_text(box) +
                                ", not the global tensor " + shape_text(pr.global));
}

void verify_closure(Context& cx, const Closure& closure, const std::string& key) {
  ++cx.report.groups;
  const std::int64_t before = cx.report.num_mismatches;
  check_structure(cx, closure, key);
  const MuonGroup& group = *closure.begin()->second.group;
  for (const auto& [rank, member] : closure)
    if (member.group->params != group.params)
      cx.report.mismatch(where(key, rank) + ": params differ from member " +
                         std::to_string(closure.begin()->first) + "'s");
  if (cx.report.num_mismatches != before) return;
  for (const std::string& name : group.params) verify_param(cx, closure, key, name);
}

}  // namespace

void verify_muon(Context& cx, std::size_t buffer_index, const std::vector<std::int64_t>& sample) {
  std::set<std::pair<std::string, std::int64_t>> done;
  for (const std::int64_t sampled : sample) {
    const RankFile& rank_file = *cx.store.get(sampled);
    check_coverage(cx, rank_file, buffer_index);
    for (const MuonGroup& group : rank_file.buffers[buffer_index].groups) {
      check_owners_and_slices(cx, rank_file, group);
      if (done.contains({group.key, sampled})) continue;
      const auto closure = closure_of(cx, buffer_index, group.key, sampled);
      if (!cx.store.fatal.empty()) return;
      if (!closure) continue;
      for (const auto& [rank, member] : *closure) done.insert({group.key, rank});
      verify_closure(cx, *closure, group.key);
    }
  }
}

}  // namespace shardc::verify
