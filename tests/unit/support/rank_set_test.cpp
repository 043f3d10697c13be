#include <doctest/doctest.h>

#include "support/rank_set.hpp"

using namespace shardc;

TEST_CASE("rank sets print in the compact range syntax with steps") {
  CHECK(RankSet::from_sorted({0, 1, 2, 3, 4, 5, 6, 7, 16, 20, 21, 22, 23}).to_string() ==
        "0-7,16,20-23");
  CHECK(RankSet::from_sorted({3, 11, 19, 27}).to_string() == "3-27:8");
  CHECK(RankSet::from_sorted({0, 5}).to_string() == "0,5");
  CHECK(RankSet::from_sorted({4}).to_string() == "4");
}

TEST_CASE("structural progressions print like the sorted list") {
  auto blocks = RankSet::from_progressions({{0, 1, 4}, {8, 1, 4}});
  CHECK(blocks.to_string() == RankSet::from_sorted({0, 1, 2, 3, 8, 9, 10, 11}).to_string());
  auto strided = RankSet::from_progressions({{0, 5, 2}, {10, 5, 2}});
  CHECK(strided.to_string() == RankSet::from_sorted({0, 5, 10, 15}).to_string());
  auto evens = RankSet::from_progressions({{0, 2, 3}, {6, 2, 3}});
  CHECK(evens.to_string() == "0-10:2");
}

TEST_CASE("rank sets parse, round-trip and reject bad input") {
  std::string err;
  auto set = RankSet::parse("0-7,16,20-23", 64, err);
  REQUIRE(set);
  CHECK(set->size() == 13);
  CHECK(set->contains(16));
  CHECK_FALSE(set->contains(17));
  CHECK(set->to_string() == "0-7,16,20-23");
  auto stepped = RankSet::parse("3-99:8", 0, err);
  REQUIRE(stepped);
  CHECK(stepped->to_string() == "3-99:8");
  CHECK(stepped->contains(99));
  CHECK_FALSE(stepped->contains(98));
  CHECK_FALSE(RankSet::parse("7-3", 64, err));
  CHECK_FALSE(RankSet::parse("64", 64, err));
  CHECK_FALSE(RankSet::parse("a", 64, err));
  CHECK_FALSE(RankSet::parse("", 64, err));
  CHECK_FALSE(RankSet::parse("0-9:4", 64, err));
  CHECK_FALSE(RankSet::parse("-1", 64, err));
}

TEST_CASE("union of rank sets") {
  auto low = RankSet::from_sorted({1, 2, 3});
  auto high = RankSet::from_sorted({5, 6, 7});
  CHECK(low.unite(high).to_string() == "1-3,5-7");
}

TEST_CASE("group_closure spans the sub-mesh of every stage's axes") {
  using V = std::vector<std::int64_t>;
  // dp 4 x tp 2 (rank = 2 dp + tp): rank 3's tp group {2, 3}, its dp group {1, 3, 5, 7}.
  CHECK(shardc::group_closure(3, {{2, 3}, {1, 3, 5, 7}}) == V{0, 1, 2, 3, 4, 5, 6, 7});
  CHECK(shardc::group_closure(3, {{1, 3, 5, 7}}) == V{1, 3, 5, 7});
  CHECK(shardc::group_closure(3, {}) == V{3});
}

TEST_CASE("group_closure counts a repeated stage (another batch) once") {
  using V = std::vector<std::int64_t>;
  CHECK(shardc::group_closure(3, {{2, 3}, {1, 3, 5, 7}, {2, 3}, {1, 3, 5, 7}}) ==
        V{0, 1, 2, 3, 4, 5, 6, 7});
}

TEST_CASE("ordered rank lists keep their order and round-trip") {
  using V = std::vector<std::int64_t>;
  std::string err;
  const V group{4096, 4104, 4112, 4120};
  CHECK(rank_list_text(group) == "4096-4120:8");
  CHECK(rank_list_text({0, 1}) == "0,1");
  CHECK(rank_list_text({8, 0, 9}) == "8,0,9");  // order kept, never sorted
  CHECK(rank_list_text({5, 6, 7, 0, 2, 4, 4}) == "5-7,0-4:2,4");
  CHECK(rank_list_text({}).empty());
  for (const V& ranks : {group, V{8, 0, 9}, V{5, 6, 7, 0, 2, 4, 4}, V{3}, V{}}) {
    const auto back = parse_rank_list(rank_list_text(ranks), err);
    REQUIRE(back);
    CHECK(*back == ranks);
  }
  CHECK_FALSE(parse_rank_list("0-", err));
  CHECK_FALSE(parse_rank_list("7-3", err));
  CHECK_FALSE(parse_rank_list("0-16777216", err));  // more than 2^24 ranks
}

TEST_CASE("ranks at and past the largest world size are refused before any count (no int64 wrap)") {
  // hostile/ub_signed_overflow_readers: `(b - a) / stride + 1` with b = INT64_MAX was UB.
  std::string err;
  const auto last = RankSet::parse("2147483646", 0, err);  // kMaxWorld - 1, the largest rank
  REQUIRE(last);
  CHECK(last->to_string() == "2147483646");
  CHECK_FALSE(RankSet::parse("2147483647", 0, err));
  CHECK(err.find("out of range") != std::string::npos);
  for (const char* text : {"0-9223372036854775807", "9223372036854775806-9223372036854775807",
                           "0-9223372036854775807:2", "0-9223372036854775808",
                           "1-9223372036854775807:9223372036854775807", "0,2147483647"}) {
    CAPTURE(text);
    CHECK_FALSE(RankSet::parse(text, 0, err));
    CHECK_FALSE(RankSet::parse(text, 8, err));
    CHECK_FALSE(parse_rank_list(text, err));
  }
  CHECK(parse_rank_list("2147483640-2147483646:3", err) ==
        std::vector<std::int64_t>{2147483640, 2147483643, 2147483646});
  CHECK_FALSE(parse_rank_list("2147483640-2147483647", err));
}
