// Tests for the recipe reader (src/frontend/recipe_*.cpp, contract §4, §5.8).
#include <doctest/doctest.h>

#include "frontend_test_util.hpp"

using namespace shardc;
using shardc::test::check_error_at;
using shardc::test::recipe_from;

namespace {

constexpr const char* kFull = R"(format: shardc.recipe/v1
mesh:
  - {name: pp, size: 2}
  - {name: dp_replicate, size: 2}
  - {name: dp_shard, size: 4}
  - {name: tp, size: 8}
expert_mesh:
  - {name: pp, size: 2}
  - {name: dp_replicate, size: 2}
  - {name: efsdp, size: 4}
  - {name: ep, size: 8}
uneven: balanced
rules:
  - match: model.embed_tokens.weight
    placements: {tp: Shard(0)}
  - match: ["model.layers.*.self_attn.[qkv]_proj.weight", "**.qkv.weight"]
    placements: {tp: Shard(0), dp_shard: replicate}
    uneven: even
  - match: "**.*norm.weight"
    placements: {}
experts:
  - match: "model.layers.{L}.mlp.experts.{E}.{P}.weight"
    stack: "model.layers.{L}.mlp.experts.{P}"
    placements: {ep: Shard(0)}
    uneven: chunk
tied: [[model.embed_tokens.weight, lm_head.weight]]
pipeline:
  axis: pp
  stages: [["model.embed_tokens.*", "model.layers.0.**"], "**"]
fsdp:
  shard: [dp_shard]
  replicate: dp_replicate
  expert_shard: efsdp
  dim: 0
  expert_dim: auto
buffers:
  - {kind: muon_allgather, alignment_bytes: 256}
  - {kind: fsdp2_allgather, units: ["model.layers.{i}", "**"]}
)";

}  // namespace

TEST_CASE("a full recipe parses into typed values") {
  auto parsed = recipe_from(kFull);
  INFO(parsed.all_messages());
  REQUIRE(parsed.recipe.has_value());
  const Recipe& rc = *parsed.recipe;
  REQUIRE(rc.mesh.axes.size() == 4);
  CHECK(rc.mesh.axes[3].name == "tp");
  CHECK(rc.mesh.axes[3].size == 8);
  CHECK(rc.mesh.find("dp_shard") == 2);
  CHECK(rc.mesh.find("ep") == -1);
  REQUIRE(rc.expert_mesh.has_value());
  CHECK(rc.expert_mesh->find("ep") == 3);
  CHECK(rc.uneven == SplitRule::Balanced);
  REQUIRE(rc.rules.size() == 3);
  CHECK(rc.rules[1].match.size() == 2);
  CHECK(rc.rules[1].match_text() == "model.layers.*.self_attn.[qkv]_proj.weight, **.qkv.weight");
  CHECK(rc.rules[1].uneven == SplitRule::Even);
  CHECK_FALSE(rc.rules[0].uneven.has_value());
  REQUIRE(rc.rules[1].placements.size() == 2);
  CHECK(rc.rules[1].placements[1].axis == "dp_shard");
  CHECK(rc.rules[1].placements[1].placement.kind == Placement::Kind::Replicate);
  CHECK(rc.rules[1].loc.line == 16);
  CHECK(rc.rules[2].placements.empty());
  REQUIRE(rc.experts.size() == 1);
  CHECK(rc.experts[0].stack == "model.layers.{L}.mlp.experts.{P}");
  CHECK(rc.experts[0].uneven == SplitRule::Chunk);
  CHECK(rc.tied.mode == TiedMode::Explicit);
  REQUIRE(rc.tied.pairs.size() == 1);
  CHECK(rc.tied.pairs[0].second == "lm_head.weight");
  REQUIRE(rc.pipeline.has_value());
  CHECK_FALSE(rc.pipeline->auto_stages);
  REQUIRE(rc.pipeline->stages.size() == 2);
  CHECK(rc.pipeline->stages[0].size() == 2);
  CHECK(rc.pipeline->stages[1][0].text() == "**");
  REQUIRE(rc.fsdp.has_value());
  CHECK(rc.fsdp->shard == std::vector<std::string>{"dp_shard"});
  CHECK(rc.fsdp->replicate == "dp_replicate");
  CHECK(rc.fsdp->expert_shard == std::vector<std::string>{"efsdp"});
  CHECK(rc.fsdp->expert_dim == ExpertDim::Auto);
  REQUIRE(rc.buffers.size() == 2);
  CHECK(rc.buffers[0].kind == BufferKind::MuonAllGather);
  CHECK(rc.buffers[0].alignment_bytes == 256);
  CHECK(rc.buffers[0].max_batch_numel == 536870912);
  CHECK(rc.buffers[1].kind == BufferKind::Fsdp2AllGather);
  CHECK(rc.buffers[1].units.size() == 2);
  CHECK(rc.sha256.size() == 64);
}

