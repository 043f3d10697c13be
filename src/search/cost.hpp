// The step-time model (internal to src/search; docs/search.md).
#pragma once

#include <cstdint>

#include "comm/comm.hpp"
#include "search/model_stats.hpp"
#include "search/search.hpp"

namespace shardc::search {

/// True when the group of a mesh axis of `size` whose ranks are `stride`
/// apart (the product of the faster axes' sizes) spans more than one node.
bool group_inter_node(std::int64_t size, std::int64_t stride, std::int64_t gpus_per_node);

/// The layer blocks pipeline stage `stage` of `layout` runs, by kind (dense,
/// MoE) and recompute mode, cut as the planner's `stages: auto` cuts them
/// (core/pipeline_chunks.hpp: the stage's model chunks c with c % pp == stage);
/// under block recompute the first `recompute_block` blocks of each chunk are
/// recomputed fully and the rest keep their activations. `embedding` on stage
/// 0, `logits` on the last.
StageLayers stage_layers(const ModelStats& st, const Layout& layout, std::int64_t stage);

/// The fraction of all layer blocks `layout` recomputes fully (1 for
/// recompute full, 0 for none and selective).
double recomputed_fraction(const ModelStats& st, const Layout& layout);

/// Model FLOPs per token, forward + backward, no recompute: the linear
/// layers' (6 N_active) plus causal attention's.
double flops_per_token(const ModelStats& st, std::int64_t seq_len);
double linear_flops_per_token(const ModelStats& st);
double attention_flops_per_token(const ModelStats& st, std::int64_t seq_len);

/// What src/comm/'s `stage_communication` needs for `layout`: its degrees,
/// its process groups (sizes, node crossing from the rank order) and the
/// per-rank bytes of its busiest stage, estimated from the model's sizes.
struct CommInputs {
  CommLayout layout;
  CommGroups groups;
  StageCommBytes bytes;
};
CommInputs comm_inputs(const ModelStats& st, const SearchRequest& req, const Layout& layout);

/// The estimated step of `layout` (request.training.shape has seq_len and
/// global_batch_size; the caller checked the batch divides). `describe`
/// fills the per-axis collective and overlap texts (the printed layouts).
StepCost step_cost(const ModelStats& st, const SearchRequest& req, const Layout& layout,
                   bool describe);

}  // namespace shardc::search
