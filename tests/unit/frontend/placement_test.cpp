// Tests for src/frontend/placement.cpp (contract §4 "Placements").
#include <doctest/doctest.h>

#include "frontend/frontend.hpp"

using shardc::parse_placement;
using shardc::Placement;

TEST_CASE("torch placement spellings parse") {
  SUBCASE("Shard with positive, negative and spaced dims") {
    for (const auto& entry :
         {std::pair{"Shard(0)", 0}, std::pair{"Shard(-1)", -1}, std::pair{"Shard( 2 )", 2},
          std::pair{" Shard(1) ", 1}, std::pair{"Shard(dim=1)", 1}}) {
      // Plain locals, not structured bindings: clang 14 cannot capture those (CAPTURE).
      const char* text = entry.first;
      const int dim = entry.second;
      CAPTURE(text);
      std::optional<Placement> placement = parse_placement(text);
      REQUIRE(placement.has_value());
      CHECK(placement->kind == Placement::Kind::Shard);
      CHECK(placement->dim == dim);
    }
  }
  SUBCASE("Replicate") {
    REQUIRE(parse_placement("Replicate()").has_value());
    CHECK(parse_placement("Replicate()")->kind == Placement::Kind::Replicate);
    CHECK(parse_placement("Replicate()")->text == "Replicate()");
  }
  SUBCASE("Partial with and without a reduce op") {
    CHECK(parse_placement("Partial()")->reduce_op == "sum");
    CHECK(parse_placement("Partial(avg)")->reduce_op == "avg");
    CHECK(parse_placement("Partial(max)")->kind == Placement::Kind::Partial);
    CHECK(parse_placement("Partial(\"min\")")->reduce_op == "min");
  }
}

TEST_CASE("hyper-parallel DSL placement spellings parse") {
  CHECK(parse_placement("shard(0)")->kind == Placement::Kind::Shard);
  CHECK(parse_placement("shard(-2)")->dim == -2);
  CHECK(parse_placement("replicate")->kind == Placement::Kind::Replicate);
  CHECK(parse_placement("partial")->kind == Placement::Kind::Partial);
  CHECK(parse_placement("partial")->reduce_op == "sum");
}

TEST_CASE("malformed placements are rejected") {
  for (const char* text : {"", "Shard", "Shard()", "Shard(x)", "Shard(1.5)", "Shard(0", "Shard(0))",
                           "Shard(99999999999)", "Replicate(0)", "Partial(prod)", "StridedShard(0)",
                           "shard 0", "S(0)"}) {
    CAPTURE(text);
    CHECK_FALSE(parse_placement(text).has_value());
  }
}
