// transformers' tp_plan -> shardc recipe (src/import/hf_tp_plan.cpp): each style's
// placement, rules only for params that exist, refusals with E-HF-TP-PLAN.
#include <doctest/doctest.h>

#include <string>
#include <utility>
#include <vector>

#include "frontend/frontend.hpp"
#include "import/import.hpp"

namespace {

shardc::Model tiny_model() {
  shardc::Model model;
  for (const char* name :
       {"model.embed_tokens.weight", "model.layers.0.self_attn.q_proj.weight",
        "model.layers.0.self_attn.q_proj.bias", "model.layers.0.self_attn.o_proj.weight",
        "model.layers.0.mlp.gate_up_proj.weight", "model.norm.weight", "lm_head.weight"}) {
    shardc::Param param;
    param.name = name;
    param.shape = {8, 8};
    model.params.push_back(param);
  }
  return model;
}

std::optional<std::string> translate(const std::string& tp_plan, shardc::DiagnosticSink& sink) {
  const std::string json = R"({"format": "shardc.hf-tp-plan/v1", "architecture": "TinyForCausalLM",
      "transformers": "5.24.0", "tp_plan": )" +
                           tp_plan + "}";
  const auto plan = shardc::parse_hf_tp_plan(json, "plan.json", sink);
  if (!plan) return std::nullopt;
  return shardc::hf_tp_plan_recipe(*plan, tiny_model(), 4, "plan.json", sink);
}

}  // namespace

TEST_CASE("each style becomes the placement transformers gives it") {
  shardc::DiagnosticSink sink;
  const auto recipe = translate(R"({"lm_head": "colwise_gather_output",
      "model.embed_tokens": "embedding_rowwise", "model.layers.*.self_attn.q_proj": "colwise",
      "model.layers.*.self_attn.o_proj": "rowwise", "model.layers.*.mlp.gate_up_proj": "packed_colwise",
      "model.norm": "sequence_parallel"})",
                                sink);
  REQUIRE(recipe);
  CHECK_FALSE(sink.has_errors());
  const std::string& text = *recipe;
  CHECK(text.find("  - {name: tp, size: 4}") != std::string::npos);
  CHECK(
      text.find("\"lm_head.weight\"    # colwise_gather_output\n    placements: {tp: Shard(-2)}") !=
      std::string::npos);
  CHECK(text.find("\"lm_head.bias\"") == std::string::npos);  // no such param: no rule
  CHECK(text.find("\"model.embed_tokens.weight\"    # embedding_rowwise\n    placements: {tp: "
                  "Shard(0)}") != std::string::npos);
  CHECK(text.find("\"model.layers.*.self_attn.q_proj.bias\"    # colwise\n    placements: {tp: "
                  "Shard(-1)}") != std::string::npos);
  CHECK(text.find("\"model.layers.*.self_attn.o_proj.weight\"    # rowwise\n    placements: {tp: "
                  "Shard(-1)}") != std::string::npos);
  CHECK(text.find("packed_colwise\n    placements: {tp: Shard(-2)}\n    packed: {parts: 2, dim: "
                  "-2}") != std::string::npos);
  CHECK(text.find("\"model.norm.weight\"    # sequence_parallel\n    placements: {}") !=
        std::string::npos);
  CHECK(text.rfind("  - match: \"**\"") != std::string::npos);
  // the text is a recipe shardc reads
  shardc::DiagnosticSink parse_sink;
  CHECK(shardc::parse_recipe(shardc::SourceFile{"r.yaml", text}, parse_sink));
  CHECK_FALSE(parse_sink.has_errors());
}

TEST_CASE("MoE styles and entries that match nothing are refused") {
  shardc::DiagnosticSink sink;
  CHECK_FALSE(translate(R"({"model.layers.*.mlp.experts": "moe_tp_experts"})", sink));
  REQUIRE(sink.has_errors());
  CHECK(sink.items().front().code == shardc::DiagCode::EHfTpPlan);
  CHECK(sink.items().front().message.find("moe_tp_experts") != std::string::npos);
  shardc::DiagnosticSink none;
  CHECK_FALSE(translate(R"({"model.layers.*.mlp.experts.gate_up_proj": "packed_colwise"})", none));
  CHECK(none.items().front().message.find("matches no param") != std::string::npos);
}

