// JSON pieces of the memory report shared by plan.json, the rank files and
// `shardc memory --format json` (internal to src/backend).
#pragma once

#include "backend/json_writer.hpp"
#include "shardc/memory.hpp"

namespace shardc::backend {

/// `{"optimizer": "adamw", "master_weights": "float32"|null, "grad_dtype":
/// …|null, "state_dtype": …|null}` as written in the recipe (null = default).
void write_training(json::Writer& w, const TrainingSpec& t);

/// `{"params": …, "grads": …, …, "total": …}` in bytes.
void write_rank_memory(json::Writer& w, const RankMemory& rm);

/// What no figure counts.
inline constexpr const char* kNotCounted =
    "activations, CUDA context, NCCL and allocator buffers, fragmentation";

}  // namespace shardc::backend
