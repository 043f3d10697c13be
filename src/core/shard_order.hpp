// The arithmetic of an explicit shard order (docs/shard-order.md): the
// splits of one tensor dim applied in a stated order instead of mesh order,
// and how DTensor (torch 2.13) labels and reads such a layout.
//
// Sources (torch 2.13.0, torch/distributed/tensor/):
//  * `_dtensor_spec.py` ShardOrderEntry: a dim's mesh dims "in execution
//    order. The first mesh dim is applied first"; every split is torch.chunk
//    of the piece the previous ones left (`_redistribute.py` applies the
//    Shard transforms of a shard order one mesh dim at a time);
//  * `_dtensor_spec.py` `_convert_shard_order_to_StridedShard`: the split
//    factor of the placement on mesh dim m is the product of the sizes of
//    the mesh dims that come earlier in the order and later in the mesh
//    (1 = plain `Shard`);
//  * `placement_types.py` `_StridedShard._split_tensor` and `_utils.py`
//    `_compute_local_shape_and_global_offset`: the labels read left to right
//    in mesh order, `_StridedShard(d, sf)` as "chunk into sf pieces, chunk
//    each into n, rank k takes piece k of every one, concatenated" (PR
//    #163843). For extents the product of the ways divides, the reading is
//    the order's nested chunks; otherwise it can give other rows (W-STRIDED).
// All extents and offsets are in elements (rows of the dim).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "core/plan.hpp"

namespace shardc {

/// The split factor a placement was written with: F of `_StridedShard(d,
/// sf=F)` (the front end's spelling of a `shard_order`, or the user's), 1
/// for `Shard(d)` and anything else.
std::int64_t written_split_factor(const Placement& placement);

/// True when the rule splits of `dim` (FSDP's left out) are not in mesh
/// order: a shard order put them so (contract §5.2a).
bool out_of_mesh_order(const ParamGeometry& geom, std::size_t dim);

/// One split of a dim as DTensor's placements list it (mesh order): the
/// mesh dim's size, the rank's coordinate on it and the label's split
/// factor (1 = `Shard`).
struct MeshDimSplit {
  std::int64_t size = 1;
  std::int64_t coord = 0;
  std::int64_t split_factor = 1;
};

/// A run of rows [start, start + size) of the global dim.
struct RowRun {
  std::int64_t start = 0;
  std::int64_t size = 0;
  bool operator==(const RowRun&) const = default;
};

/// The nested chunks of an order: `ways[i]` / `coords[i]` of the i-th split
/// in execution order (outermost first); each split is torch.chunk of the
/// previous piece (empty trailing pieces start at the end of their parent).
/// Preconditions (asserted): equal lengths, 0 <= coords[i] < ways[i].
Piece nested_piece(std::int64_t length, std::span<const std::int64_t> ways,
                   std::span<const std::int64_t> coords);

/// DTensor's split factors of an order (`_convert_shard_order_to_StridedShard`):
/// `order` lists mesh dims in execution order, `sizes` all mesh dim sizes;
/// returns one factor per entry of `order` (same positions).
std::vector<std::int64_t> strided_split_factors(std::span<const int> order,
                                                std::span<const std::int64_t> sizes);

/// The inverse (`_maybe_convert_StridedShard_to_shard_order`): the mesh dims
/// `mesh_dims` (ascending) that shard one dim with factors `split_factors`,
/// as an execution order; nullopt when no order gives those factors (DTensor
/// then cannot read the labels as a shard order: the rows are not
/// contiguous).
std::optional<std::vector<int>> decode_split_factors(std::span<const int> mesh_dims,
                                                     std::span<const std::int64_t> split_factors,
                                                     std::span<const std::int64_t> sizes);

/// The rows DTensor's labels give a rank on one dim
/// (`_compute_local_shape_and_global_offset` with `_StridedShard` read as in
/// `_split_tensor`): `splits` in mesh order. The runs are in local order;
/// empty when the rank holds none. Cost O(splits x runs); the runs multiply
/// by each split factor, so callers bound the product.
std::vector<RowRun> dtensor_rows(std::int64_t length, std::span<const MeshDimSplit> splits);

}  // namespace shardc