TEST_CASE("recipe defaults: tied auto, chunk, no pipeline or fsdp") {
  auto parsed = recipe_from(
      "format: shardc.recipe/v1\nmesh: [{name: tp, size: 2}]\n"
      "rules: [{match: \"**\", placements: {}}]\n");
  REQUIRE(parsed.recipe.has_value());
  CHECK(parsed.recipe->tied.mode == TiedMode::Auto);
  CHECK(parsed.recipe->uneven == SplitRule::Chunk);
  CHECK_FALSE(parsed.recipe->pipeline.has_value());
  CHECK_FALSE(parsed.recipe->fsdp.has_value());
  CHECK_FALSE(parsed.recipe->expert_mesh.has_value());
  SUBCASE("tied none and pipeline auto") {
    auto r2 = recipe_from("mesh: [{name: pp, size: 2}]\ntied: none\npipeline: {stages: auto}\n");
    REQUIRE(r2.recipe.has_value());
    CHECK(r2.recipe->tied.mode == TiedMode::None);
    CHECK(r2.recipe->pipeline->auto_stages);
    CHECK(r2.recipe->pipeline->axis == "pp");
  }
  SUBCASE("fsdp with several shard axes and expert_dim 1") {
    auto r3 = recipe_from(
        "mesh: [{name: a, size: 2}, {name: b, size: 2}]\n"
        "fsdp: {shard: [a, b], dim: 1, expert_dim: 1, expert_shard: [a]}\n");
    REQUIRE(r3.recipe.has_value());
    CHECK(r3.recipe->fsdp->shard == std::vector<std::string>{"a", "b"});
    CHECK(r3.recipe->fsdp->dim == 1);
    CHECK(r3.recipe->fsdp->expert_dim == ExpertDim::One);
  }
}

