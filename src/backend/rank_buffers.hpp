// Buffer-packing layouts of one rank file (internal to src/backend).
#pragma once

#include <cstdint>
#include <vector>

#include "backend/json_writer.hpp"
#include "shardc/buffers.hpp"

namespace shardc::backend {

/// Writes the rank file's `buffers` array: one object per planned buffer,
/// in recipe order (SPEC §6.3; fields documented in rank.schema.json).
void write_rank_buffers(json::Writer& w, const Plan& plan,
                        const std::vector<PlannedBuffer>& buffers, std::int64_t rank);

}  // namespace shardc::backend
