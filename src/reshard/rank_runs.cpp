// Rank-set arithmetic on progressions: intersection (Chinese remainder
// theorem) and the source choice (same rank, same node, lowest rank).
#include <numeric>

#include "reshard/reshard.hpp"

namespace shardc::reshard {
namespace {

// x with a*x = 1 (mod m), for gcd(a, m) = 1, m >= 1 (extended Euclid).
std::int64_t inverse_mod(std::int64_t a, std::int64_t m) {
  std::int64_t old_r = a % m, r = m, old_s = 1, s = 0;
  while (r != 0) {
    const std::int64_t q = old_r / r;
    old_r -= q * r;
    std::swap(old_r, r);
    old_s -= q * s;
    std::swap(old_s, s);
  }
  return ((old_s % m) + m) % m;
}

// The common ranks of two progressions, if any (one progression).
std::optional<Progression> meet(const Progression& p, const Progression& q) {
  const std::int64_t lo = std::max(p.start, q.start);
  const std::int64_t hi = std::min(p.last(), q.last());
  if (lo > hi) return std::nullopt;
  const std::int64_t g = std::gcd(p.stride, q.stride);
  const std::int64_t diff = q.start - p.start;
  if (diff % g != 0) return std::nullopt;
  // x = p.start + p.stride * k with p.stride * k = diff (mod q.stride).
  const std::int64_t m = q.stride / g;
  const std::int64_t k =
      m == 1 ? 0 : ((diff / g) % m + m) % m * inverse_mod(p.stride / g % m, m) % m;
  const std::int64_t lcm = p.stride / g * q.stride;
  std::int64_t x = p.start + p.stride * k;  // one common element (maybe < lo)
  if (x < lo) x += (lo - x + lcm - 1) / lcm * lcm;
  if (x > lo) x -= (x - lo) / lcm * lcm;
  if (x > hi) return std::nullopt;
  return Progression{x, lcm, (hi - x) / lcm + 1};
}

}  // namespace

std::vector<Progression> intersect_ranks(const RankSet& a, const RankSet& b) {
  std::vector<Progression> out;
  std::size_t j0 = 0;
  for (const Progression& p : a.runs()) {
    while (j0 < b.runs().size() && b.runs()[j0].last() < p.start) ++j0;
    for (std::size_t j = j0; j < b.runs().size() && b.runs()[j].start <= p.last(); ++j)
      if (auto m = meet(p, b.runs()[j])) out.push_back(*m);
  }
  return out;
}

std::int64_t choose_source(const RankSet& holders, std::int64_t dst,
                           std::optional<std::int64_t> ranks_per_node) {
  if (holders.contains(dst)) return dst;
  if (ranks_per_node && *ranks_per_node > 0) {
    const std::int64_t lo = dst / *ranks_per_node * *ranks_per_node;
    const std::int64_t hi = lo + *ranks_per_node - 1;
    for (const Progression& p : holders.runs()) {
      if (p.start > hi) break;
      if (p.last() < lo) continue;
      const std::int64_t x =
          p.start >= lo ? p.start : p.start + (lo - p.start + p.stride - 1) / p.stride * p.stride;
      if (x <= hi && x <= p.last()) return x;
    }
  }
  return holders.first();
}

}  // namespace shardc::reshard
