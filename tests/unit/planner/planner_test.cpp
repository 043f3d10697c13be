#include <doctest/doctest.h>

#include "fixtures.hpp"

using namespace shardc;
using namespace shardc::test;
using V = std::vector<std::int64_t>;

TEST_CASE("nested same-dim shards follow DTensor order with the DCP sentinel") {
  Model model;
  model.params = {param("a5", {5}), param("a2", {2}), param("a10", {10})};
  Recipe recipe;
  recipe.mesh = mesh({{"dp", 2}, {"tp", 4}});
  recipe.rules = {rule("*", {{"dp", shard(0)}, {"tp", shard(0)}})};
  DiagnosticSink sink;
  auto plan = build_plan(model, recipe, sink);
  REQUIRE(plan);
  CHECK(sizes(*plan, "a5", 0) == V{1, 1, 1, 0, 1, 1, 0, 0});
  CHECK(offsets(*plan, "a5", 0) == V{0, 1, 2, 5, 3, 4, 5, 5});
  CHECK(offsets(*plan, "a2", 0) == V{0, 2, 2, 2, 1, 2, 2, 2});
  CHECK(sizes(*plan, "a10", 0) == V{2, 2, 1, 0, 2, 2, 1, 0});
}

TEST_CASE("torchtitan Llama-3-8B TP 2 x FSDP 4 tok_embeddings row offsets") {
  Model model;
  model.params = {param("tok_embeddings.weight", {128256, 4096})};
  Recipe recipe;
  recipe.mesh = mesh({{"dp_shard", 4}, {"tp", 2}});
  recipe.rules = {rule("tok_embeddings.weight", {{"tp", shard(0)}})};
  recipe.fsdp = FsdpSpec{};
  recipe.fsdp->shard = {"dp_shard"};
  DiagnosticSink sink;
  auto plan = build_plan(model, recipe, sink);
  REQUIRE(plan);
  CHECK(offsets(*plan, "tok_embeddings.weight", 0) ==
        V{0, 64128, 16032, 80160, 32064, 96192, 48096, 112224});
  CHECK(plan->params[0].placements[0].label() == "_StridedShard(0, sf=2)");
  CHECK(plan->params[0].placements[1].label() == "Shard(0)");
}

TEST_CASE("FSDP pads every shard to the first chunk of the TP-local piece") {
  Model model;
  model.params = {param("e", {50, 8})};
  Recipe recipe;
  recipe.mesh = mesh({{"dp_shard", 2}, {"tp", 4}});
  recipe.rules = {rule("e", {{"tp", shard(0)}})};
  recipe.fsdp = FsdpSpec{};
  recipe.fsdp->shard = {"dp_shard"};
  DiagnosticSink sink;
  auto plan = build_plan(model, recipe, sink);
  REQUIRE(plan);
  CHECK(sizes(*plan, "e", 0) == V{7, 7, 7, 6, 6, 6, 6, 5});
  const auto& param = plan->params[0];
  CHECK(shard_at(param.geometry, mesh_coords(plan->dense, 3)).padded_shape == Shape{6, 8});
  CHECK(shard_at(param.geometry, mesh_coords(plan->dense, 7)).padded_shape == Shape{6, 8});
  CHECK(shard_at(param.geometry, mesh_coords(plan->dense, 0)).padded_shape == Shape{7, 8});
}

TEST_CASE("FSDP on dim 1 that does not divide is E-FSDP") {
  Model model;
  model.params = {param("w", {4, 6})};
  Recipe recipe;
  recipe.mesh = mesh({{"dp_shard", 4}});
  recipe.rules = {rule("**", {})};
  recipe.fsdp = FsdpSpec{};
  recipe.fsdp->shard = {"dp_shard"};
  recipe.fsdp->dim = 1;
  DiagnosticSink sink;
  CHECK_FALSE(build_plan(model, recipe, sink));
  CHECK(sink.has_code(DiagCode::EFsdp));
}

TEST_CASE("distinct shards carry compact replica sets") {
  Model model;
  model.params = {param("w", {16, 4}), param("n", {4})};
  Recipe recipe;
  recipe.mesh = mesh({{"dp", 4}, {"tp", 2}});
  recipe.rules = {rule("w", {{"tp", shard(0)}}), rule("n", {})};
  DiagnosticSink sink;
  auto plan = build_plan(model, recipe, sink);
  REQUIRE(plan);
  auto shards = enumerate_shards(*plan, plan->params[0]);
  REQUIRE(shards.size() == 2);
  CHECK(shards[0].ranks.to_string() == "0-6:2");
  CHECK(shards[1].ranks.to_string() == "1-7:2");
  CHECK(shards[1].geom.global_offset == Shape{8, 0});
  auto norm = enumerate_shards(*plan, plan->params[1]);
  REQUIRE(norm.size() == 1);
  CHECK(norm[0].ranks.to_string() == "0-7");
  auto bytes = rank_bytes(*plan);
  CHECK(bytes.param_bytes[0] == (8 * 4 + 4) * 2);
}

