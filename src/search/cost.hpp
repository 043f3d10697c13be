// The step-time model (internal to src/search; docs/search.md).
#pragma once

#include <cstdint>
#include <vector>

#include "comm/comm.hpp"
#include "core/pipeline_chunks.hpp"
#include "search/model_stats.hpp"
#include "search/search.hpp"

namespace shardc::search {

/// True when the group of a mesh axis of `size` whose ranks are `stride`
/// apart (the product of the faster axes' sizes) spans more than one node.
bool group_inter_node(std::int64_t size, std::int64_t stride, std::int64_t gpus_per_node);

/// The embedding and the output count as this many layer blocks of the first and
/// the last model chunk in the layouts search emits with a pipeline (the recipe's
/// `first_stage_less_layers` / `last_stage_less_layers`: torchtitan's default, and the
/// Llama 3 paper's "one Transformer layer less on the first and last stage").
inline constexpr std::int64_t kStageLessLayers = 1;

/// The model chunks of `layout` (pp x virtual stages), cut as its emitted recipe's
/// `stages: auto` with kStageLessLayers cuts them (core/pipeline_chunks.hpp); one
/// chunk without a pipeline.
std::vector<ChunkBlocks> layout_chunks(const ModelStats& st, const Layout& layout);

/// The slowest pipeline stage's forward + backward FLOPs per token over the mean
/// stage's (>= 1; 1 without a pipeline): a pipeline runs at its slowest stage's pace
/// (every micro-batch passes every stage). A stage's FLOPs: its blocks' active params
/// (6 N) and attention, the last stage's output head.
double stage_imbalance(const ModelStats& st, const Layout& layout, std::int64_t seq_len);

/// The layer blocks pipeline stage `stage` of `layout` runs, by kind (dense,
/// MoE) and recompute mode, cut as the planner's `stages: auto` cuts them
/// (layout_chunks: the stage's model chunks c with c % pp == stage);
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
/// `exact_comm`: the communication terms of the layout's planned recipe (its peak
/// rank's, `plan_communication`: what `cost` prints), used instead of the estimate
/// from comm_inputs (phase 2: the bytes of the stages as the planner cuts them).
StepCost step_cost(const ModelStats& st, const SearchRequest& req, const Layout& layout,
                   bool describe, const StageComm* exact_comm = nullptr);

}  // namespace shardc::search