TEST_CASE("a file that is not a plan dump is refused") {
  for (const char* json : {"[]", R"({"format": "other"})", R"({"format": "shardc.hf-tp-plan/v1"})",
                           R"({"format": "shardc.hf-tp-plan/v1", "tp_plan": {}})",
                           R"({"format": "shardc.hf-tp-plan/v1", "tp_plan": {"a": 1}})"}) {
    CAPTURE(json);
    shardc::DiagnosticSink sink;
    CHECK_FALSE(shardc::parse_hf_tp_plan(json, "p.json", sink));
    CHECK(sink.items().front().code == shardc::DiagCode::EHfTpPlan);
  }
}

TEST_CASE("entries naming params: the MoE plans' 3-D experts (Llama-4)") {
  shardc::Model model;
  for (const auto& [name, shape] : std::vector<std::pair<const char*, shardc::Shape>>{
           {"model.layers.0.feed_forward.experts.gate_up_proj", {4, 8, 12}},
           {"model.layers.0.feed_forward.experts.down_proj", {4, 6, 8}},
           {"model.layers.0.feed_forward.router.weight", {4, 8}}}) {
    shardc::Param param;
    param.name = name;
    param.shape = shape;
    model.params.push_back(param);
  }
  const std::string json =
      R"({"format": "shardc.hf-tp-plan/v1", "architecture": "Llama4ForCausalLM",
      "tp_plan": {"model.layers.*.feed_forward.experts.gate_up_proj": "packed_rowwise",
                  "model.layers.*.feed_forward.experts.down_proj": "colwise",
                  "model.layers.*.feed_forward.experts": "moe_tp_experts"}})";
  shardc::DiagnosticSink sink;
  const auto plan = shardc::parse_hf_tp_plan(json, "plan.json", sink);
  REQUIRE(plan);
  const auto recipe = shardc::hf_tp_plan_recipe(*plan, model, 2, "plan.json", sink);
  REQUIRE(recipe);
  CHECK_FALSE(sink.has_errors());
  const std::string& text = *recipe;
  // PackedRowwiseParallel.shard_param: _StridedShard(dim=-1, split_factor=2)
  CHECK(text.find("\"model.layers.*.feed_forward.experts.gate_up_proj\"    # packed_rowwise (a "
                  "param)\n    placements: {tp: \"_StridedShard(-1, sf=2)\"}") !=
        std::string::npos);
  // ColwiseParallel.shard_param: Shard(ndim - 2)
  CHECK(text.find("\"model.layers.*.feed_forward.experts.down_proj\"    # colwise (a param)\n    "
                  "placements: {tp: \"Shard(-2)\"}") != std::string::npos);
  CHECK(text.find("# model.layers.*.feed_forward.experts: moe_tp_experts hooks") !=
        std::string::npos);
  shardc::DiagnosticSink parse_sink;
  CHECK(shardc::parse_recipe(shardc::SourceFile{"r.yaml", text}, parse_sink));
  CHECK_FALSE(parse_sink.has_errors());
}

TEST_CASE("fused experts the checkpoint stores per expert: the refusal says why") {
  shardc::DiagnosticSink sink;
  CHECK_FALSE(translate(R"({"model.layers.*.mlp.experts.down_proj": "rowwise"})", sink));
  REQUIRE(sink.has_errors());
  CHECK(sink.items().front().code == shardc::DiagCode::EHfTpPlan);
  CHECK(sink.items().front().message.find("rowwise") != std::string::npos);
  CHECK(sink.items().front().message.find("per-expert tensors") != std::string::npos);
  CHECK(sink.items().front().hint.find("`experts` entry") != std::string::npos);
}