TEST_CASE("empty shards that share the sentinel merge into one class") {
  Model model;
  model.params = {param("a2", {2})};
  Recipe recipe;
  recipe.mesh = mesh({{"dp", 2}, {"tp", 4}});
  recipe.rules = {rule("*", {{"dp", shard(0)}, {"tp", shard(0)}})};
  DiagnosticSink sink;
  auto plan = build_plan(model, recipe, sink);
  REQUIRE(plan);
  auto shards = enumerate_shards(*plan, plan->params[0]);
  REQUIRE(shards.size() == 3);
  CHECK(shards[1].ranks.to_string() == "1-3,5-7");
  CHECK(shards[1].geom.global_offset == Shape{2});
}

TEST_CASE("heads check lists valid tp sizes") {
  Model model;
  model.attributes.num_attention_heads = 28;
  model.attributes.num_key_value_heads = 4;
  model.params = {param("model.layers.0.self_attn.q_proj.weight", {3584, 3584})};
  Recipe recipe;
  recipe.mesh = mesh({{"tp", 8}});
  recipe.rules = {rule("**", {{"tp", shard(0)}})};
  DiagnosticSink sink;
  CHECK_FALSE(build_plan(model, recipe, sink));
  REQUIRE(sink.has_code(DiagCode::EHeads));
  CHECK(sink.items()[0].hint.find("1, 2, 4") != std::string::npos);
}

TEST_CASE("pipeline auto gives extra blocks to earlier stages") {
  Model model;
  model.params.push_back(param("model.embed_tokens.weight", {12, 4}));
  for (int i = 0; i < 5; ++i)
    model.params.push_back(
        param("model.layers." + std::to_string(i) + ".mlp.up_proj.weight", {6, 4}));
  model.params.push_back(param("model.norm.weight", {4}));
  Recipe recipe;
  recipe.mesh = mesh({{"pp", 2}, {"tp", 2}});
  recipe.rules = {rule("**", {})};
  recipe.pipeline = PipelineSpec{};
  recipe.pipeline->axis = "pp";
  DiagnosticSink sink;
  auto plan = build_plan(model, recipe, sink);
  REQUIRE(plan);
  std::vector<int> stages;
  for (const auto& param : plan->params) stages.push_back(param.stage);
  CHECK(stages == std::vector<int>{0, 0, 0, 0, 1, 1, 1});
  CHECK(plan->holds(0, plan->params[0]));
  CHECK_FALSE(plan->holds(2, plan->params[0]));
  auto shards = enumerate_shards(*plan, plan->params[6]);
  REQUIRE(shards.size() == 1);
  CHECK(shards[0].ranks.to_string() == "2,3");
}

TEST_CASE("expert stacking builds [E, ...] params on the expert mesh") {
  Model model;
  for (int e = 0; e < 30; ++e)
    model.params.push_back(param("l.experts." + std::to_string(e) + ".w1.weight", {2, 3}));
  Recipe recipe;
  recipe.mesh = mesh({{"dp", 8}});
  recipe.expert_mesh = mesh({{"ep", 8}});
  ExpertsEntry entry;
  entry.match = pat("l.experts.{E}.{P}.weight");
  entry.stack = "l.experts.{P}";
  entry.placements.push_back({"ep", shard(0), {}});
  recipe.experts.push_back(entry);
  DiagnosticSink sink;
  auto plan = build_plan(model, recipe, sink);
  REQUIRE(plan);
  REQUIRE(plan->params.size() == 1);
  CHECK(plan->params[0].name == "l.experts.w1");
  CHECK(plan->params[0].global_shape == Shape{30, 2, 3});
  CHECK(plan->params[0].stacked_from.size() == 30);
  REQUIRE(sink.has_code(DiagCode::WExperts));
  CHECK(sink.items()[0].ranges.back() == std::pair<std::int64_t, std::int64_t>{28, 30});
}

TEST_CASE("tied ends with different placements are E-TIED naming both") {
  Model model;
  model.params = {param("model.embed_tokens.weight", {16, 4}), param("lm_head.weight", {16, 4})};
  model.attributes.tie_word_embeddings = true;
  Recipe recipe;
  recipe.mesh = mesh({{"tp", 2}});
  recipe.rules = {rule("model.embed_tokens.weight", {{"tp", shard(1)}}),
                  rule("lm_head.weight", {{"tp", shard(0)}})};
  DiagnosticSink sink;
  CHECK_FALSE(build_plan(model, recipe, sink));
  REQUIRE(sink.has_code(DiagCode::ETied));
  const auto& msg = sink.items()[0].message;
  CHECK(msg.find("model.embed_tokens.weight") != std::string::npos);
  CHECK(msg.find("lm_head.weight") != std::string::npos);
}

