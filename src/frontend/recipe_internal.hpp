// Shared pieces of the recipe reader (recipe_parse.cpp, recipe_rules.cpp,
// recipe_sections.cpp).
#pragma once

#include <optional>
#include <string_view>
#include <vector>

#include "core/recipe.hpp"
#include "frontend/doc.hpp"
#include "frontend/frontend.hpp"
#include "frontend/reader.hpp"

namespace shardc::fe {

/// `uneven:` chunk | balanced | even | pad | {pad: M}; `pad` sets *pad to M
/// (1 for the bare word). Reports E-RECIPE.
std::optional<SplitRule> parse_split_rule(const Node& n, Reader& r, std::int64_t* pad);
/// An integer in [lo, hi] (E-RECIPE otherwise).
std::optional<std::int64_t> parse_bounded(const Node& n, Reader& r, std::string_view what,
                                          std::int64_t lo, std::int64_t hi);
std::optional<Pattern> parse_pattern(const Node& n, Reader& r);
/// One axis name or a list of them, each at most once (E-RECIPE otherwise).
std::optional<std::vector<std::string>> parse_axes(const Node& n, Reader& r, std::string_view what);
/// Where each axis of a one-or-list axis field is written.
std::vector<SourceLoc> axis_locs(const Node& n, Reader& r);
/// `{axis: placement, ...}`; null means none. Reports E-PLACEMENT / E-RECIPE.
std::optional<std::vector<AxisPlacement>> parse_placements(const Node& n, Reader& r);

/// Every rule's `shard_order:` (recipe_shard_order.cpp, docs/shard-order.md), once the
/// rules, the mesh and `fsdp` are read: checks each order against its rule's placements
/// and rewrites the ordered axes' placements to DTensor's labels of the order
/// (`_StridedShard(d, sf=F)`), which the planner reads back as the order. `rules` is
/// the `rules` node `out.rules` was parsed from. Reports E-RECIPE, E-AXIS, E-PLACEMENT,
/// E-FSDP at the offending key or axis.
void apply_shard_orders(const Node& rules, Reader& r, Recipe& out);
std::vector<Rule> parse_rules(const Node& n, Reader& r);
std::vector<ExpertsEntry> parse_experts(const Node& n, Reader& r);

TiedSpec parse_tied_spec(const Node& n, Reader& r);
std::optional<PipelineSpec> parse_pipeline(const Node& n, Reader& r);
std::optional<FsdpSpec> parse_fsdp(const Node& n, Reader& r);
std::vector<BufferSpec> parse_buffers(const Node& n, Reader& r);
/// `training:` (optimizer, master weights, dtypes, memory budget).
TrainingSpec parse_training(const Node& n, Reader& r);
/// The training-shape keys of `training:` (recipe_training_shape.cpp).
void parse_training_shape(const Node& n, Reader& r, TrainingShape& t);

}  // namespace shardc::fe
