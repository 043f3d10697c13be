#include <doctest/doctest.h>

#include <algorithm>
#include <random>

#include "reshard/accumulate.hpp"
#include "reshard/reshard.hpp"

using namespace shardc;
using namespace shardc::reshard;

namespace {

RankSet random_set(std::mt19937& rng, std::int64_t world) {
  std::vector<std::int64_t> ranks;
  std::uniform_int_distribution<int> kind(0, 2);
  std::uniform_int_distribution<std::int64_t> stride(1, 9), start(0, world - 1);
  const int k = kind(rng);
  if (k == 0) {  // one progression, as a replica set on a row-major mesh
    for (std::int64_t r = start(rng), s = stride(rng); r < world; r += s) ranks.push_back(r);
  } else if (k == 1) {  // a product: several progressions
    const std::int64_t step = stride(rng), block = stride(rng) * 16;
    for (std::int64_t b = start(rng) % block; b < world; b += block)
      for (std::int64_t r = b; r < std::min(world, b + 8 * step); r += step) ranks.push_back(r);
  } else {
    std::bernoulli_distribution coin(0.3);
    for (std::int64_t r = 0; r < world; ++r)
      if (coin(rng)) ranks.push_back(r);
  }
  std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  if (ranks.empty()) ranks.push_back(0);
  return RankSet::from_sorted(ranks);
}

std::vector<std::int64_t> expand(const std::vector<Progression>& runs) {
  std::vector<std::int64_t> out;
  for (const auto& run : runs)
    for (std::int64_t i = 0; i < run.count; ++i) out.push_back(run.start + i * run.stride);
  return out;
}

}  // namespace

TEST_CASE("rank-set intersection equals the intersection of the expanded sets") {
  std::mt19937 rng(11);
  for (int t = 0; t < 400; ++t) {
    const std::int64_t world = 1 + t % 200;
    const RankSet first = random_set(rng, world), second = random_set(rng, world);
    std::vector<std::int64_t> want;
    const auto ea = first.expand(), eb = second.expand();
    std::set_intersection(ea.begin(), ea.end(), eb.begin(), eb.end(), std::back_inserter(want));
    const auto got = expand(intersect_ranks(first, second));
    CHECK(got == want);  // also sorted: the runs do not interleave
  }
  // Strides 6 and 4 meet every 12 from 6: CRT with gcd 2.
  const auto runs = intersect_ranks(RankSet::from_progressions({{0, 6, 10}}),
                                    RankSet::from_progressions({{2, 4, 20}}));
  REQUIRE(runs.size() == 1);
  CHECK(runs[0] == Progression{6, 12, 5});
}

TEST_CASE("source choice: the destination itself, then its node, then the lowest rank") {
  const RankSet holders = RankSet::from_progressions({{3, 8, 4}});  // 3, 11, 19, 27
  CHECK(choose_source(holders, 19, std::nullopt) == 19);
  CHECK(choose_source(holders, 20, std::nullopt) == 3);
  CHECK(choose_source(holders, 20, 8) == 19);  // node 2 = ranks 16-23
  CHECK(choose_source(holders, 30, 8) == 27);  // node 3 = ranks 24-31
  CHECK(choose_source(holders, 40, 8) == 3);   // node 5 holds none: lowest
  CHECK(choose_source(holders, 20, 1) == 3);   // one rank per node
  CHECK(choose_source(holders, 13, 16) == 3);  // node 0 = 0-15: lowest on it
  const RankSet two = RankSet::from_progressions({{0, 1, 2}, {10, 2, 3}});  // 0,1,10,12,14
  CHECK(choose_source(two, 13, 4) == 12);
  CHECK(choose_source(two, 15, 4) == 12);
}

TEST_CASE("per-rank sums over progressions match adding rank by rank") {
  std::mt19937 rng(5);
  const std::int64_t world = 97;
  RankAccumulator acc(world);
  std::vector<std::int64_t> want(world, 0);
  for (int t = 0; t < 200; ++t) {
    const RankSet set = random_set(rng, world);
    const std::int64_t value = t + 1;
    acc.add(set, value);
    for (const auto rank : set.expand()) want[static_cast<std::size_t>(rank)] += value;
  }
  CHECK(acc.finish() == want);
}
