// The step-time model (internal to src/search; docs/search.md).
#pragma once

#include <cstdint>

#include "search/model_stats.hpp"
#include "search/search.hpp"

namespace shardc::search {

/// True when the group of a mesh axis of `size` whose ranks are `stride`
/// apart (the product of the faster axes' sizes) spans more than one node.
bool group_inter_node(std::int64_t size, std::int64_t stride, std::int64_t gpus_per_node);

/// Model FLOPs per token, forward + backward, no recompute.
double flops_per_token(const ModelStats& st, std::int64_t seq_len);

/// The estimated step of `layout` (request.training.shape has seq_len and
/// global_batch_size; the caller checked the batch divides).
StepCost step_cost(const ModelStats& st, const SearchRequest& req, const Layout& layout);

}  // namespace shardc::search
