// The arithmetic of DTensor's shard orders (src/core/shard_order.hpp): the
// split factors of `_StridedShard` labels, their reading back into an
// execution order, the nested pieces of an order and the rows DTensor's
// labels give (`dtensor_rows`), which the plan geometry (geometry.cpp) and
// the planner's shard-order passes (src/planner/shard_order.cpp) use.
#include "core/shard_order.hpp"

#include <algorithm>
#include <string>

namespace shardc {
namespace {

// Rows [from, from + len) of the logical sequence `seq` (runs in order).
std::vector<RowRun> take(const std::vector<RowRun>& seq, std::int64_t from, std::int64_t len) {
  std::vector<RowRun> out;
  for (const RowRun& run : seq) {
    if (len <= 0) break;
    if (from >= run.size) {
      from -= run.size;
      continue;
    }
    const std::int64_t rows = std::min(run.size - from, len);
    out.push_back({run.start + from, rows});
    len -= rows;
    from = 0;
  }
  return out;
}

std::int64_t total_rows(const std::vector<RowRun>& seq) {
  std::int64_t total = 0;
  for (const RowRun& run : seq) total += run.size;
  return total;
}

}  // namespace

std::int64_t written_split_factor(const Placement& placement) {
  const std::string_view text = placement.text;
  if (placement.kind != Placement::Kind::Shard || !text.starts_with("_StridedShard")) return 1;
  std::size_t at = text.find("sf");
  const std::size_t long_key = text.find("split_factor");
  if (long_key != std::string_view::npos) at = long_key;
  at = text.find('=', at == std::string_view::npos ? 0 : at);
  if (at == std::string_view::npos) return 1;
  std::int64_t factor = 0;
  for (std::size_t i = at + 1; i < text.size(); ++i) {
    const char digit = text[i];
    if (digit == ' ' || digit == '\t') continue;
    if (digit < '0' || digit > '9') break;
    factor = factor * 10 + (digit - '0');
    if (factor > (std::int64_t{1} << 31)) return 1;  // the front end bounds it
  }
  return factor >= 1 ? factor : 1;
}

bool out_of_mesh_order(const ParamGeometry& geom, std::size_t dim) {
  int last = -1;
  for (const DimSplit& split : geom.per_dim[dim]) {
    if (split.fsdp) continue;
    for (int axis : split.axes) {
      if (axis < last) return true;
      last = axis;
    }
  }
  return false;
}

Piece nested_piece(std::int64_t length, std::span<const std::int64_t> ways,
                   std::span<const std::int64_t> coords) {
  SHARDC_ASSERT(ways.size() == coords.size(), "one coordinate per split");
  Piece piece{0, length};
  for (std::size_t i = 0; i < ways.size(); ++i) {
    const Piece inner = split_piece(piece.size, ways[i], coords[i], SplitRule::Chunk);
    piece = {piece.start + inner.start, inner.size};
  }
  return piece;
}

std::vector<std::int64_t> strided_split_factors(std::span<const int> order,
                                                std::span<const std::int64_t> sizes) {
  std::vector<std::int64_t> out;
  for (std::size_t i = 0; i < order.size(); ++i) {
    std::int64_t sf = 1;
    for (std::size_t j = 0; j < i; ++j)
      if (order[j] > order[i]) sf *= sizes[static_cast<std::size_t>(order[j])];
    out.push_back(sf);
  }
  return out;
}

std::optional<std::vector<int>> decode_split_factors(std::span<const int> mesh_dims,
                                                     std::span<const std::int64_t> split_factors,
                                                     std::span<const std::int64_t> sizes) {
  SHARDC_ASSERT(mesh_dims.size() == split_factors.size(), "one split factor per mesh dim");
  std::vector<int> order;
  for (std::size_t k = mesh_dims.size(); k-- > 0;) {
    std::int64_t accumulated = 1;
    bool placed = false;
    for (std::size_t i = 0; i <= order.size(); ++i) {
      if (accumulated == split_factors[k]) {
        order.insert(order.begin() + static_cast<std::ptrdiff_t>(i), mesh_dims[k]);
        placed = true;
        break;
      }
      if (i < order.size()) accumulated *= sizes[static_cast<std::size_t>(order[i])];
    }
    if (!placed) return std::nullopt;
  }
  return order;
}

std::vector<RowRun> dtensor_rows(std::int64_t length, std::span<const MeshDimSplit> splits) {
  std::vector<RowRun> seq{{0, length}};
  for (const MeshDimSplit& split : splits) {
    const std::int64_t total = total_rows(seq);
    if (split.split_factor <= 1) {
      const Piece piece = split_piece(total, split.size, split.coord, SplitRule::Chunk);
      seq = take(seq, piece.start, piece.size);
      continue;
    }
    std::vector<RowRun> next;
    for (std::int64_t j = 0; j < split.split_factor; ++j) {
      const Piece outer = split_piece(total, split.split_factor, j, SplitRule::Chunk);
      const Piece inner = split_piece(outer.size, split.size, split.coord, SplitRule::Chunk);
      for (const RowRun& run : take(seq, outer.start + inner.start, inner.size))
        next.push_back(run);
    }
    seq = std::move(next);
  }
  std::vector<RowRun> merged;
  for (const RowRun& run : seq) {
    if (run.size == 0) continue;
    if (!merged.empty() && merged.back().start + merged.back().size == run.start) {
      merged.back().size += run.size;
    } else {
      merged.push_back(run);
    }
  }
  return merged;
}

}  // namespace shardc
