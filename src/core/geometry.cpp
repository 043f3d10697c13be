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

std::int64_t split_coord(const DimSplit& s, std::span<const std::int64_t> coords) {
  std::int64_t k = 0;
  for (std::size_t i = 0; i < s.axes.size(); ++i)
    k = k * s.axis_sizes[i] + coords[static_cast<std::size_t>(s.axes[i])];
  return k;
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
DimPiece replicated_piece(std::int64_t length, const DimSplit& s,
                          std::span<const std::int64_t> coords, std::int64_t replicas) {
  DimSplit fewer = s;
  fewer.ways = s.ways / replicas;
  const Piece p = split_piece(length, split_coord(s, coords) / replicas, fewer);
  DimPiece d;
  d.alloc = p.size;
  d.real = std::clamp(length - p.start, std::int64_t{0}, p.size);
  d.start = d.real > 0 ? p.start : 0;
  return d;
}

// The FSDP split `fsdp` of a local tensor of `alloc` rows held as `segs`: the
// segments of the rank's FSDP piece, re-based to it. Returns the piece's allocated extent.
std::int64_t fsdp_cut(std::int64_t alloc, const DimSplit& fsdp,
                      std::span<const std::int64_t> coords, std::vector<Segment>& segs) {
  const Piece f = split_piece(alloc, split_coord(fsdp, coords), fsdp);
  std::vector<Segment> cut;
  for (const Segment& s : segs) {
    const std::int64_t lo = std::max(s.local, f.start);
    const std::int64_t hi = std::min(s.local + s.len, f.start + f.size);
    if (lo < hi) cut.push_back({lo - f.start, s.global + (lo - s.local), hi - lo});
  }
  segs = std::move(cut);
  return f.size;
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
    const std::int64_t replicas = i < geom.part_replicas.size() ? geom.part_replicas[i] : 1;
    const DimPiece d = replicas > 1 && rule.size() == 1
                           ? replicated_piece(part, rule[0], coords, replicas)
                           : apply_chain(part, rule, coords);
    if (d.real > 0) segs.push_back({alloc, part_start + d.start, d.real});
    alloc += d.alloc;
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
                     [](const DimSplit& s) { return !s.fsdp && s.split_factor > 1; });
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
  DimPiece p;
  p.alloc = strided_dim(length, chain, coords, segs);
  for (const Segment& s : segs) p.real += s.len;
  p.start = segs.empty() ? 0 : segs.front().global;
  return p;
}

DimPiece dim_piece_at(const ParamGeometry& geom, std::size_t dim,
                      std::span<const std::int64_t> coords) {
  if (!geom.parts.empty() && static_cast<int>(dim) == geom.parts_dim) {
    std::vector<Segment> segs;
    DimPiece p;
    p.alloc = packed_dim(geom, coords, segs);
    for (const Segment& s : segs) p.real += s.len;
    return p;
  }
  return apply_chain(geom.global_shape[dim], geom.per_dim[dim], coords);
}

ShardGeom shard_at(const ParamGeometry& geom, std::span<const std::int64_t> coords) {
  const std::size_t ndim = geom.global_shape.size();
  ShardGeom g;
  g.local_shape = geom.global_shape;
  g.global_offset.assign(ndim, 0);
  g.padded_shape = geom.global_shape;
  std::vector<Segment> segs;
  const int boxed = boxed_dim(geom);
  for (std::size_t d = 0; d < ndim; ++d) {
    if (static_cast<int>(d) == boxed) {
      g.padded_shape[d] = geom.parts.empty()
                              ? strided_dim(geom.global_shape[d], geom.per_dim[d], coords, segs)
                              : packed_dim(geom, coords, segs);
      std::int64_t real = 0;
      for (const Segment& s : segs) real += s.len;
      g.local_shape[d] = real;
      g.global_offset[d] = segs.empty() ? geom.global_shape[d] : segs.front().global;
      continue;
    }
    const DimPiece p = apply_chain(geom.global_shape[d], geom.per_dim[d], coords);
    g.local_shape[d] = p.real;
    g.padded_shape[d] = p.alloc;
    g.global_offset[d] = p.real == 0 ? geom.global_shape[d] : p.start;
  }
  if (boxed < 0) return g;
  const auto pd = static_cast<std::size_t>(boxed);
  const bool empty =
      std::find(g.local_shape.begin(), g.local_shape.end(), 0) != g.local_shape.end();
  if (empty) return g;
  for (const Segment& s : segs) {
    ShardBox b;
    b.global_offset = g.global_offset;
    b.global_offset[pd] = s.global;
    b.local_offset.assign(ndim, 0);
    b.local_offset[pd] = s.local;
    b.shape = g.local_shape;
    b.shape[pd] = s.len;
    g.boxes.push_back(std::move(b));
  }
  return g;
}

}  // namespace shardc
