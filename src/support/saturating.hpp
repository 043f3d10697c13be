// Saturating int64 arithmetic for the analytic models (activations, communication): a
// product or sum of input-derived sizes that would overflow yields INT64_MAX instead of
// wrapping, so a hostile size gives a huge figure (and the budget check refuses it), never a
// negative one. Operands are sizes: non-negative.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <limits>

namespace shardc::saturating {

inline constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();

/// a x b, or kMax on overflow.
inline std::int64_t mul(std::int64_t a, std::int64_t b) {
  std::int64_t out = 0;
  if (__builtin_mul_overflow(a, b, &out)) return kMax;
  return out;
}
/// The product of `factors` (1 when empty), or kMax on overflow.
inline std::int64_t mul(std::initializer_list<std::int64_t> factors) {
  std::int64_t out = 1;
  for (std::int64_t factor : factors) out = mul(out, factor);
  return out;
}
/// a + b, or kMax on overflow.
inline std::int64_t add(std::int64_t a, std::int64_t b) {
  std::int64_t out = 0;
  if (__builtin_add_overflow(a, b, &out)) return kMax;
  return out;
}
/// ceil(a / b) for a >= 0; a itself when b <= 1. Never overflows (no a + b - 1).
inline std::int64_t ceil_div(std::int64_t a, std::int64_t b) {
  return b <= 1 ? a : a / b + (a % b != 0);
}

}  // namespace shardc::saturating
