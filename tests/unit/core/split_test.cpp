#include <doctest/doctest.h>

#include "core/plan.hpp"

using namespace shardc;

namespace {
std::vector<std::int64_t> sizes(std::int64_t len, std::int64_t ways, SplitRule rule) {
  std::vector<std::int64_t> out;
  for (std::int64_t k = 0; k < ways; ++k) out.push_back(split_piece(len, ways, k, rule).size);
  return out;
}
std::vector<std::int64_t> starts(std::int64_t len, std::int64_t ways, SplitRule rule) {
  std::vector<std::int64_t> out;
  for (std::int64_t k = 0; k < ways; ++k) out.push_back(split_piece(len, ways, k, rule).start);
  return out;
}
using V = std::vector<std::int64_t>;
}  // namespace

TEST_CASE("chunk split leaves trailing ranks empty (torch.chunk)") {
  CHECK(sizes(5, 4, SplitRule::Chunk) == V{2, 2, 1, 0});
  CHECK(sizes(10, 4, SplitRule::Chunk) == V{3, 3, 3, 1});
  CHECK(sizes(6, 4, SplitRule::Chunk) == V{2, 2, 2, 0});
  CHECK(starts(5, 4, SplitRule::Chunk) == V{0, 2, 4, 5});
  CHECK(sizes(0, 4, SplitRule::Chunk) == V{0, 0, 0, 0});
  CHECK(sizes(3, 4, SplitRule::Chunk) == V{1, 1, 1, 0});
}

TEST_CASE("balanced split gives the first L mod n ranks one more (hyper-parallel)") {
  CHECK(sizes(10, 4, SplitRule::Balanced) == V{3, 3, 2, 2});
  CHECK(starts(10, 4, SplitRule::Balanced) == V{0, 3, 6, 8});
  CHECK(sizes(6, 4, SplitRule::Balanced) == V{2, 2, 1, 1});
  CHECK(sizes(3, 4, SplitRule::Balanced) == V{1, 1, 1, 0});
}

TEST_CASE("pieces of every rule tile the dim exactly") {
  for (auto rule : {SplitRule::Chunk, SplitRule::Balanced}) {
    for (std::int64_t len = 0; len < 40; ++len) {
      for (std::int64_t n = 1; n < 12; ++n) {
        std::int64_t next = 0;
        for (std::int64_t k = 0; k < n; ++k) {
          Piece piece = split_piece(len, n, k, rule);
          if (piece.size > 0) {
            CHECK(piece.start == next);
            next += piece.size;
          }
        }
        CHECK(next == len);
      }
    }
  }
}
