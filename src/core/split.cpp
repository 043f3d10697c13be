// Splitting one tensor dim over n ranks (contract §5.1), with units a split
// may not cut and padded pieces (contract §5.9).
#include <algorithm>
#include <limits>
#include <string>

#include "core/plan.hpp"
#include "support/assert.hpp"

namespace shardc {
namespace {

__extension__ typedef __int128 i128;

std::int64_t saturate(i128 value) {
  constexpr auto kMax = std::numeric_limits<std::int64_t>::max();
  return value > kMax ? kMax : static_cast<std::int64_t>(value);
}

}  // namespace

Piece split_piece(std::int64_t length, std::int64_t ways, std::int64_t k, SplitRule rule) {
  SHARDC_ASSERT(length >= 0 && ways >= 1 && k >= 0 && k < ways,
                "piece " + std::to_string(k) + " of " + std::to_string(length) + " split " +
                    std::to_string(ways) + " ways");
  if (rule == SplitRule::Balanced) {
    // hyper-parallel: q, r = divmod(L, n); the first r ranks get one more.
    const std::int64_t quotient = length / ways;
    const std::int64_t remainder = length % ways;
    return {k * quotient + std::min(k, remainder), quotient + (k < remainder ? 1 : 0)};
  }
  // torch.chunk (DTensor Shard, FSDP2): c = ceil(L/n); trailing ranks may be empty.
  // `Even` is checked for divisibility elsewhere and splits the same way.
  const std::int64_t chunk = length == 0 ? 0 : (length + ways - 1) / ways;
  const std::int64_t start = std::min(k * chunk, length);
  return {start, std::clamp(length - k * chunk, std::int64_t{0}, chunk)};
}

Piece split_piece(std::int64_t length, std::int64_t k, const DimSplit& split) {
  SHARDC_ASSERT(k >= 0 && k < split.ways, "piece " + std::to_string(k) + " of a split of " +
                                              std::to_string(split.ways) + " ways");
  if (split.fsdp) {
    // FSDP2: torch.chunk of the local tensor, every shard padded to the first one's size.
    const std::int64_t chunk = length == 0 ? 0 : (length + split.ways - 1) / split.ways;
    return {saturate(static_cast<i128>(k) * chunk), chunk};
  }
  const std::int64_t unit = std::max<std::int64_t>(1, split.unit);
  const std::int64_t units = (length + unit - 1) / unit;  // a trailing partial unit counts whole
  if (split.rule == SplitRule::Pad) {
    const i128 multiple = std::max<std::int64_t>(1, split.pad_multiple);
    const i128 per = multiple * split.ways;
    const i128 units_per_piece =
        (static_cast<i128>(units) + per - 1) / per * multiple;  // units per piece
    return {saturate(units_per_piece * k * unit), saturate(units_per_piece * unit)};
  }
  const Piece piece = split_piece(units, split.ways, k, split.rule);
  if (unit == 1) return piece;
  const i128 start = static_cast<i128>(piece.start) * unit;
  const i128 end = std::min<i128>(static_cast<i128>(piece.start + piece.size) * unit, length);
  return {saturate(std::min<i128>(start, length)), saturate(std::max<i128>(end - start, 0))};
}

DimPiece apply_chain(std::int64_t length, std::span<const DimSplit> chain,
                     std::span<const std::int64_t> coords) {
  if (strided_chain(chain)) return strided_piece(length, chain, coords);
  DimPiece dim_piece{length, length, 0};
  for (const DimSplit& split : chain) {
    const Piece piece = split_piece(dim_piece.alloc, split_coord(split, coords), split);
    dim_piece.real = std::clamp(dim_piece.real - piece.start, std::int64_t{0}, piece.size);
    dim_piece.start = dim_piece.real > 0 ? dim_piece.start + piece.start : dim_piece.start;
    dim_piece.alloc = piece.size;
  }
  return dim_piece;
}

std::int64_t split_extent(std::int64_t length, const std::vector<DimSplit>& chain,
                          std::span<const std::int64_t> coords) {
  return apply_chain(length, chain, coords).real;
}

bool packed_dim_split(const PlannedParam& param) {
  if (param.geometry.parts.empty()) return false;
  for (const DimSplit& split :
       param.geometry.per_dim[static_cast<std::size_t>(param.geometry.parts_dim)])
    if (split.ways > 1) return true;
  return false;
}

std::string uneven_text(const DimSplit& split) {
  std::string text = split.fsdp ? std::string("fsdp") : std::string(split_rule_name(split.rule));
  if (split.rule == SplitRule::Pad && !split.fsdp) text += " " + std::to_string(split.pad_multiple);
  if (split.unit > 1 && !split.fsdp) text += ", unit " + std::to_string(split.unit);
  return text;
}

}  // namespace shardc
