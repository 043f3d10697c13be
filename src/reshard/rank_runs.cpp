// Rank-set arithmetic on progressions: intersection (Chinese remainder
// theorem) and the source choice (same rank, same node, lowest rank).
#include <numeric>

#include "reshard/reshard.hpp"

namespace shardc::reshard {
namespace {

// x with a*x = 1 (mod m), for gcd(a, m) = 1, m >= 1 (extended Euclid).
std::int64_t inverse_mod(std::int64_t value, std::int64_t modulus) {
  std::int64_t old_r = value % modulus, rem = modulus, old_s = 1, coef = 0;
  while (rem != 0) {
    const std::int64_t quotient = old_r / rem;
    old_r -= quotient * rem;
    std::swap(old_r, rem);
    old_s -= quotient * coef;
    std::swap(old_s, coef);
  }
  return ((old_s % modulus) + modulus) % modulus;
}

// The common ranks of two progressions, if any (one progression).
std::optional<Progression> meet(const Progression& first, const Progression& second) {
  const std::int64_t lo = std::max(first.start, second.start);
  const std::int64_t hi = std::min(first.last(), second.last());
  if (lo > hi) return std::nullopt;
  const std::int64_t common = std::gcd(first.stride, second.stride);
  const std::int64_t diff = second.start - first.start;
  if (diff % common != 0) return std::nullopt;
  // x = p.start + p.stride * k with p.stride * k = diff (mod q.stride).
  const std::int64_t period = second.stride / common;
  const std::int64_t k = period == 1
                             ? 0
                             : ((diff / common) % period + period) % period *
                                   inverse_mod(first.stride / common % period, period) % period;
  const std::int64_t lcm = first.stride / common * second.stride;
  std::int64_t element = first.start + first.stride * k;  // one common element (maybe < lo)
  if (element < lo) element += (lo - element + lcm - 1) / lcm * lcm;
  if (element > lo) element -= (element - lo) / lcm * lcm;
  if (element > hi) return std::nullopt;
  return Progression{element, lcm, (hi - element) / lcm + 1};
}

}  // namespace

std::vector<Progression> intersect_ranks(const RankSet& first, const RankSet& second) {
  std::vector<Progression> out;
  std::size_t j0 = 0;
  for (const Progression& run : first.runs()) {
    while (j0 < second.runs().size() && second.runs()[j0].last() < run.start) ++j0;
    for (std::size_t j = j0; j < second.runs().size() && second.runs()[j].start <= run.last(); ++j)
      if (auto met = meet(run, second.runs()[j])) out.push_back(*met);
  }
  return out;
}

std::int64_t choose_source(const RankSet& holders, std::int64_t dst,
                           std::optional<std::int64_t> ranks_per_node) {
  if (holders.contains(dst)) return dst;
  if (ranks_per_node && *ranks_per_node > 0) {
    const std::int64_t lo = dst / *ranks_per_node * *ranks_per_node;
    const std::int64_t hi = lo + *ranks_per_node - 1;
    for (const Progression& run : holders.runs()) {
      if (run.start > hi) break;
      if (run.last() < lo) continue;
      const std::int64_t candidate =
          run.start >= lo ? run.start
                          : run.start + (lo - run.start + run.stride - 1) / run.stride * run.stride;
      if (candidate <= hi && candidate <= run.last()) return candidate;
    }
  }
  return holders.first();
}

}  // namespace shardc::reshard
