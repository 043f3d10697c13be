// Nesting and offsets (contract §5.2): a rank's piece of a param from its split
// chains and mesh coordinates; padded dims (real rows a prefix of the
// allocated piece, contract §5.9) and packed params (one box per part
// piece, contract §5.10), and dims read as DTensor reads `_StridedShard`
// labels that are no shard order (one box per run, docs/shard-order.md).
#include <algorithm>

#include "core/plan.hpp"
#include "core/shard_order.hpp"

namespace shardc {

std::vector<std::int64_t> mesh_coords(const Mesh& mesh, std::int64_t rank) {
  std::vector<std::int64_t> coords(mesh.axes.size(), 0);
  for (std::size_t i = mesh.axes.size(); i-- > 0;) {
    coords[i] = rank % mesh.axes[i].size;
    rank /= mesh.axes[i].size;
  }
  return coords;
}

std::int64_t axes_index(std::span<const int> axes, std::span<const std::int64_t> sizes,
                        std::span<const std::int64_t> coords) {
  std::int64_t index = 0;
  for (std::size_t i = 0; i < axes.size(); ++i)
    index = index * sizes[i] + coords[static_cast<std::size_t>(axes[i])];
  return index;
}

void set_axes_coords(std::span<const int> axes, std::span<const std::int64_t> sizes,
                     std::int64_t index, std::span<std::int64_t> coords) {
  for (std::size_t i = axes.size(); i-- > 0;) {
    coords[static_cast<std::size_t>(axes[i])] = index % sizes[i];
    index /= sizes[i];
  }
}

std::int64_t split_coord(const DimSplit& split, std::span<const std::int64_t> coords) {
  return axes_index(split.axes, split.axis_sizes, coords);
}

namespace {

// One run of real rows of the packed dim: `len` rows at `local` in the
// rank's local tensor are global rows [global, global + len).
struct Segment {
  std::int64_t local = 0;
  std::int64_t global = 0;
  std::int64_t len = 0;
};

// A part whose piece R consecutive coordinates of split `s` share: piece c / R of the part
// split s.ways / R ways (ParamGeometry::part_replicas; the planner checks R divides s.ways).
DimPiece replicated_piece(std::int64_t length, const DimSplit& split,
                          std::span<const std::int64_t> coords, std::int64_t replicas) {
  DimSplit fewer = split;
  fewer.ways = split.ways / replicas;
  const Piece piece = split_piece(length, split_coord(split, coords) / replicas, fewer);
  DimPiece dim_piece;
  dim_piece.alloc = piece.size;
  dim_piece.real = std::clamp(length - piece.start, std::int64_t{0}, piece.size);
  dim_piece.start = dim_piece.real > 0 ? piece.start : 0;
  return dim_piece;
}

}  // namespace

DimPiece packed_part_piece(const ParamGeometry& geom, std::size_t part,
                           std::span<const DimSplit> rule, std::span<const std::int64_t> coords) {
  const std::int64_t length = geom.parts[part];
  const std::int64_t replicas = part < geom.part_replicas.size() ? geom.part_replicas[part] : 1;
  return replicas > 1 && rule.size() == 1 ? replicated_piece(length, rule[0], coords, replicas)
                                          : apply_chain(length, rule, coords);
}

namespace {

// The FSDP split `fsdp` of a local tensor of `alloc` rows held as `segs`: the
// segments of the rank's FSDP piece, re-based to it. Returns the piece's allocated extent.
std::int64_t fsdp_cut(std::int64_t alloc, const DimSplit& fsdp,
                      std::span<const std::int64_t> coords, std::vector<Segment>& segs) {
  const Piece fsdp_piece = split_piece(alloc, split_coord(fsdp, coords), fsdp);
  std::vector<Segment> cut;
  for (const Segment& segment : segs) {
    const std::int64_t lo = std::max(segment.local, fsdp_piece.start);
    const std::int64_t hi =
        std::min(segment.local + segment.len, fsdp_piece.start + fsdp_piece.size);
    if (lo < hi)
      cut.push_back({lo - fsdp_piece.start, segment.global + (lo - segment.local), hi - lo});
  }
  segs = std::move(cut);
  return fsdp_piece.size;
}

// The packed dim: every part through the rule splits, concatenated; then
// the FSDP split (if any) on the concatenation. Returns the allocated extent.
std::int64_t packed_dim(const ParamGeometry& geom, std::span<const std::int64_t> coords,
                        std::vector<Segment>& segs) {
  const auto& chain = geom.per_dim[static_cast<std::size_t>(geom.parts_dim)];
  const bool has_fsdp = !chain.empty() && chain.back().fsdp;
  const std::span<const DimSplit> rule(chain.data(), chain.size() - (has_fsdp ? 1 : 0));
  std::int64_t alloc = 0;
  std::int64_t part_start = 0;
  for (std::size_t i = 0; i < geom.parts.size(); ++i) {
    const std::int64_t part = geom.parts[i];
    const DimPiece dim_piece = packed_part_piece(geom, i, rule, coords);
    if (dim_piece.real > 0) segs.push_back({alloc, part_start + dim_piece.start, dim_piece.real});
    alloc += dim_piece.alloc;
    part_start += part;
  }
  // One run per part, never merged with a neighbour even when contiguous both locally and
  // globally: each box lies inside one part (contract §5.10; check_plan's invariant), which is
  // what a runtime reading `boxes` part by part relies on (hostile/packed_internal_error: the
  // packed dim unsplit, one-row parts, FSDP-only or padded splits merged parts into one box).
  if (!has_fsdp) return alloc;
  return fsdp_cut(alloc, chain.back(), coords, segs);
}

// A strided dim (`strided_chain`): the rule splits read as DTensor reads their labels in
// mesh order (`dtensor_rows`: `_StridedShard._split_tensor`, `Shard` as torch.chunk), one
// segment per run in local order; then the FSDP split (if any) on the concatenation, as
// FSDP2 chunks the local tensor. Returns the allocated extent.
std::int64_t strided_dim(std::int64_t length, std::span<const DimSplit> chain,
                         std::span<const std::int64_t> coords, std::vector<Segment>& segs) {
  const bool has_fsdp = !chain.empty() && chain.back().fsdp;
  std::vector<MeshDimSplit> splits;
  for (std::size_t i = 0; i + (has_fsdp ? 1 : 0) < chain.size(); ++i)
    splits.push_back({chain[i].ways, split_coord(chain[i], coords), chain[i].split_factor});
  std::int64_t alloc = 0;
  for (const RowRun& run : dtensor_rows(length, splits)) {
    segs.push_back({alloc, run.start, run.size});
    alloc += run.size;
  }
  if (!has_fsdp) return alloc;
  return fsdp_cut(alloc, chain.back(), coords, segs);
}

}  // namespace

bool strided_chain(std::span<const DimSplit> chain) {
  return std::any_of(chain.begin(), chain.end(),
                     [](const DimSplit& split) { return !split.fsdp && split.split_factor > 1; });
}

int boxed_dim(const ParamGeometry& geom) {
  if (!geom.parts.empty()) return geom.parts_dim;
  for (std::size_t d = 0; d < geom.per_dim.size(); ++d)
    if (strided_chain(geom.per_dim[d])) return static_cast<int>(d);
  return -1;
}

DimPiece strided_piece(std::int64_t length, std::span<const DimSplit> chain,
                       std::span<const std::int64_t> coords) {
  std::vector<Segment> segs;
  DimPiece piece;
  piece.alloc = strided_dim(length, chain, coords, segs);
  for (const Segment& segment : segs) piece.real += segment.len;
  piece.start = segs.empty() ? 0 : segs.front().global;
  return piece;
}

DimPiece dim_piece_at(const ParamGeometry& geom, std::size_t dim,
                      std::span<const std::int64_t> coords) {
  if (!geom.parts.empty() && static_cast<int>(dim) == geom.parts_dim) {
    std::vector<Segment> segs;
    DimPiece piece;
    piece.alloc = packed_dim(geom, coords, segs);
    for (const Segment& segment : segs) piece.real += segment.len;
    return piece;
  }
  return apply_chain(geom.global_shape[dim], geom.per_dim[dim], coords);
}

ShardGeom shard_at(const ParamGeometry& geom, std::span<const std::int64_t> coords) {
  const std::size_t ndim = geom.global_shape.size();
  ShardGeom shard;
  shard.local_shape = geom.global_shape;
  shard.global_offset.assign(ndim, 0);
  shard.padded_shape = geom.global_shape;
  std::vector<Segment> segs;
  const int boxed = boxed_dim(geom);
  for (std::size_t d = 0; d < ndim; ++d) {
    if (static_cast<int>(d) == boxed) {
      shard.padded_shape[d] = geom.parts.empty()
                                  ? strided_dim(geom.global_shape[d], geom.per_dim[d], coords, segs)
                                  : packed_dim(geom, coords, segs);
      std::int64_t real = 0;
      for (const Segment& segment : segs) real += segment.len;
      shard.local_shape[d] = real;
      shard.global_offset[d] = segs.empty() ? geom.global_shape[d] : segs.front().global;
      continue;
    }
    const DimPiece piece = apply_chain(geom.global_shape[d], geom.per_dim[d], coords);
    shard.local_shape[d] = piece.real;
    shard.padded_shape[d] = piece.alloc;
    shard.global_offset[d] = piece.real == 0 ? geom.global_shape[d] : piece.start;
  }
  if (boxed < 0) return shard;
  const auto pd = static_cast<std::size_t>(boxed);
  const bool empty =
      std::find(shard.local_shape.begin(), shard.local_shape.end(), 0) != shard.local_shape.end();
  if (empty) return shard;
  for (const Segment& segment : segs) {
    ShardBox box;
    box.global_offset = shard.global_offset;
    box.global_offset[pd] = segment.global;
    box.local_offset.assign(ndim, 0);
    box.local_offset[pd] = segment.local;
    box.shape = shard.local_shape;
    box.shape[pd] = segment.len;
    shard.boxes.push_back(std::move(box));
  }
  return shard;
}

}  // namespace shardc
