// Expert-parallel stacking (contract §5.4): per-expert params become one
// `[E, *source_shape]` param per group of captures other than `{E}`.
#include <algorithm>
#include <charconv>
#include <map>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "planner/passes.hpp"
#include "support/assert.hpp"
#include "support/large_buffer.hpp"

namespace shardc::passes {
namespace {

struct Source {
  std::int64_t expert = 0;
  std::size_t param = 0;  // index in model.params
};

struct Group {
  std::size_t entry = 0;
  std::string name;
  std::vector<Source> sources;
};

// The `{E}` capture's value as a non-negative integer, or -1.
std::int64_t expert_index(const Captures& caps) {
  for (const auto& [name, value] : caps) {
    if (name != "E") continue;
    std::int64_t expert = -1;
    auto [p, ec] = std::from_chars(value.data(), value.data() + value.size(), expert);
    if (ec != std::errc() || p != value.data() + value.size() || expert < 0) return -1;
    return expert;
  }
  return -1;
}

Captures without_expert(const Captures& caps) {
  Captures out;
  for (const auto& capture : caps)
    if (capture.first != "E") out.push_back(capture);
  return out;
}

// Checks one group and reports E-EXPERTS problems; true when it can be stacked.
bool check_group(Group& group, const Model& model, const Recipe& recipe, DiagnosticSink& sink) {
  const ExpertsEntry& entry = recipe.experts[group.entry];
  std::sort(group.sources.begin(), group.sources.end(),
            [](const Source& left, const Source& right) { return left.expert < right.expert; });
  const auto count = static_cast<std::int64_t>(group.sources.size());
  for (std::int64_t i = 0; i < count; ++i) {
    const Source& source = group.sources[static_cast<std::size_t>(i)];
    if (source.expert == i) continue;
    const bool dup =
        i > 0 && group.sources[static_cast<std::size_t>(i - 1)].expert == source.expert;
    sink.error(
        DiagCode::EExperts, model.params[source.param].loc,
        "stacked " + group.name + ": expert index " + std::to_string(source.expert) +
            (dup ? " appears twice" : " leaves a gap (expected " + std::to_string(i) + ")"),
        "expert indices of one stacked param must be exactly 0.." + std::to_string(count - 1));
    return false;
  }
  const Param& first = model.params[group.sources.front().param];
  for (const Source& source : group.sources) {
    const Param& param = model.params[source.param];
    if (param.shape != first.shape || param.dtype != first.dtype) {
      sink.error(DiagCode::EExperts, param.loc,
                 "stacked " + group.name + ": " + param.name + " is " + shape_text(param.shape) +
                     " " + std::string(dtype_name(param.dtype)) + " but " + first.name + " is " +
                     shape_text(first.shape) + " " + std::string(dtype_name(first.dtype)),
                 "all experts of one stacked param need the same shape and dtype");
      return false;
    }
  }
  const auto& attr = model.attributes_of(first.name).num_experts;
  if (attr && *attr > 0 && *attr != count) {
    sink.error(DiagCode::EExperts, entry.loc,
               "stacked " + group.name + " has " + std::to_string(count) +
                   " experts but the model's num_experts is " + std::to_string(*attr),
               "check the experts pattern, or the model's num_experts attribute");
    return false;
  }
  return true;
}

// Appends `p` as an unstacked param; moves its name, shape and location
// when `take` (the caller gave up the model's params).
void add_plain(std::vector<PlannedParam>& out, const Param& param, Param* take) {
  PlannedParam& planned = out.emplace_back();
  planned.dtype = param.dtype;
  planned.requires_grad = param.requires_grad;
  planned.fused = param.fused;
  planned.head_indexed = param.head_indexed;
  if (take != nullptr) {
    planned.name = std::move(take->name);
    planned.global_shape = std::move(take->shape);
    planned.loc = std::move(take->loc);
  } else {
    planned.name = param.name;
    planned.global_shape = param.shape;
    planned.loc = param.loc;
  }
}

void add_stacked(std::vector<PlannedParam>& out, const Group& group, const Model& model,
                 const Recipe& recipe, std::vector<Param>* owned) {
  const Param& first = model.params[group.sources.front().param];
  PlannedParam& planned = out.emplace_back();
  planned.dtype = first.dtype;
  planned.requires_grad = first.requires_grad;
  planned.global_shape = first.shape;
  planned.loc = first.loc;
  planned.name = group.name;
  planned.global_shape.insert(planned.global_shape.begin(),
                              static_cast<std::int64_t>(group.sources.size()));
  if (first.fused) {  // the expert's fused dim, one further in the stacked tensor
    planned.fused = first.fused;
    ++planned.fused->dim;
  }
  // Without an expert_mesh, stacked params live on the dense mesh (the recipe
  // schema's documented behaviour): their placements name dense axes.
  planned.mesh = recipe.expert_mesh ? MeshKind::Expert : MeshKind::Dense;
  planned.rule = {RuleRef::Kind::Experts, static_cast<int>(group.entry),
                  recipe.experts[group.entry].match.text()};
  const ExpertsEntry& entry = recipe.experts[group.entry];
  planned.uneven = entry.uneven.value_or(recipe.uneven);
  planned.pad_multiple = entry.uneven ? entry.pad_multiple : recipe.pad_multiple;
  planned.unit = entry.unit;
  planned.stacked_from.reserve(group.sources.size());
  for (const Source& source : group.sources) {
    if (owned != nullptr) {
      planned.stacked_from.push_back(std::move((*owned)[source.param].name));
    } else {
      planned.stacked_from.push_back(model.params[source.param].name);
    }
  }
}

// Expert e's FQN of a pre-stacked param, as before + e + after: the entry's
// `expert_name` over the match's captures, else the name with the segment
// {E} after its last `experts` segment (appended when it has none).
std::pair<std::string, std::string> expert_name_parts(const ExpertsEntry& entry,
                                                      const std::string& name, Captures caps) {
  if (!entry.expert_name.empty()) {
    constexpr char kMark = '\x01';  // no FQN holds a control character (support/fqn.hpp)
    caps.emplace_back("E", std::string(1, kMark));
    const std::optional<std::string> text = Pattern::substitute(entry.expert_name, caps);
    SHARDC_ASSERT(text.has_value(), "expert_name was checked against match's captures");
    const std::size_t at = text->find(kMark);
    return {text->substr(0, at), text->substr(at + 1)};
  }
  std::size_t at = std::string::npos;
  for (std::size_t pos = 0; pos <= name.size();) {
    const std::size_t dot = std::min(name.find('.', pos), name.size());
    if (name.compare(pos, dot - pos, "experts") == 0) at = dot;
    pos = dot + 1;
  }
  if (at == std::string::npos || at == name.size()) return {name + ".", ""};
  return {name.substr(0, at + 1), name.substr(at)};
}

// A pre-stacked expert param (`stacked_dim`): the expert count is its dim 0,
// which must equal the model's num_experts and the other params of the
// entry; false after E-EXPERTS.
bool check_prestacked(const Param& param, std::int64_t* entry_count,
                      const std::string** entry_first, const Model& model, DiagnosticSink& sink) {
  const std::string hint =
      "a pre-stacked expert param holds the experts on dim 0 ([E, ...]); narrow the `match` "
      "(the router's weight is not an expert param) or fix the model's num_experts";
  if (param.shape.empty()) {
    sink.error(DiagCode::EExperts, param.loc,
               "pre-stacked experts: " + param.name + " is 0-d, it has no expert dim", hint);
    return false;
  }
  const std::int64_t count = param.shape[0];
  const auto& attr = model.attributes.num_experts;
  if (attr && *attr > 0 && *attr != count) {
    sink.error(DiagCode::EExperts, param.loc,
               "pre-stacked experts: " + param.name + " is " + shape_text(param.shape) +
                   ", dim 0 holds " + std::to_string(count) +
                   " experts but the model's num_experts is " + std::to_string(*attr),
               hint);
    return false;
  }
  if (*entry_count >= 0 && *entry_count != count) {
    sink.error(DiagCode::EExperts, param.loc,
               "pre-stacked experts: " + param.name + " has " + std::to_string(count) +
                   " experts on dim 0 but " + **entry_first + " of the same entry has " +
                   std::to_string(*entry_count),
               hint);
    return false;
  }
  if (count < 1) {
    sink.error(DiagCode::EExperts, param.loc,
               "pre-stacked experts: " + param.name + " has no experts", hint);
    return false;
  }
  *entry_count = count;
  *entry_first = &param.name;
  return true;
}

void add_prestacked(std::vector<PlannedParam>& out, const Param& param, Param* take,
                    std::size_t entry_index, const Recipe& recipe,
                    std::pair<std::string, std::string> names) {
  add_plain(out, param, take);
  PlannedParam& planned = out.back();
  const ExpertsEntry& entry = recipe.experts[entry_index];
  planned.mesh = recipe.expert_mesh ? MeshKind::Expert : MeshKind::Dense;
  planned.rule = {RuleRef::Kind::Experts, static_cast<int>(entry_index), entry.match.text()};
  planned.uneven = entry.uneven.value_or(recipe.uneven);
  planned.pad_multiple = entry.uneven ? entry.pad_multiple : recipe.pad_multiple;
  planned.unit = entry.unit;
  planned.prestacked = PlannedParam::PreStacked{0, planned.global_shape[0], std::move(names.first),
                                                std::move(names.second)};
}

// The output is filled once, front to back: huge pages save most of its
// page faults (a 45,000-param model's PlannedParams are 16 MB).
void reserve_params(std::vector<PlannedParam>& out, std::size_t count) {
  reserve_large(out, count);
}

Param* taken(std::vector<Param>* owned, std::size_t i) {
  return owned != nullptr ? &(*owned)[i] : nullptr;
}

}  // namespace

std::vector<PlannedParam> stack_experts(const Model& model, const Recipe& recipe,
                                        DiagnosticSink& sink, std::vector<Param>* owned) {
  SHARDC_ASSERT(owned == nullptr || owned == &model.params, "stack_experts: foreign params");
  std::vector<PlannedParam> out;
  if (recipe.experts.empty()) {
    reserve_params(out, model.params.size());
    for (std::size_t i = 0; i < model.params.size(); ++i) {
      add_plain(out, model.params[i], taken(owned, i));
    }
    return out;
  }
  // Slot per output param: either a model param or a group (stacked at its first source).
  struct Slot {
    bool stacked = false;
    std::size_t index = 0;
    int prestacked_entry = -1;  ///< a pre-stacked param's entry (index = the param)
    std::pair<std::string, std::string> expert_name;  ///< pre-stacked: before / after e
  };
  std::vector<Slot> slots;
  std::vector<Group> groups;
  std::unordered_map<std::string, std::size_t> group_by_name;
  // Pre-stacked entries: the expert count of the first param, and its name.
  std::vector<std::int64_t> entry_count(recipe.experts.size(), -1);
  std::vector<const std::string*> entry_first(recipe.experts.size(), nullptr);
  bool prestacked_ok = true;
  Captures caps;
  for (std::size_t i = 0; i < model.params.size(); ++i) {
    const Param& param = model.params[i];
    bool taken = false;
    for (std::size_t e = 0; e < recipe.experts.size() && !taken; ++e) {
      const ExpertsEntry& entry = recipe.experts[e];
      if (!entry.match.match(param.name, &caps)) continue;
      if (entry.stacked_dim) {
        taken = true;
        if (!check_prestacked(param, &entry_count[e], &entry_first[e], model, sink)) {
          prestacked_ok = false;
          continue;
        }
        slots.push_back(
            {false, i, static_cast<int>(e), expert_name_parts(entry, param.name, caps)});
        continue;
      }
      const std::int64_t ex = expert_index(caps);
      if (ex < 0) continue;
      auto name = Pattern::substitute(entry.stack, without_expert(caps));
      if (!name) {
        sink.error(DiagCode::EExperts, entry.loc,
                   "stack name '" + entry.stack +
                       "' uses a capture that "
                       "`match` does not bind",
                   "use only captures of the match pattern other than {E}");
        return {};
      }
      auto [it, fresh] = group_by_name.try_emplace(*name, groups.size());
      if (fresh) {
        groups.push_back({e, *name, {}});
        slots.push_back({true, it->second, -1, {}});
      }
      groups[it->second].sources.push_back({ex, i});
      taken = true;
    }
    if (!taken) slots.push_back({false, i, -1, {}});
  }
  if (!prestacked_ok) return {};
  std::unordered_set<std::string> plain_names;
  for (const Slot& slot : slots)
    if (!slot.stacked) plain_names.insert(model.params[slot.index].name);  // pre-stacked too
  std::vector<bool> ok(groups.size(), true);
  for (std::size_t g = 0; g < groups.size(); ++g) {
    ok[g] = check_group(groups[g], model, recipe, sink);
    if (ok[g] && plain_names.count(groups[g].name)) {
      sink.error(DiagCode::EExperts, recipe.experts[groups[g].entry].loc,
                 "stacked name " + groups[g].name + " collides with a model parameter",
                 "choose a `stack` template that names a new FQN");
      ok[g] = false;
    }
  }
  reserve_params(out, slots.size());
  for (Slot& slot : slots) {
    if (slot.prestacked_entry >= 0) {
      add_prestacked(out, model.params[slot.index], taken(owned, slot.index),
                     static_cast<std::size_t>(slot.prestacked_entry), recipe,
                     std::move(slot.expert_name));
    } else if (!slot.stacked) {
      add_plain(out, model.params[slot.index], taken(owned, slot.index));
    } else if (ok[slot.index]) {
      add_stacked(out, groups[slot.index], model, recipe, owned);
    }
  }
  return out;
}

}  // namespace shardc::passes
