// Hostile but well-formed inputs: the planner's work stays bounded (each
// case once hung or allocated gigabytes; see tests/bad/hostile_* and
// tests/bad/heads_huge_counts).
#include <doctest/doctest.h>

#include <string>

#include "../frontend/frontend_test_util.hpp"
#include "planner/planner.hpp"

using shardc::test::model_from;
using shardc::test::recipe_from;

namespace {

struct Planned {
  shardc::DiagnosticSink sink;
  bool ok = false;
  [[nodiscard]] const shardc::Diagnostic* find(const std::string& code) const {
    for (const auto& d : sink.items())
      if (code_name(d.code) == code) return &d;
    return nullptr;
  }
};

Planned plan_of(const std::string& model, const std::string& recipe) {
  auto parsed_model = model_from(model);
  auto parsed_recipe = recipe_from(recipe);
  REQUIRE_MESSAGE(parsed_model.model.has_value(), parsed_model.all_messages());
  REQUIRE_MESSAGE(parsed_recipe.recipe.has_value(), parsed_recipe.all_messages());
  Planned planned;
  planned.ok =
      shardc::build_plan(*parsed_model.model, *parsed_recipe.recipe, planned.sink).has_value();
  return planned;
}

constexpr const char* kExperts =
    "params:\n  - repeat: {E: [0, 3]}\n    params:\n"
    "      - {name: \"layers.0.experts.{E}.w\", shape: [4, 4]}\n  - {name: big, shape: [4]}\n";

}  // namespace

TEST_CASE("E-HEADS with head counts near 2^62 lists few tp sizes, quickly") {
  auto planned = plan_of(
      "attributes: {num_attention_heads: 4611686018427387904}\n"
      "params:\n  - {name: l.q_proj.weight, shape: [6, 4]}\n",
      "mesh: [{name: tp, size: 3}]\nrules:\n  - {match: \"**\", placements: {tp: Shard(0)}}\n");
  CHECK_FALSE(planned.ok);
  const auto* d = planned.find("E-HEADS");
  REQUIRE(d != nullptr);
  CHECK(d->hint.find("1, 2, 4, 8") != std::string::npos);
  CHECK(d->hint.find("...") != std::string::npos);
  CHECK(d->hint.size() < 2000);
}

TEST_CASE("W-EXPERTS on a 2^30-way ep lists at most 256 coordinates") {
  auto planned = plan_of(kExperts,
                         "mesh: [{name: dp, size: 1073741824}]\n"
                         "expert_mesh: [{name: ep, size: 1073741824}]\n"
                         "experts:\n  - match: \"layers.{L}.experts.{E}.{P}\"\n"
                         "    stack: \"layers.{L}.experts.{P}\"\n    placements: {ep: Shard(0)}\n"
                         "rules:\n  - {match: \"**\", placements: {}}\n");
  CHECK(planned.ok);
  const auto* d = planned.find("W-EXPERTS");
  REQUIRE(d != nullptr);
  CHECK(d->ranges.size() == 256);
  CHECK(d->hint.find("more)") != std::string::npos);
}

TEST_CASE("the W-STRIDED check is skipped with a note past its budget") {
  auto planned = plan_of(kExperts,
                         "mesh: [{name: dp, size: 32768}, {name: tp, size: 65535}]\n"
                         "rules:\n  - {match: \"**\", placements: {tp: Shard(0)}}\n"
                         "fsdp: {shard: dp}\n");
  CHECK(planned.ok);
  const auto* d = planned.find("W-STRIDED");
  REQUIRE(d != nullptr);
  CHECK(d->severity == shardc::Severity::Note);
  CHECK(planned.sink.warning_count() == 0);
}

TEST_CASE("W-STRIDED still fires on small meshes (7 rows, dp_shard 3 x tp 2)") {
  auto planned = plan_of("params:\n  - {name: w, shape: [7]}\n",
                         "mesh: [{name: dp_shard, size: 3}, {name: tp, size: 2}]\n"
                         "rules:\n  - {match: \"**\", placements: {tp: Shard(0)}}\n"
                         "fsdp: {shard: dp_shard}\n");
  const auto* d = planned.find("W-STRIDED");
  REQUIRE(d != nullptr);
  CHECK(d->severity == shardc::Severity::Warning);
}
