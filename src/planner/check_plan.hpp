// The plan's internal invariants, checked (docs/testing.md: runs after
// planning in every test build, and in release with `--check-invariants`).
//
// A violation is a shardc bug, never an input problem: callers turn a
// non-empty result into an InternalError (exit 3). The rules checked, per
// param and per shard class (never per rank x param):
//  * placements: one per axis of the param's mesh; stage in [0, stages);
//  * geometry: one split chain per dim, split axes inside the mesh, `ways`
//    the product of their sizes, the FSDP split last in its chain and Chunk,
//    at most one FSDP split and it is `fsdp_dim`'s with `fsdp_ways` ways;
//    each dim's splits are exactly its Shard placements' axes, rule splits
//    in mesh order with the param's split rule, unit and pad multiple (>= 1
//    under pad);
//  * packed params (contract §5.10): parts >= 0 summing to the packed dim's
//    extent; every non-empty piece has boxes, in local order without overlap
//    inside its allocation, each inside one part, other dims the piece's own,
//    their rows summing to the local extent and starting at its offset;
//  * shards: offsets inside the global shape (an empty dim at the DCP
//    sentinel = the global extent), padded >= local and equal to it unless
//    the dim is FSDP's or pads (`uneven: {pad: M}`, contract §5.9); a dim
//    whose last split pads allocates one extent on every rank, a multiple
//    of M x unit; the distinct pieces of each dim (a packed dim's boxes)
//    partition [0, L), every rank of the param's stage in exactly one class,
//    and sum(numel x replicas) = numel(global) x (ranks on the stage /
//    product of all splits' ways);
//  * the first and last rank of every class run sit on the param's stage;
//  * aliases: the source exists, is no alias itself, and has the same
//    dtype, global shape and pieces (the same ranks too on the same stage);
//  * stacked experts: dim 0 is the number of sources;
//  * FP8 block scales (`scale_of`, contract §5.11): the weight's mesh, stage,
//    rule and placements, and per dim its rule splits' axes, ways and rule
//    (the unit and pad multiple in block units, so not the param's own).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "core/plan.hpp"
#include "planner/buffers.hpp"

namespace shardc {

/// Every violated invariant of `plan`, as "param: what (values)" lines, at
/// most `max_reported` (0 = no cap). Empty when the plan is consistent.
/// Params with the same geometry, mesh and stage (every layer of a model)
/// have the same shards and are checked once; an alias with its source's
/// geometry has its pieces by construction. Cost O(params x ndim) plus
/// O(shard classes x ndim) per distinct geometry and a sort per dim; a
/// geometry of more than 2^16 shard classes (only hostile meshes), and every
/// geometry once 2^21 classes were enumerated, gets the structural checks
/// only, so the check stays bounded.
std::vector<std::string> check_plan(const Plan& plan, std::size_t max_reported = 20);

/// The shard-level part of check_plan for one param: `planned`'s structure, then
/// `classes` (what enumerate_shards(plan, p) returns) against it: offsets,
/// sentinels, padding, packed boxes, tiling and replica counts. Exposed so
/// tests can corrupt a piece or a replica set, which the Plan derives and
/// never stores.
std::vector<std::string> check_shard_classes(const Plan& plan, const PlannedParam& planned,
                                             const std::vector<ShardClass>& classes,
                                             std::size_t max_reported = 20);

/// Runs check_plan and throws InternalError listing the violations when
/// there is any.
void assert_plan_invariants(const Plan& plan);

/// The buffer layouts of `ranks` agree with the plan's shards: FSDP2 params
/// packed back to back in each unit (offset = sum of earlier padded numels,
/// slot = their sum), each with the rank's padded and local shard shapes and
/// padded_numel = numel(padded shape) (x element size in byte units), the
/// rank at its index in the FSDP group; muon stages packed back to back,
/// padded_numel >= actual_numel, one split size per group member, the rank
/// at its index, and the first stage's actual_numel = the rank's local numel.
/// Same contract as check_plan. Cost O(params of the stage x stages) per rank.
std::vector<std::string> check_buffers(const Plan& plan, const std::vector<PlannedBuffer>& buffers,
                                       const std::vector<std::int64_t>& ranks,
                                       std::size_t max_reported = 20);

/// Runs check_buffers and throws InternalError on any violation.
void assert_buffer_invariants(const Plan& plan, const std::vector<PlannedBuffer>& buffers,
                              const std::vector<std::int64_t>& ranks);

/// True when this build checks invariants after every `build_plan` (the
/// CMake option SHARDC_CHECK_INVARIANTS, on in tools/test's builds; only
/// check_plan.cpp is compiled differently).
bool invariants_checked_always();

}  // namespace shardc
