// The buffers section of `shardc inspect --rank R` (internal to src/driver).
#pragma once

#include <cstdint>
#include <iosfwd>

#include "core/plan.hpp"

namespace shardc::driver {

/// Per buffer layout of the recipe: its muon groups (stages, group ranks,
/// per-rank and gathered sizes) or FSDP2 units, as `rank` sees them.
void print_rank_buffers(const Plan& plan, std::int64_t rank, std::ostream& out);

}  // namespace shardc::driver
