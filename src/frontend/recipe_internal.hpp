// Shared pieces of the recipe reader (recipe_parse.cpp, recipe_rules.cpp,
// recipe_sections.cpp).
#pragma once

#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "core/recipe.hpp"
#include "frontend/doc.hpp"
#include "frontend/frontend.hpp"
#include "frontend/reader.hpp"

namespace shardc::fe {

/// A list section (`rules`, `experts`, `buffers`): each item read by `parse_item`
/// (`std::optional<Item>(const Node&, Reader&)`, reporting what is wrong), the items it
/// returns kept in order; null is an empty list.
template <typename Item, typename ParseItem>
std::vector<Item> parse_list(const Node& node, Reader& reader, std::string_view what,
                             ParseItem parse_item) {
  std::vector<Item> out;
  if (node.is_null() || !reader.expect_seq(node, what)) return out;
  out.reserve(node.items().size());
  for (const Node& item : node.items()) {
    if (std::optional<Item> parsed = parse_item(item, reader)) out.push_back(std::move(*parsed));
  }
  return out;
}

/// `uneven:` chunk | balanced | even | pad | {pad: M}; `pad` sets *pad to M
/// (1 for the bare word). Reports E-RECIPE.
std::optional<SplitRule> parse_split_rule(const Node& node, Reader& reader, std::int64_t* pad);
/// An integer in [lo, hi] (E-RECIPE otherwise).
std::optional<std::int64_t> parse_bounded(const Node& node, Reader& reader, std::string_view what,
                                          std::int64_t lo, std::int64_t hi);
std::optional<Pattern> parse_pattern(const Node& node, Reader& reader);
/// One axis name or a list of them, each at most once (E-RECIPE otherwise).
std::optional<std::vector<std::string>> parse_axes(const Node& node, Reader& reader,
                                                   std::string_view what);
/// Where each axis of a one-or-list axis field is written.
std::vector<SourceLoc> axis_locs(const Node& node, Reader& reader);
/// `{axis: placement, ...}`; null means none. Reports E-PLACEMENT / E-RECIPE.
std::optional<std::vector<AxisPlacement>> parse_placements(const Node& node, Reader& reader);

/// Every rule's `shard_order:` (recipe_shard_order.cpp, docs/shard-order.md), once the
/// rules, the mesh and `fsdp` are read: checks each order against its rule's placements
/// and rewrites the ordered axes' placements to DTensor's labels of the order
/// (`_StridedShard(d, sf=F)`), which the planner reads back as the order. `rules` is
/// the `rules` node `out.rules` was parsed from. Reports E-RECIPE, E-AXIS, E-PLACEMENT,
/// E-FSDP at the offending key or axis.
void apply_shard_orders(const Node& rules, Reader& reader, Recipe& out);
std::vector<Rule> parse_rules(const Node& node, Reader& reader);
std::vector<ExpertsEntry> parse_experts(const Node& node, Reader& reader);

TiedSpec parse_tied_spec(const Node& node, Reader& reader);
std::optional<PipelineSpec> parse_pipeline(const Node& node, Reader& reader);
std::optional<FsdpSpec> parse_fsdp(const Node& node, Reader& reader);
std::vector<BufferSpec> parse_buffers(const Node& node, Reader& reader);
/// `training:` (optimizer, master weights, dtypes, memory budget).
TrainingSpec parse_training(const Node& node, Reader& reader);
/// The training-shape keys of `training:` (recipe_training_shape.cpp).
void parse_training_shape(const Node& node, Reader& reader, TrainingShape& shape);

}  // namespace shardc::fe