TEST_CASE("recipe errors carry a code, a location and a hint") {
  SUBCASE("unknown top-level key") {
    auto parsed = recipe_from("mesh: [{name: tp, size: 2}]\nrule: []\n");
    check_error_at(parsed, "E-RECIPE", 2, 1);
    CHECK(parsed.find("E-RECIPE")->hint.find("rules") != std::string::npos);
  }
  SUBCASE("unknown key in a rule") {
    auto parsed = recipe_from(
        "mesh: [{name: tp, size: 2}]\nrules:\n  - match: w\n"
        "    placements: {}\n    placement: {}\n");
    check_error_at(parsed, "E-RECIPE", 5, 5);
    CHECK(parsed.find("E-RECIPE")->hint ==
          "valid keys: match, placements, uneven, unit, packed, vocab_padding, shard_order");
  }
  SUBCASE("unparseable placement") {
    auto parsed = recipe_from(
        "mesh: [{name: tp, size: 2}]\nrules:\n"
        "  - {match: w, placements: {tp: Shard(x)}}\n");
    check_error_at(parsed, "E-PLACEMENT", 3, 33);
    CHECK(parsed.find("E-PLACEMENT")->hint.find("Replicate()") != std::string::npos);
  }
  SUBCASE("bad enum value lists the valid ones") {
    auto parsed = recipe_from("mesh: [{name: tp, size: 2}]\nuneven: ragged\n");
    check_error_at(parsed, "E-RECIPE", 2, 9);
    CHECK(parsed.find("E-RECIPE")->hint.find("balanced") != std::string::npos);
  }
  SUBCASE("axis size below one is meaning: the planner's E-MESH, not a parse error") {
    auto parsed = recipe_from("mesh:\n  - {name: tp, size: 0}\n");
    REQUIRE(parsed.recipe.has_value());
    CHECK(parsed.recipe->mesh.axes[0].size_loc.line == 2);
    CHECK(parsed.recipe->mesh.axes[0].size_loc.column == 22);
  }
  SUBCASE("duplicate axis name is the planner's E-MESH too") {
    auto parsed = recipe_from("mesh:\n  - {name: tp, size: 2}\n  - {name: tp, size: 4}\n");
    REQUIRE(parsed.recipe.has_value());
    CHECK(parsed.recipe->mesh.axes[1].loc.line == 3);
  }
  SUBCASE("bad pattern") {
    auto parsed =
        recipe_from("mesh: [{name: tp, size: 2}]\nrules:\n  - {match: \"a..b\", placements: {}}\n");
    check_error_at(parsed, "E-RECIPE", 3, 13);
  }
  SUBCASE("experts match without {E}") {
    auto parsed = recipe_from(
        "mesh: [{name: ep, size: 2}]\nexperts:\n"
        "  - {match: \"l.{L}.experts.*.w\", stack: \"l.{L}.w\", placements: {}}\n");
    check_error_at(parsed, "E-RECIPE", 3, 13);
  }
  SUBCASE("experts stack using an unknown capture") {
    auto parsed = recipe_from(
        "mesh: [{name: ep, size: 2}]\nexperts:\n"
        "  - {match: \"l.{E}.w\", stack: \"l.{Q}.w\", placements: {}}\n");
    CHECK(parsed.sink.has_code(DiagCode::ERecipe));
  }
  SUBCASE("alignment must be positive") {
    auto parsed = recipe_from(
        "mesh: [{name: tp, size: 2}]\nbuffers:\n"
        "  - {kind: muon_allgather, alignment_bytes: 0}\n");
    check_error_at(parsed, "E-RECIPE", 3, 45);
  }
  SUBCASE("unknown buffer kind") {
    auto parsed = recipe_from("mesh: [{name: tp, size: 2}]\nbuffers:\n  - {kind: zero3}\n");
    check_error_at(parsed, "E-RECIPE", 3, 12);
    CHECK(parsed.find("E-RECIPE")->hint.find("fsdp2_allgather") != std::string::npos);
  }
  SUBCASE("key valid for the other buffer kind") {
    auto parsed = recipe_from(
        "mesh: [{name: tp, size: 2}]\nbuffers:\n"
        "  - {kind: fsdp2_allgather, units: [\"**\"], alignment_bytes: 8}\n");
    check_error_at(parsed, "E-RECIPE", 3, 44);
  }
  SUBCASE("bad expert_dim and tied") {
    auto parsed = recipe_from(
        "mesh: [{name: a, size: 2}]\nfsdp: {shard: a, expert_dim: 2}\n"
        "tied: sometimes\n");
    CHECK(parsed.sink.error_count() == 2);
  }
  SUBCASE("missing mesh") { check_error_at(recipe_from("rules: []\n"), "E-RECIPE", 1, 1); }
}

TEST_CASE("several recipe errors are reported in one run") {
  auto parsed = recipe_from(R"(format: shardc.recipe/v1
mesh:
  - {name: tp, size: -1}
  - {name: dp, size: 2, colour: red}
rules:
  - {match: "[a", placements: {tp: Shard(0)}}
  - {match: w, placements: {tp: Sharded(0)}}
  - {match: v, placements: {tp: Shard(0)}, uneven: odd}
pipeline: {axis: pp, stages: sometimes}
)");
  CHECK_FALSE(parsed.recipe.has_value());
  CHECK_FALSE(parsed.sink.has_code(DiagCode::EMesh));  // the size is the planner's check
  CHECK(parsed.sink.has_code(DiagCode::EPlacement));
  CHECK(parsed.sink.error_count() == 5);
}
