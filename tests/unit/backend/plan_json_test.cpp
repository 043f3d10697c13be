#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include "backend/backend.hpp"
#include "plan_fixture.hpp"

using namespace shardc;
using nlohmann::json;

namespace {

std::vector<std::string> keys_of(const nlohmann::ordered_json& j) {
  std::vector<std::string> out;
  for (const auto& [key, value] : j.items()) out.push_back(key);
  return out;
}

std::string render(const Plan& plan) { return render_plan_json(plan, rank_bytes(plan)); }

}  // namespace

TEST_CASE("plan.json has the contract §6.1 top-level keys in order") {
  const auto j = nlohmann::ordered_json::parse(render(test::small_plan()));
  CHECK(keys_of(j) == std::vector<std::string>{"format", "generator", "inputs", "world_size",
                                               "meshes", "pipeline", "params", "tie_sync_groups",
                                               "diagnostics", "summary"});
  CHECK(j["format"] == "shardc.plan/v1");
  CHECK(j["generator"]["name"] == "shardc");
  CHECK(j["inputs"]["model"]["name"] == "tiny");
  CHECK(j["inputs"]["recipe"]["sha256"] == "bb");
  CHECK(j["meshes"]["dense"][1] == nlohmann::ordered_json{{"name", "tp"}, {"size", 2}});
  CHECK(j["meshes"]["expert"].is_null());
  CHECK(j["pipeline"] == nlohmann::ordered_json{{"axis", "pp"}, {"num_stages", 2}});
}

TEST_CASE("plan.json lists every param with placements, rule, alias and shards") {
  const auto j = json::parse(render(test::small_plan()));
  REQUIRE(j["params"].size() == 4);
  const auto& embed = j["params"][0];
  CHECK(embed["placements"] == json{"Replicate()", "Shard(0)"});
  CHECK(embed["rule"] == json{{"kind", "rule"}, {"index", 0}, {"match", "**"}});
  CHECK(embed["alias_of"].is_null());
  CHECK(embed["stacked_from"].is_null());
  CHECK(embed["padded"] == false);
  REQUIRE(embed["shards"].size() == 2);
  CHECK(embed["shards"][0]["local_shape"] == json{3, 3});
  CHECK(embed["shards"][1]["global_offset"] == json{3, 0});
  CHECK(j["params"][3]["alias_of"] == "embed");
  CHECK(j["tie_sync_groups"][0]["groups"] == json{{0, 2}, {1, 3}});
}

TEST_CASE("plan.json records stacked sources as count, first, last and the list") {
  Plan plan = test::small_plan();
  plan.params[2].stacked_from = {"e.0.w", "e.1.w", "e.2.w"};
  plan.params[2].rule = {RuleRef::Kind::Experts, 0, "e.{E}.w"};
  const auto j = json::parse(render(plan));
  const auto& stacked = j["params"][2]["stacked_from"];
  CHECK(stacked["count"] == 3);
  CHECK(stacked["first"] == "e.0.w");
  CHECK(stacked["last"] == "e.2.w");
  CHECK(stacked["sources"].size() == 3);
  CHECK(j["params"][2]["rule"]["kind"] == "experts");
  CHECK(j["summary"]["num_stacked"] == 1);
}

TEST_CASE("plan.json diagnostics carry location and expert ranges") {
  const auto j = json::parse(render(test::small_plan()));
  REQUIRE(j["diagnostics"].size() == 1);
  const auto& d = j["diagnostics"][0];
  CHECK(d["code"] == "W-EXPERTS");
  CHECK(d["severity"] == "warning");
  CHECK(d["line"] == 3);
  CHECK(d["expert_ranges"] == json{{0, 4}, {4, 8}});
}

TEST_CASE("plan.json summary counts aliases once") {
  const auto j = json::parse(render(test::small_plan()));
  const auto& summary = j["summary"];
  CHECK(summary["num_params"] == 4);
  CHECK(summary["param_count"] == 15 + 3);
  CHECK(summary["param_bytes"] == 15 * 2 + 3 * 4);
  CHECK(summary["per_rank_param_bytes"].contains("median"));
  CHECK(summary["per_rank_param_bytes"]["max_ranks"].is_string());
}

TEST_CASE("plan.json is byte-identical across renders") {
  const Plan plan = test::small_plan();
  CHECK(render(plan) == render(plan));
}
