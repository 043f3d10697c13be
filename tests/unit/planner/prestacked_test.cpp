// Pre-stacked experts, grouped-GEMM names, expert TP and W-BALANCE (issue 27 items 1 and
// 4, issue 29 item 5; docs/experts.md), on the inputs of tests/reports and tests/bad.
#include <doctest/doctest.h>

#include "frontend/frontend.hpp"
#include "planner/planner.hpp"

#include "../source_text.hpp"

using namespace shardc;
using shardc::test::slurp;

namespace {

struct Planned {
  DiagnosticSink sink;
  std::optional<Plan> plan;
};

Planned plan_of(const std::string& model, const std::string& recipe) {
  Planned out;
  auto parsed_model = parse_model({model, slurp(model)}, out.sink);
  auto parsed_recipe = parse_recipe({recipe, slurp(recipe)}, out.sink);
  REQUIRE(parsed_model);
  REQUIRE(parsed_recipe);
  out.plan = build_plan(*parsed_model, *parsed_recipe, out.sink);
  return out;
}

const PlannedParam& param_named(const Plan& plan, const std::string& name) {
  for (const PlannedParam& param : plan.params)
    if (param.name == name) return param;
  FAIL("no param " << name);
  return plan.params.front();
}

std::size_t count(const DiagnosticSink& sink, DiagCode code) {
  std::size_t count = 0;
  for (const Diagnostic& d : sink.items()) count += d.code == code ? 1 : 0;
  return count;
}

const std::string kLlama4 = "tests/reports/prestacked_experts_llama4/";
const std::string kMegatron = "tests/reports/megatron_expert_tp_swiglu/";

}  // namespace

TEST_CASE("pre-stacked experts are placed as stacked experts: expert mesh, EP, expert_dim auto") {
  Planned planned = plan_of(kLlama4 + "model.yaml", kLlama4 + "recipe-prestacked.yaml");
  REQUIRE(planned.plan);
  CHECK(planned.sink.error_count() == 0);
  CHECK(count(planned.sink, DiagCode::WBalance) == 0);
  const PlannedParam& param =
      param_named(*planned.plan, "language_model.model.layers.1.feed_forward.experts.gate_up_proj");
  CHECK(param.mesh == MeshKind::Expert);
  CHECK(stacked_expert(param));
  CHECK(param.stacked_from.empty());
  REQUIRE(param.prestacked);
  CHECK(param.prestacked->count == 16);
  CHECK(expert_count(param) == 16);
  CHECK(expert_fqn(param, 15) ==
        "language_model.model.layers.1.feed_forward.experts.15.gate_up_proj");
  // efsdp 2 x ep 16 = 32 > 16 experts: torchtitan's auto rule shards dim 1.
  CHECK(param.geometry.fsdp_dim == 1);
  // rank 17 = efsdp 1, ep 1: expert 1, hidden rows 2560..5119.
  const ShardGeom shard = shard_at(param.geometry, mesh_coords(*planned.plan->expert, 17));
  CHECK(shard.local_shape == Shape{1, 2560, 16384});
  CHECK(shard.global_offset == Shape{1, 2560, 0});
  // the router is not an expert param
  CHECK_FALSE(stacked_expert(
      param_named(*planned.plan, "language_model.model.layers.1.feed_forward.router.weight")));
}

TEST_CASE("W-BALANCE: FSDP on dim 0 of 16 experts over 32 ranks leaves 16 with only padding") {
  Planned planned = plan_of(kLlama4 + "model.yaml", kLlama4 + "recipe-rules-fsdp.yaml");
  REQUIRE(planned.plan);
  bool padding = false;
  bool stage = false;
  for (const Diagnostic& d : planned.sink.items()) {
    if (d.code != DiagCode::WBalance) continue;
    padding |= d.message.find("leaves 16 of the 32 ranks holding it with only padding") !=
               std::string::npos;
    stage |= d.message.find("stage 0: rank") != std::string::npos &&
             d.message.find("optimizer-state elements") != std::string::npos;
  }
  CHECK(padding);
  CHECK(stage);
}

