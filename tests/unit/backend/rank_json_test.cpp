#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include "backend/backend.hpp"
#include "plan_fixture.hpp"

using namespace shardc;
using nlohmann::json;

TEST_CASE("rank file of a stage-0 rank holds its stage's params only") {
  const auto j = json::parse(render_rank_json(test::small_plan(), 1));
  CHECK(j["format"] == "shardc.rank/v1");
  CHECK(j["rank"] == 1);
  CHECK(j["world_size"] == 4);
  CHECK(j["stage"] == 0);
  CHECK(j["coords"]["dense"] == json{{"pp", 0}, {"tp", 1}});
  CHECK(j["coords"]["expert"].is_null());
  REQUIRE(j["params"].size() == 2);
  const auto& embed = j["params"][0];
  CHECK(embed["local_shape"] == json{2, 3});
  CHECK(embed["global_offset"] == json{3, 0});
  CHECK(embed["padded_shape"] == json{2, 3});
  CHECK(embed["numel"] == 6);
  CHECK(embed["bytes"] == 12);
  CHECK(j["params"][1]["alias_of"] == "embed");
  CHECK(j["buffers"] == json::array());
}

TEST_CASE("rank totals count a same-rank alias once") {
  const auto j = json::parse(render_rank_json(test::small_plan(), 0));
  CHECK(j["totals"]["param_bytes"] == 18);
  CHECK(j["totals"]["padded_param_bytes"] == 18);
  CHECK(j["totals"]["num_params"] == 1);
  // The memory report counts the alias once too (params at the padded shape).
  CHECK(j["memory"]["params"] == j["totals"]["padded_param_bytes"]);
}

TEST_CASE("a tie across stages is a counted copy, not an alias") {
  const auto j = json::parse(render_rank_json(test::small_plan(), 2));
  REQUIRE(j["params"].size() == 2);
  const auto& head = j["params"][1];
  CHECK(head["name"] == "head");
  CHECK(head["alias_of"].is_null());
  CHECK(head["tied_copy_of"] == "embed");
  CHECK(j["totals"]["param_bytes"] == 12 + 18);
  CHECK(j["totals"]["num_params"] == 2);
}

TEST_CASE("rank file names are zero-padded to the width of world_size - 1") {
  CHECK(rank_file_name(0, 1) == "rank-0.json");
  CHECK(rank_file_name(7, 8) == "rank-7.json");
  CHECK(rank_file_name(3, 10) == "rank-3.json");
  CHECK(rank_file_name(3, 11) == "rank-03.json");
  CHECK(rank_file_name(17, 64) == "rank-17.json");
  CHECK(rank_file_name(5, 16384) == "rank-00005.json");
  CHECK(rank_file_name(16383, 16384) == "rank-16383.json");
}
