// JSON pieces of the memory report shared by plan.json, the rank files and
// `shardc memory --format json` (internal to src/backend).
#pragma once

#include "backend/json_writer.hpp"
#include "memory/memory.hpp"

namespace shardc::backend {

/// `{"optimizer": "adamw", "master_weights": "float32"|null, "grad_dtype":
/// …|null, "state_dtype": …|null}` as written in the recipe (null = default),
/// plus `"zero"` (write_zero) when the plan shards optimizer state.
void write_training(json::Writer& writer, const Plan& plan);

/// The head of a report object (`shardc memory` / `shardc cost --format json`): `"format":
/// FORMAT`, then "model", "world_size", "num_stages" and "training" (write_training), each
/// group on its own line; the caller has begun the object.
void write_report_head(json::Writer& writer, const Plan& plan, const char* format);

/// `{"stage": 1, "spelling": …, "shard": {"mesh", "axes", "degree"},
/// "expert_shard": {…}|null}`: plan.zero (src/core/plan.hpp ZeroPlan).
void write_zero(json::Writer& writer, const Plan& plan);

/// A rank's optimizer shards: `{"stage", "dense": {"index", "of"},
/// "expert": {…}|null}` (which 1/degree of its group's master weights and
/// optimizer state the rank owns).
void write_rank_zero(json::Writer& writer, const Plan& plan, std::int64_t rank);

/// `{"params": …, "grads": …, …, "total": …}` in bytes; with `step` (a
/// training shape: activations counted) also "activations",
/// "fsdp2_reduce_scatter", "muon_grad_copy", "host" before "total".
void write_rank_memory(json::Writer& writer, const RankMemory& rm, bool step = false);

/// What no figure counts.
inline constexpr const char* kNotCounted =
    "activations, CUDA context, NCCL and allocator buffers, fragmentation";
/// What no figure counts when activations are counted (a training shape).
inline constexpr const char* kNotCountedStep =
    "CUDA context, NCCL and allocator buffers, fragmentation, backward's transient activation "
    "gradients";

/// True when the plan's totals include activations (training.seq_len and the
/// model's sizes).
bool activations_counted(const Plan& plan);

/// `[{"stage", "layers", "in_flight", "virtual_stages", "per_microbatch_bytes",
/// "bytes", "terms": [{"name", "bytes", "formula", "source"}], "once": […]}]`.
void write_stage_activations(json::Writer& writer, const std::vector<StageActivations>& stages);

}  // namespace shardc::backend