TEST_CASE("W-BALANCE names expert_dim 1 for shardc-placed experts with expert_dim 0") {
  Planned planned = plan_of(kLlama4 + "model.yaml", kLlama4 + "recipe-prestacked-dim0.yaml");
  REQUIRE(planned.plan);
  bool named = false;
  for (const Diagnostic& d : planned.sink.items())
    named |= d.code == DiagCode::WBalance && d.hint.find("expert_dim: 1") != std::string::npos &&
             d.message.find("ep x efsdp (32 ranks)") != std::string::npos;
  CHECK(named);
}

TEST_CASE("grouped-GEMM names stack by a capture that ends a segment") {
  Planned planned = plan_of(kMegatron + "model-grouped.yaml", kMegatron + "recipe-grouped.yaml");
  REQUIRE(planned.plan);
  CHECK(planned.sink.error_count() == 0);
  const PlannedParam& param =
      param_named(*planned.plan, "decoder.layers.0.mlp.experts.linear_fc1.weight");
  REQUIRE(param.stacked_from.size() == 8);
  CHECK(param.stacked_from[7] == "decoder.layers.0.mlp.experts.linear_fc1.weight7");
  CHECK(param.global_shape == Shape{8, 28672, 4096});
}

TEST_CASE(
    "expert TP 2 of a Megatron SwiGLU linear_fc1: plain is W-FUSED-SPLIT, packed splits parts") {
  Planned plain = plan_of(kMegatron + "model.yaml", kMegatron + "recipe-etp-plain.yaml");
  REQUIRE(plain.plan);
  CHECK(count(plain.sink, DiagCode::WFusedSplit) == 1);
  Planned packed = plan_of(kMegatron + "model.yaml", kMegatron + "recipe-etp-packed.yaml");
  REQUIRE(packed.plan);
  CHECK(count(packed.sink, DiagCode::WFusedSplit) == 0);
  const PlannedParam& param =
      param_named(*packed.plan, "decoder.layers.0.mlp.experts.linear_fc1.weight");
  // rank 1 = edp 0, ep 0, etp 1: expert 0, the second half of gate and of up.
  const ShardGeom shard = shard_at(param.geometry, mesh_coords(*packed.plan->expert, 1));
  CHECK(shard.local_shape == Shape{1, 14336, 4096});
  REQUIRE(shard.boxes.size() == 2);
  CHECK(shard.boxes[0].global_offset == Shape{0, 7168, 0});
  CHECK(shard.boxes[1].global_offset == Shape{0, 21504, 0});
}

TEST_CASE("W-REPLICATED-LARGE: `tp: Replicate()` in an experts entry silences it, as in a rule") {
  // Trial C 9: the hint said to write `tp: Replicate()`, which the entry already said.
  const std::string model_path = kLlama4 + "model.yaml";
  const auto plan_with = [&](const std::string& expert_placements, DiagnosticSink& sink) {
    const std::string recipe =
        "format: shardc.recipe/v1\nmesh:\n  - {name: tp, size: 2}\nexperts:\n"
        "  - match: \"language_model.model.layers.*.feed_forward.experts.*\"\n"
        "    stacked_dim: 0\n    placements: " +
        expert_placements +
        "\nrules:\n  - match: \"**.q_proj.weight\"\n    placements: {tp: Shard(0)}\n"
        "  - match: \"**\"\n    placements: {tp: Replicate()}\n";
    auto model = parse_model({model_path, slurp(model_path)}, sink);
    auto parsed = parse_recipe({"r.recipe.yaml", recipe}, sink);
    REQUIRE(model);
    REQUIRE(parsed);
    return build_plan(*model, *parsed, sink).has_value();
  };
  DiagnosticSink said;
  CHECK(plan_with("{tp: Replicate()}", said));
  CHECK(count(said, DiagCode::WReplicatedLarge) == 0);
  DiagnosticSink silent;
  CHECK(plan_with("{}", silent));
  REQUIRE(count(silent, DiagCode::WReplicatedLarge) == 1);
  for (const Diagnostic& diag : silent.items())
    if (diag.code == DiagCode::WReplicatedLarge)
      CHECK(diag.hint.find("in its experts entry's placements") != std::string::npos);
}
