// A rule's `shard_order:` (docs/shard-order.md): `{tensor dim: [axis, ...]}`,
// the axes that split that dim in execution order, outermost split first
// (DTensor's ShardOrderEntry, torch 2.13 torch/distributed/tensor/_dtensor_spec.py).
// Read once the rules, the mesh and `fsdp` are: each order is checked
// against its rule's placements (every axis sharding the dim listed once,
// nothing else; FSDP's axes only last, in fsdp.shard order, on fsdp.dim),
// then the ordered axes' placements become DTensor's labels of the order,
// `_convert_shard_order_to_StridedShard`: the axis at position i gets
// `_StridedShard(d, sf=F)`, F = the product of the sizes of the axes before
// it in the order that come after it in the mesh (`Shard(d)` when F = 1).
// The planner reads the order back from those labels as DTensorSpec does
// (src/planner/shard_order.cpp); a plain `Shard` spelling stays as written.
#include <algorithm>
#include <string>

#include "frontend/recipe_internal.hpp"

namespace shardc::fe {
namespace {

constexpr std::string_view kHint =
    "e.g. `shard_order: {0: [tp, dp]}`: dim 0 is split over tp first (the outer split), then "
    "each tp piece over dp";

struct Entry {
  std::int64_t dim = 0;           ///< as written
  std::vector<std::string> axes;  ///< outermost split first
  std::vector<SourceLoc> locs;    ///< where each axis is written
  SourceLoc loc;                  ///< the dim key
};

std::optional<std::vector<Entry>> parse_entries(const Node& node, Reader& reader) {
  if (!node.is_map() || node.items().empty()) {
    reader.error(node,
                 "`shard_order` must be a non-empty mapping of tensor dims to axis lists, not " +
                     describe(node),
                 std::string(kHint));
    return std::nullopt;
  }
  if (!reader.check_duplicates(node, "`shard_order`")) return std::nullopt;
  std::vector<Entry> out;
  bool ok = true;
  for (const Node& item : node.items()) {
    Entry entry;
    entry.loc = reader.key_loc(item);
    const std::optional<std::int64_t> dim = parse_int(item.key());
    if (!dim || *dim < -64 || *dim > 63) {
      reader.error(entry.loc,
                   "`shard_order` key `" + std::string(item.key()) + "` is not a tensor dim",
                   "keys are tensor dims (integers, negative from the end): " + std::string(kHint));
      ok = false;
      continue;
    }
    entry.dim = *dim;
    if (item.is_seq() && item.items().empty()) {
      reader.error(item, "`shard_order` of dim " + std::to_string(entry.dim) + " lists no axis",
                   std::string(kHint));
      ok = false;
      continue;
    }
    std::optional<std::vector<std::string>> axes =
        reader.get_string_list(item, "a `shard_order` axis list");
    if (!axes) {
      ok = false;
      continue;
    }
    entry.locs = axis_locs(item, reader);
    entry.axes = std::move(*axes);
    out.push_back(std::move(entry));
  }
  if (!ok) return std::nullopt;
  return out;
}

std::string axis_names(const Mesh& mesh) {
  std::string names;
  for (const MeshAxis& axis : mesh.axes) names += (names.empty() ? "" : ", ") + axis.name;
  return names;
}

// "dp: Shard(0), cp: Shard(0)": the rule's placements that shard dim `dim` as written.
std::string sharding(const Rule& rule, std::int64_t dim) {
  std::string text;
  for (const AxisPlacement& ap : rule.placements)
    if (ap.placement.kind == Placement::Kind::Shard && ap.placement.dim == dim)
      text += (text.empty() ? "" : ", ") + ap.axis + ": " + ap.placement.text;
  return text.empty() ? std::string("none") : text;
}

// Checks one entry; the ordered axes' mesh indices, or nullopt after reporting.
std::optional<std::vector<int>> check_entry(const Entry& entry, const Rule& rule, const Recipe& out,
                                            Reader& reader) {
  const std::vector<std::string> no_fsdp;
  const std::vector<std::string>& fsdp = out.fsdp ? out.fsdp->shard : no_fsdp;
  const std::string dim_text = "dim " + std::to_string(entry.dim);
  std::vector<int> order;
  std::vector<std::string> fsdp_listed;
  bool ok = true;
  for (std::size_t i = 0; i < entry.axes.size(); ++i) {
    const std::string& name = entry.axes[i];
    const SourceLoc& loc = i < entry.locs.size() ? entry.locs[i] : entry.loc;
    for (std::size_t j = 0; j < i; ++j) {
      if (entry.axes[j] != name) continue;
      reader.error(DiagCode::EShardOrder, loc,
                   "`shard_order` of " + dim_text + " lists axis `" + name + "` twice",
                   "an axis splits a dim once: list each axis once, outermost split first");
      return std::nullopt;
    }
    const int axis_index = out.mesh.find(name);
    if (axis_index < 0) {
      reader.error(DiagCode::EAxis, loc,
                   "`shard_order` names axis '" + name + "' but the mesh has no such axis",
                   "axes of the mesh: " + axis_names(out.mesh));
      ok = false;
      continue;
    }
    if (std::find(fsdp.begin(), fsdp.end(), name) != fsdp.end()) {
      fsdp_listed.push_back(name);
      continue;
    }
    if (!fsdp_listed.empty()) {
      reader.error(DiagCode::EShardOrder, loc,
                   "`shard_order` of " + dim_text + " puts axis '" + name +
                       "' after FSDP's axis '" + fsdp_listed.front() +
                       "': that contradicts FSDP's own order",
                   "FSDP2 shards the local tensor the other axes leave: its axes split last; move "
                   "them to the end of the list or leave them out");
      ok = false;
      continue;
    }
    const auto ap =
        std::find_if(rule.placements.begin(), rule.placements.end(),
                     [&](const AxisPlacement& placement) { return placement.axis == name; });
    if (ap == rule.placements.end() || ap->placement.kind != Placement::Kind::Shard ||
        ap->placement.dim != entry.dim) {
      reader.error(DiagCode::EShardOrder, loc,
                   "`shard_order` of " + dim_text + " names axis '" + name +
                       "', which does not shard " + dim_text + " in this rule (" +
                       (ap == rule.placements.end() ? std::string("no placement: Replicate()")
                                                    : "placement " + ap->placement.text) +
                       ")",
                   "the axes that shard " + dim_text + ": " + sharding(rule, entry.dim) +
                       " (write the dim as the placements do)");
      ok = false;
      continue;
    }
    if (ap->placement.text.starts_with("_StridedShard")) {
      reader.error(
          DiagCode::EShardOrder, ap->loc,
          "axis '" + name + "' is placed `" + ap->placement.text +
              "` and ordered by "
              "`shard_order`: the order is stated twice",
          "write `Shard(" + std::to_string(entry.dim) +
              ")` with `shard_order` (the "
              "_StridedShard label is what shardc derives from it), or drop `shard_order`");
      ok = false;
      continue;
    }
    order.push_back(axis_index);
  }
  if (!fsdp_listed.empty() && ok) {
    if (fsdp_listed != fsdp) {
      std::string want;
      for (const std::string& axis : fsdp) want += (want.empty() ? "" : ", ") + axis;
      reader.error(DiagCode::EShardOrder, entry.loc,
                   "`shard_order` of " + dim_text +
                       " lists FSDP's axes out of FSDP's own order: FSDP splits over [" + want +
                       "] flattened, as one split, last",
                   "list all of fsdp.shard's axes in its order at the end, or leave them out");
      ok = false;
    } else if (out.fsdp && entry.dim != out.fsdp->dim) {
      reader.error(
          DiagCode::EShardOrder,
          entry.locs[static_cast<std::size_t>(
              std::find(entry.axes.begin(), entry.axes.end(), fsdp.front()) - entry.axes.begin())],
          "`shard_order` of " + dim_text + " ends with FSDP's axis '" + fsdp.front() +
              "', but FSDP shards dim " + std::to_string(out.fsdp->dim) +
              ": that contradicts FSDP's own order",
          "name FSDP's axes only in the order of dim " + std::to_string(out.fsdp->dim) +
              " (fsdp.dim), or leave them out");
      ok = false;
    }
  }
  for (const AxisPlacement& ap : rule.placements) {
    if (!ok) break;
    if (ap.placement.kind != Placement::Kind::Shard || ap.placement.dim != entry.dim) continue;
    if (std::find(entry.axes.begin(), entry.axes.end(), ap.axis) != entry.axes.end()) continue;
    reader.error(DiagCode::EShardOrder, entry.loc,
                 "`shard_order` of " + dim_text + " leaves out axis '" + ap.axis +
                     "', which also shards " + dim_text,
                 "list every axis that shards " + dim_text + " once (" + sharding(rule, entry.dim) +
                     "), outermost split first");
    ok = false;
  }
  if (!ok) return std::nullopt;
  return order;
}

}  // namespace

void apply_shard_orders(const Node& rules, Reader& reader, Recipe& out) {
  if (!rules.is_seq() || rules.items().size() != out.rules.size()) return;  // already reported
  for (std::size_t i = 0; i < out.rules.size(); ++i) {
    const Node* node = rules.items()[i].find("shard_order");
    if (node == nullptr) continue;
    std::optional<std::vector<Entry>> entries = parse_entries(*node, reader);
    if (!entries) continue;
    Rule& rule = out.rules[i];
    std::vector<std::int64_t> dims;
    for (const Entry& entry : *entries) {
      if (std::find(dims.begin(), dims.end(), entry.dim) != dims.end()) {
        reader.error(DiagCode::EShardOrder, entry.loc,
                     "`shard_order` lists dim " + std::to_string(entry.dim) + " twice",
                     "give each tensor dim one order");
        continue;
      }
      dims.push_back(entry.dim);
      const std::optional<std::vector<int>> order = check_entry(entry, rule, out, reader);
      if (!order) continue;
      // DTensor's labels of the order (_convert_shard_order_to_StridedShard)
      for (std::size_t k = 0; k < order->size(); ++k) {
        std::int64_t split_factor = 1;
        for (std::size_t j = 0; j < k; ++j)
          if ((*order)[j] > (*order)[k] &&
              __builtin_mul_overflow(split_factor,
                                     out.mesh.axes[static_cast<std::size_t>((*order)[j])].size,
                                     &split_factor))
            split_factor = 0;  // a hostile mesh: E-MESH reports it, the label stays as written
        if (split_factor <= 1) continue;
        const std::string& axis = out.mesh.axes[static_cast<std::size_t>((*order)[k])].name;
        for (AxisPlacement& ap : rule.placements)
          if (ap.axis == axis)
            ap.placement.text = "_StridedShard(" + std::to_string(entry.dim) +
                                ", sf=" + std::to_string(split_factor) + ")";
      }
    }
  }
}

}  // namespace shardc::fe
