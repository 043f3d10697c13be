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

std::int64_t saturate(i128 v) {
  constexpr auto kMax = std::numeric_limits<std::int64_t>::max();
  return v > kMax ? kMax : static_cast<std::int64_t>(v);
}

}  // namespace

Piece split_piece(std::int64_t length, std::int64_t ways, std::int64_t k, SplitRule rule) {
  SHARDC_ASSERT(length >= 0 && ways >= 1 && k >= 0 && k < ways,
                "piece " + std::to_string(k) + " of " + std::to_string(length) + " split " +
                    std::to_string(ways) + " ways");
  if (rule == SplitRule::Balanced) {
    // hyper-parallel: q, r = divmod(L, n); the first r ranks get one more.
    const std::int64_t q = length / ways;
    const std::int64_t r = length % ways;
    return {k * q + std::min(k, r), q + (k < r ? 1 : 0)};
  }
  // torch.chunk (DTensor Shard, FSDP2): c = ceil(L/n); trailing ranks may be empty.
  // `Even` is checked for divisibility elsewhere and splits the same way.
  const std::int64_t c = length == 0 ? 0 : (length + ways - 1) / ways;
  const std::int64_t start = std::min(k * c, length);
  return {start, std::clamp(length - k * c, std::int64_t{0}, c)};
}

Piece split_piece(std::int64_t length, std::int64_t k, const DimSplit& s) {
  SHARDC_ASSERT(k >= 0 && k < s.ways, "piece " + std::to_string(k) + " of a split of " +
                                          std::to_string(s.ways) + " ways");
  if (s.fsdp) {
    // FSDP2: torch.chunk of the local tensor, every shard padded to the first one's size.
    const std::int64_t c = length == 0 ? 0 : (length + s.ways - 1) / s.ways;
    return {saturate(static_cast<i128>(k) * c), c};
  }
  const std::int64_t unit = std::max<std::int64_t>(1, s.unit);
  const std::int64_t units = (length + unit - 1) / unit;  // a trailing partial unit counts whole
  if (s.rule == SplitRule::Pad) {
    const i128 m = std::max<std::int64_t>(1, s.pad_multiple);
    const i128 per = m * s.ways;
    const i128 c = (static_cast<i128>(units) + per - 1) / per * m;  // units per piece
    return {saturate(c * k * unit), saturate(c * unit)};
  }
  const Piece p = split_piece(units, s.ways, k, s.rule);
  if (unit == 1) return p;
  const i128 start = static_cast<i128>(p.start) * unit;
  const i128 end = std::min<i128>(static_cast<i128>(p.start + p.size) * unit, length);
  return {saturate(std::min<i128>(start, length)), saturate(std::max<i128>(end - start, 0))};
}

DimPiece apply_chain(std::int64_t length, std::span<const DimSplit> chain,
                     std::span<const std::int64_t> coords) {
  if (strided_chain(chain)) return strided_piece(length, chain, coords);
  DimPiece d{length, length, 0};
  for (const DimSplit& s : chain) {
    const Piece p = split_piece(d.alloc, split_coord(s, coords), s);
    d.real = std::clamp(d.real - p.start, std::int64_t{0}, p.size);
    d.start = d.real > 0 ? d.start + p.start : d.start;
    d.alloc = p.size;
  }
  return d;
}

std::int64_t split_extent(std::int64_t length, const std::vector<DimSplit>& chain,
                          std::span<const std::int64_t> coords) {
  return apply_chain(length, chain, coords).real;
}

bool packed_dim_split(const PlannedParam& p) {
  if (p.geometry.parts.empty()) return false;
  for (const DimSplit& s : p.geometry.per_dim[static_cast<std::size_t>(p.geometry.parts_dim)])
    if (s.ways > 1) return true;
  return false;
}

std::string uneven_text(const DimSplit& s) {
  std::string t = s.fsdp ? std::string("fsdp") : std::string(split_rule_name(s.rule));
  if (s.rule == SplitRule::Pad && !s.fsdp) t += " " + std::to_string(s.pad_multiple);
  if (s.unit > 1 && !s.fsdp) t += ", unit " + std::to_string(s.unit);
  return t;
}

}  // namespace shardc