TEST_CASE("W-STRIDED fires only where the DTensor reading differs") {
  SUBCASE("L=5 over W=2, T=2 agrees") {
    Model model;
    model.params = {param("w", {5})};
    Recipe recipe;
    recipe.mesh = mesh({{"dp_shard", 2}, {"tp", 2}});
    recipe.rules = {rule("w", {{"tp", shard(0)}})};
    recipe.fsdp = FsdpSpec{};
    recipe.fsdp->shard = {"dp_shard"};
    DiagnosticSink sink;
    REQUIRE(build_plan(model, recipe, sink));
    CHECK_FALSE(sink.has_code(DiagCode::WStrided));
  }
  SUBCASE("L=9 over W=4, T=2 differs") {
    Model model;
    model.params = {param("w", {9})};
    Recipe recipe;
    recipe.mesh = mesh({{"dp_shard", 4}, {"tp", 2}});
    recipe.rules = {rule("w", {{"tp", shard(0)}})};
    recipe.fsdp = FsdpSpec{};
    recipe.fsdp->shard = {"dp_shard"};
    DiagnosticSink sink;
    REQUIRE(build_plan(model, recipe, sink));
    CHECK(sink.has_code(DiagCode::WStrided));
  }
}

TEST_CASE("a tie across pipeline stages lists its gradient-sync rank groups") {
  Model model;
  model.attributes.tie_word_embeddings = true;
  model.params.push_back(param("model.embed_tokens.weight", {16, 4}));
  for (int i = 0; i < 4; ++i)
    model.params.push_back(param("model.layers." + std::to_string(i) + ".w", {4, 4}));
  model.params.push_back(param("lm_head.weight", {16, 4}));
  Recipe recipe;
  recipe.mesh = mesh({{"pp", 2}, {"dp", 2}, {"tp", 2}});
  recipe.rules = {rule("model.embed_tokens.weight", {{"tp", shard(0)}}),
                  rule("lm_head.weight", {{"tp", shard(0)}}), rule("**", {})};
  recipe.pipeline = PipelineSpec{};
  recipe.pipeline->axis = "pp";
  DiagnosticSink sink;
  auto plan = build_plan(model, recipe, sink);
  REQUIRE(plan);
  REQUIRE(plan->tie_sync.size() == 1);
  const auto& sync = plan->tie_sync[0];
  CHECK(sync.source == "model.embed_tokens.weight");
  CHECK(sync.alias == "lm_head.weight");
  CHECK(sync.groups == std::vector<std::vector<std::int64_t>>{{0, 4}, {1, 5}, {2, 6}, {3, 7}});
  // Both stages hold a copy: the alias is real storage on stage 1.
  auto bytes = rank_bytes(*plan);
  CHECK(bytes.param_bytes[4] == 2 * 16 * 2 + 8 * 4 * 2);  // layers 2-3 + lm_head piece
}

TEST_CASE("fsdp.frozen: requires_grad false params out of FSDP by default, sharded with `shard`") {
  Model model;
  model.params = {param("base", {5, 2}), param("lora", {4, 2})};
  model.params[0].requires_grad = false;
  Recipe recipe;
  recipe.mesh = mesh({{"dp_shard", 2}});
  recipe.rules = {rule("**", {})};
  recipe.fsdp = FsdpSpec{};
  recipe.fsdp->shard = {"dp_shard"};
  for (const FrozenParams frozen : {FrozenParams::Ignore, FrozenParams::Shard}) {
    CAPTURE(static_cast<int>(frozen));
    recipe.fsdp->frozen = frozen;
    DiagnosticSink sink;
    const auto plan = build_plan(model, recipe, sink);
    REQUIRE(plan);
    const PlannedParam& base = plan->params[0];
    CHECK(plan->params[1].geometry.fsdp_dim == 0);  // trainable: always
    if (frozen == FrozenParams::Ignore) {
      CHECK(base.geometry.fsdp_dim == -1);  // FSDP2 with it in ignored_params
      CHECK(base.placements[0].label() == "Replicate()");
    } else {
      // FSDP2's default: chunked like any param, 3 + 2 rows, padded to 3
      CHECK(base.geometry.fsdp_dim == 0);
      CHECK(base.placements[0].label() == "Shard(0)");
      const ShardGeom geom = shard_at(base.geometry, mesh_coords(plan->dense, 1));
      CHECK(geom.local_shape == Shape{2, 2});
      CHECK(geom.padded_shape == Shape{3, 2});
      CHECK(geom.global_offset == Shape{3, 0});
    }
  }
}
