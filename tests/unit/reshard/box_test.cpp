#include <doctest/doctest.h>

#include <random>

#include "reshard/box_index.hpp"
#include "reshard/reshard.hpp"

using namespace shardc;
using namespace shardc::reshard;

TEST_CASE("box intersection: overlap, containment, touching and empty boxes") {
  const Box first{{0, 0}, {4, 6}};
  const Box second{{2, 3}, {4, 6}};
  REQUIRE(intersect(first, second));
  CHECK(*intersect(first, second) == Box{{2, 3}, {2, 3}});
  CHECK(numel(*intersect(first, second)) == 6);
  const Box inner{{1, 1}, {1, 2}};
  CHECK(*intersect(first, inner) == inner);
  CHECK_FALSE(intersect(first, Box{{4, 0}, {2, 6}}));  // touches along dim 0: no element
  CHECK_FALSE(intersect(first, Box{{0, 6}, {4, 0}}));  // an empty shard at the sentinel offset
  CHECK_FALSE(intersect(first, Box{{0}, {4}}));        // different ndim
  CHECK(numel(Box{{}, {}}) == 1);                      // a 0-dim param has one element
  CHECK(intersect(Box{{}, {}}, Box{{}, {}}));
  CHECK(offset_within(Box{{2, 3}, {2, 3}}, second) == Shape{0, 0});
  CHECK(offset_within(Box{{2, 3}, {2, 3}}, first) == Shape{2, 3});
}

namespace {

// Boxes of an uneven 2-D grid: `rows` and `cols` cut points.
std::vector<ShardClassBox> grid(const std::vector<std::int64_t>& rows,
                                const std::vector<std::int64_t>& cols) {
  std::vector<ShardClassBox> out;
  std::int64_t rank = 0;
  for (std::size_t i = 0; i + 1 < rows.size(); ++i)
    for (std::size_t j = 0; j + 1 < cols.size(); ++j)
      out.push_back({Box{{rows[i], cols[j]}, {rows[i + 1] - rows[i], cols[j + 1] - cols[j]}},
                     RankSet::from_sorted({rank++}),
                     {}});
  return out;
}

std::vector<Box> boxes_of(const std::vector<ShardClassBox>& classes) {
  std::vector<Box> out;
  for (const auto& shard_class : classes) out.push_back(shard_class.box);
  return out;
}

std::vector<std::pair<std::size_t, Box>> collect(const BoxIndex& idx, const Box& box, bool brute) {
  std::vector<std::pair<std::size_t, Box>> out;
  const auto add = [&](std::size_t i, const Box& met) { out.emplace_back(i, met); };
  if (brute) {
    idx.for_each_meeting_brute(box, add);
  } else {
    idx.for_each_meeting(box, add);
  }
  std::sort(out.begin(), out.end(),
            [](const auto& left, const auto& right) { return left.first < right.first; });
  return out;
}

}  // namespace

TEST_CASE("the grid index finds exactly the boxes brute force finds") {
  auto classes = grid({0, 3, 3, 7, 10}, {0, 5, 6, 16});  // an empty row band [3, 3)
  classes.push_back({Box{{10, 0}, {0, 16}}, RankSet::from_sorted({99}), {}});  // empty shard
  const BoxIndex idx(boxes_of(classes));
  CHECK(idx.is_grid());
  std::mt19937 rng(7);
  for (int t = 0; t < 500; ++t) {
    std::uniform_int_distribution<std::int64_t> r0(0, 9), c0(0, 15);
    const std::int64_t row = r0(rng), col = c0(rng);
    std::uniform_int_distribution<std::int64_t> rl(1, 10 - row), cl(1, 16 - col);
    const Box query{{row, col}, {rl(rng), cl(rng)}};
    const auto fast = collect(idx, query, false);
    CHECK(fast == collect(idx, query, true));
    std::int64_t covered = 0;
    for (const auto& [i, m] : fast) covered += numel(m);
    CHECK(covered == numel(query));
  }
}

TEST_CASE("boxes that are not a grid fall back to testing every class") {
  // Two rows split at different columns: not a product of per-dim intervals.
  std::vector<ShardClassBox> classes{{Box{{0, 0}, {1, 3}}, RankSet::from_sorted({0}), {}},
                                     {Box{{0, 3}, {1, 5}}, RankSet::from_sorted({1}), {}},
                                     {Box{{1, 0}, {1, 5}}, RankSet::from_sorted({2}), {}},
                                     {Box{{1, 5}, {1, 3}}, RankSet::from_sorted({3}), {}}};
  const BoxIndex idx(boxes_of(classes));
  CHECK_FALSE(idx.is_grid());
  const Box query{{0, 2}, {2, 4}};
  const auto got = collect(idx, query, false);
  REQUIRE(got.size() == 4);
  CHECK(got[0].second == Box{{0, 2}, {1, 1}});
  CHECK(got[1].second == Box{{0, 3}, {1, 3}});
  CHECK(got[2].second == Box{{1, 2}, {1, 3}});
  CHECK(got[3].second == Box{{1, 5}, {1, 1}});
}
