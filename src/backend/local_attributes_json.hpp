// The rank file's `local_attributes` section (internal to src/backend).
#pragma once

#include "backend/json_writer.hpp"
#include "core/plan.hpp"
#include "planner/local_attributes.hpp"

namespace shardc::backend {

/// `{"attention": {module: {q_heads, q_head_range, kv_heads, kv_head_range,
/// kv_head_range_used} | null}, "experts": {module: {num_experts,
/// local_experts, expert_range} | null}, "vocab": {param: {vocab_size,
/// token_range, padding_rows}}}` for the modules `values` holds (ranges
/// [start, end)). `values` is local_attributes_at of the rank.
void write_local_attributes(json::Writer& writer, const Plan& plan, const LocalAttributes& values);

}  // namespace shardc::backend
