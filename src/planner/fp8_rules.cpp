// FP8 block arithmetic (src/planner/fp8.hpp): scale names and shapes,
// block images of weight pieces, the scale's split for a weight split, and
// the per-level alignment check the planner pass and E-FP8-BLOCK hints use.
#include <algorithm>

#include "planner/fp8.hpp"
#include "support/saturating.hpp"

namespace shardc::fp8 {
namespace {

// The real rows of an allocated piece `p` of a parent whose first `real` rows are real.
Piece real_rows(Piece piece, std::int64_t real) {
  return {piece.start, std::clamp(real - piece.start, std::int64_t{0}, piece.size)};
}

// Whether splitting a weight dim of `length` rows (block `block`) by `weight_split`
// keeps every real piece block-aligned with the scale piece of the same coordinate
// (its dim of `scale_length` rows split by `scale_split`) its block image.
// Cost O(pieces with real rows).
bool split_aligned(std::int64_t length, std::int64_t scale_length, std::int64_t block,
                   const DimSplit& weight_split, const DimSplit& scale_split) {
  for (std::int64_t k = 0; k < weight_split.ways; ++k) {
    const Piece weight_piece = split_piece(length, k, weight_split);
    const Piece scale_piece = split_piece(scale_length, k, scale_split);
    const Piece weight_rows = real_rows(weight_piece, length);
    const Piece scale_rows = real_rows(scale_piece, scale_length);
    if (!judge_piece(weight_rows, length, scale_rows, block).ok) return false;
    if (weight_piece.start >= length && scale_piece.start >= scale_length)
      break;  // every later piece is empty
  }
  return true;
}

}  // namespace

std::string scale_name(std::string_view weight) {
  return std::string(weight) + std::string(kScaleSuffix);
}

std::optional<std::string> weight_of_scale(std::string_view name) {
  constexpr std::string_view kTail = "weight_scale_inv";
  if (name.size() <= kTail.size() || name.substr(name.size() - kTail.size()) != kTail)
    return std::nullopt;
  return std::string(name.substr(0, name.size() - kScaleSuffix.size()));
}

std::vector<std::int64_t> dim_blocks(std::size_t ndim, std::span<const std::int64_t> block) {
  std::vector<std::int64_t> out(ndim, 1);
  if (ndim >= 2 && block.size() == 2) {
    out[ndim - 2] = block[0];
    out[ndim - 1] = block[1];
  }
  return out;
}

std::optional<Shape> scale_shape(const Shape& weight, std::span<const std::int64_t> block) {
  if (weight.size() < 2 || block.size() != 2 || block[0] < 1 || block[1] < 1) return std::nullopt;
  const std::vector<std::int64_t> blocks = dim_blocks(weight.size(), block);
  Shape out(weight.size());
  for (std::size_t d = 0; d < weight.size(); ++d)
    out[d] = saturating::ceil_div(weight[d], blocks[d]);
  return out;
}

Piece block_image(Piece rows, std::int64_t block) {
  const std::int64_t first = rows.start / block;
  if (rows.size == 0) return {first, 0};
  return {first, saturating::ceil_div(rows.start + rows.size, block) - first};
}

bool block_aligned(Piece rows, std::int64_t length, std::int64_t block) {
  if (rows.size == 0) return true;
  const std::int64_t end = rows.start + rows.size;
  return rows.start % block == 0 && (end % block == 0 || end == length);
}

DimSplit scale_split(const DimSplit& weight_split, std::int64_t block) {
  DimSplit scale = weight_split;
  const std::int64_t unit = std::max<std::int64_t>(1, weight_split.unit);
  if (unit % block == 0) {
    scale.unit = unit / block;  // whole units of U rows are whole units of U / b blocks
    return scale;
  }
  scale.unit = 1;
  std::int64_t rows = 0;  // a pad piece's rows are a multiple of M x U
  if (weight_split.rule == SplitRule::Pad &&
      !__builtin_mul_overflow(weight_split.pad_multiple, unit, &rows) && rows % block == 0)
    scale.pad_multiple = rows / block;
  return scale;
}

PieceVerdict judge_piece(Piece w_rows, std::int64_t w_length, Piece s_rows, std::int64_t block) {
  PieceVerdict verdict;
  if (!block_aligned(w_rows, w_length, block)) {
    verdict.ok = false;
    verdict.boundary = w_rows.start % block != 0 ? w_rows.start : w_rows.start + w_rows.size;
    return verdict;
  }
  const Piece img = block_image(w_rows, block);
  const bool same =
      img.size == 0 ? s_rows.size == 0 : s_rows.start == img.start && s_rows.size == img.size;
  if (!same) {
    verdict.ok = false;
    verdict.mismatch = true;
  }
  return verdict;
}

std::vector<std::int64_t> valid_ways(std::int64_t length, std::int64_t block, const DimSplit& ws,
                                     std::int64_t max_ways, std::size_t max_listed) {
  std::vector<std::int64_t> out;
  const std::int64_t scale_len = saturating::ceil_div(length, block);
  for (std::int64_t n = 1; n <= max_ways && out.size() < max_listed; ++n) {
    DimSplit weight_split = ws;
    weight_split.ways = n;
    const DimSplit scale = scale_split(weight_split, block);
    if (split_aligned(length, scale_len, block, weight_split, scale)) out.push_back(n);
  }
  return out;
}

}  // namespace shardc::fp8
