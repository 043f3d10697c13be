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
  return shardc::hf_tp_plan_recipe(*plan, tiny_model(), {4}, "plan.json", sink);
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
  const auto recipe = shardc::hf_tp_plan_recipe(*plan, model, {2}, "plan.json", sink);
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
  CHECK(sink.items().front().message.find("no `sources`") != std::string::npos);
  CHECK(sink.items().front().hint.find("tools/hf_tp_plan.py CHECKPOINT") != std::string::npos);
}

namespace {

// Mixtral's checkpoint layout, 2 layers of 2 experts (w1, w3 [6, 8], w2 [8, 6]) and its
// router, with the `sources` transformers' loader gives it (conversion_mapping.py
// "mixtral": block_sparse_moe -> mlp, MergeModulelist(dim=0) + Concatenate(dim=1))
shardc::Model mixtral_checkpoint() {
  shardc::Model model;
  for (int layer = 0; layer < 2; ++layer) {
    const std::string prefix = "model.layers." + std::to_string(layer) + ".block_sparse_moe.";
    for (int expert = 0; expert < 2; ++expert) {
      for (const auto& [leaf, shape] : std::vector<std::pair<const char*, shardc::Shape>>{
               {"w1", {6, 8}}, {"w2", {8, 6}}, {"w3", {6, 8}}}) {
        shardc::Param param;
        param.name = prefix + "experts." + std::to_string(expert) + "." + leaf + ".weight";
        param.shape = shape;
        model.params.push_back(param);
      }
    }
    shardc::Param gate;
    gate.name = prefix + "gate.weight";
    gate.shape = {2, 8};
    model.params.push_back(gate);
  }
  return model;
}

std::string mixtral_sources(
    const std::string& gate_up_ops = R"([{"op": "MergeModulelist", "dim": 0},
      {"op": "Concatenate", "dim": 1}])") {
  std::string out = "{";
  for (int layer = 0; layer < 2; ++layer) {
    const std::string ckpt = "model.layers." + std::to_string(layer) + ".block_sparse_moe.";
    const std::string hf = "model.layers." + std::to_string(layer) + ".mlp.";
    const auto keys = [&](const char* leaf) {
      return "[\"" + ckpt + "experts.0." + leaf + ".weight\", \"" + ckpt + "experts.1." + leaf +
             ".weight\"]";
    };
    out += std::string(layer ? ", " : "") + "\"" + hf +
           "experts.gate_up_proj\": {\"shape\": [2, 12, 8], " + "\"operations\": " + gate_up_ops +
           ", \"parts\": [" + keys("w1") + ", " + keys("w3") + "]}, \"" + hf +
           "experts.down_proj\": {\"shape\": [2, 8, 6], \"operations\": " +
           "[{\"op\": \"MergeModulelist\", \"dim\": 0}], \"parts\": [" + keys("w2") + "]}, \"" +
           hf + "gate.weight\": {\"shape\": [2, 8], \"operations\": [], \"parts\": [[\"" + ckpt +
           "gate.weight\"]]}";
  }
  return out + "}";
}

std::optional<std::string> translate_mixtral(const std::string& tp_plan,
                                             shardc::DiagnosticSink& sink,
                                             const std::string& sources = mixtral_sources()) {
  const std::string json =
      R"({"format": "shardc.hf-tp-plan/v1", "architecture": "MixtralForCausalLM",
      "tp_plan": )" +
      tp_plan + R"(, "sources": )" + sources + "}";
  const auto plan = shardc::parse_hf_tp_plan(json, "plan.json", sink);
  if (!plan) return std::nullopt;
  return shardc::hf_tp_plan_recipe(*plan, mixtral_checkpoint(), {2}, "plan.json", sink);
}

}  // namespace

TEST_CASE("fused experts through transformers' converter: each expert's tensors placed") {
  shardc::DiagnosticSink sink;
  const auto recipe =
      translate_mixtral(R"({"model.layers.*.mlp.experts.gate_up_proj": "packed_colwise",
      "model.layers.*.mlp.experts.down_proj": "rowwise",
      "model.layers.*.mlp.experts": "moe_tp_experts", "model.layers.*.mlp.gate": "colwise"})",
                        sink);
  REQUIRE(recipe);
  CHECK_FALSE(sink.has_errors());
  const std::string& text = *recipe;
  // _StridedShard(-2, sf=2) over [gate; up]: each expert's gate (w1) and up (w3) Shard(0)
  CHECK(text.find("\"model.layers.*.block_sparse_moe.experts.*.w1.weight\"    # packed_colwise: "
                  "model.layers.*.mlp.experts.gate_up_proj is _StridedShard(-2, sf=2), made by "
                  "MergeModulelist(dim=0) + Concatenate(dim=1) (part 1 of 2)\n    placements: "
                  "{tp: \"Shard(0)\"}") != std::string::npos);
  CHECK(text.find("\"model.layers.*.block_sparse_moe.experts.*.w3.weight\"    # packed_colwise: "
                  "model.layers.*.mlp.experts.gate_up_proj is _StridedShard(-2, sf=2), made by "
                  "MergeModulelist(dim=0) + Concatenate(dim=1) (part 2 of 2)\n    placements: "
                  "{tp: \"Shard(0)\"}") != std::string::npos);
  // rowwise Shard(-1) of [E, H, I]: each expert's down (w2) Shard(1)
  CHECK(text.find("\"model.layers.*.block_sparse_moe.experts.*.w2.weight\"    # rowwise: "
                  "model.layers.*.mlp.experts.down_proj is Shard(-1), made by "
                  "MergeModulelist(dim=0)\n    placements: {tp: \"Shard(1)\"}") !=
        std::string::npos);
  CHECK(text.find("# model.layers.*.mlp.experts: moe_tp_experts hooks the module's forward") !=
        std::string::npos);
  // a module entry on a renamed param: the rule names the checkpoint's tensor
  CHECK(text.find("\"model.layers.*.block_sparse_moe.gate.weight\"    # colwise (transformers' "
                  "model.layers.*.mlp.gate.weight)\n    placements: {tp: \"Shard(-2)\"}") !=
        std::string::npos);
  shardc::DiagnosticSink parse_sink;
  CHECK(shardc::parse_recipe(shardc::SourceFile{"r.yaml", text}, parse_sink));
  CHECK_FALSE(parse_sink.has_errors());
}

TEST_CASE("fused experts: a placement no per-expert placement states is refused, with why") {
  struct Refusal {
    const char* plan;
    std::string sources;
    const char* says;
  };
  const std::vector<Refusal> refusals = {
      // a plain Shard(1) of [gate; up]: one run across both parts, which the loader does not cut
      {R"({"model.layers.*.mlp.experts.gate_up_proj": "colwise"})", mixtral_sources(),
       "only _StridedShard(1, sf=2) is that"},
      // an operation shardc does not translate
      {R"({"model.layers.*.mlp.experts.gate_up_proj": "packed_colwise"})",
       mixtral_sources(R"([{"op": "MergeModulelist", "dim": 0}, {"op": "Transpose", "dim": 1}])"),
       "Transpose(dim=1)"},
      // a module style on a fused param
      // a module style on a param transformers concatenates from two checkpoint tensors
      {R"({"model.layers.*.mlp.gate_up_proj": "colwise"})",
       R"({"model.layers.0.mlp.gate_up_proj.weight": {"shape": [12, 8],
         "operations": [{"op": "Concatenate", "dim": 0}],
         "parts": [["model.layers.0.mlp.gate_proj.weight"], ["model.layers.0.mlp.up_proj.weight"]]}})",
       "module style"},
  };
  for (const Refusal& refusal : refusals) {
    CAPTURE(refusal.plan);
    shardc::DiagnosticSink sink;
    CHECK_FALSE(translate_mixtral(refusal.plan, sink, refusal.sources));
    REQUIRE(sink.has_errors());
    CHECK(sink.items().front().code == shardc::DiagCode::EHfTpPlan);
    CHECK(sink.items().front().message.find(refusal.says) != std::string::npos);
  }
}

TEST_CASE("fused experts: Shard of the stacked dim 0 is expert parallelism, refused") {
  // per-expert 1-D biases [6] stacked to [2, 6]: colwise gives a 2-D param Shard(0)
  shardc::Model model;
  for (int expert = 0; expert < 2; ++expert) {
    shardc::Param param;
    param.name = "model.layers.0.mlp.experts." + std::to_string(expert) + ".bias";
    param.shape = {6};
    model.params.push_back(param);
  }
  const std::string json = R"({"format": "shardc.hf-tp-plan/v1",
      "tp_plan": {"model.layers.*.mlp.experts.bias": "colwise"},
      "sources": {"model.layers.0.mlp.experts.bias": {"shape": [2, 6],
        "operations": [{"op": "MergeModulelist", "dim": 0}],
        "parts": [["model.layers.0.mlp.experts.0.bias", "model.layers.0.mlp.experts.1.bias"]]}}})";
  shardc::DiagnosticSink sink;
  const auto plan = shardc::parse_hf_tp_plan(json, "plan.json", sink);
  REQUIRE(plan);
  CHECK_FALSE(shardc::hf_tp_plan_recipe(*plan, model, {2}, "plan.json", sink));
  REQUIRE(sink.has_errors());
  CHECK(sink.items().front().message.find("model.layers.*.mlp.experts.bias") != std::string::npos);
  CHECK(sink.items().front().message.find("expert parallelism") != std::string::npos);
}

TEST_CASE("a `sources` that is not transformers' conversion dump is refused") {
  for (const char* sources : {R"([])", R"({"a": {"shape": [2]}})",
                              R"({"a": {"shape": [-1], "operations": [], "parts": []}})",
                              R"({"a": {"shape": [2], "operations": [{}], "parts": []}})",
                              R"({"a": {"shape": [2], "operations": [], "parts": [[1]]}})"}) {
    CAPTURE(sources);
    const std::string json = R"({"format": "shardc.hf-tp-plan/v1", "tp_plan": {"a": "colwise"},
        "sources": )" + std::string(sources) +
                             "}";
    shardc::DiagnosticSink sink;
    CHECK_FALSE(shardc::parse_hf_tp_plan(json, "p.json", sink));
    REQUIRE(sink.has_errors());
    CHECK(sink.items().front().code == shardc::DiagCode::EHfTpPlan);
  }
}

namespace {

std::optional<std::string> translate_mixtral_ep(const std::string& ep_plan, std::int64_t ep,
                                                shardc::DiagnosticSink& sink) {
  const std::string json =
      R"({"format": "shardc.hf-tp-plan/v1", "architecture": "MixtralForCausalLM",
      "tp_plan": {"model.layers.*.self_attn.q_proj": "colwise",
      "model.layers.*.mlp.experts.gate_up_proj": "packed_colwise",
      "model.layers.*.mlp.experts": "moe_tp_experts"}, "ep_plan": )" +
      ep_plan + R"(, "sources": )" + mixtral_sources() + "}";
  const auto plan = shardc::parse_hf_tp_plan(json, "plan.json", sink);
  if (!plan) return std::nullopt;
  return shardc::hf_tp_plan_recipe(*plan, mixtral_checkpoint(), {2, ep}, "plan.json", sink);
}

constexpr const char* kMixtralEpPlan =
    R"({"model.layers.*.mlp.experts.gate_up_proj": "grouped_gemm",
      "model.layers.*.mlp.experts.down_proj": "grouped_gemm",
      "model.layers.*.mlp.experts": "ep_dispatch_experts"})";

}  // namespace

TEST_CASE("--ep: the ep_plan's grouped_gemm as experts entries, its modules taken from tp_plan") {
  shardc::DiagnosticSink sink;
  const auto recipe = translate_mixtral_ep(kMixtralEpPlan, 2, sink);
  REQUIRE(recipe);
  CHECK_FALSE(sink.has_errors());
  const std::string& text = *recipe;
  CHECK(text.find("expert_mesh:\n  - {name: ep, size: 2}\nexperts:\n") != std::string::npos);
  // per-expert checkpoint tensors: one entry per source pattern, {E} the expert segment
  CHECK(text.find("  - match: \"model.layers.{L}.block_sparse_moe.experts.{E}.w1.weight\"    # "
                  "grouped_gemm: model.layers.*.mlp.experts.gate_up_proj is "
                  "MergeModulelist(dim=0) + Concatenate(dim=1) of these\n    stack: "
                  "\"model.layers.{L}.block_sparse_moe.experts.w1\"\n    placements: {ep: "
                  "Shard(0)}") != std::string::npos);
  CHECK(text.find("experts.{E}.w3.weight") != std::string::npos);
  CHECK(text.find("experts.{E}.w2.weight") != std::string::npos);
  CHECK(text.find("# model.layers.*.mlp.experts: ep_dispatch_experts hooks") != std::string::npos);
  // transformers: "EP rules take precedence" (the module and everything below it)
  CHECK(text.find("# model.layers.*.mlp.experts.gate_up_proj: packed_colwise (tp_plan) dropped") !=
        std::string::npos);
  CHECK(text.find("# model.layers.*.mlp.experts: moe_tp_experts (tp_plan) dropped") !=
        std::string::npos);
  CHECK(text.find("self_attn.q_proj: colwise") != std::string::npos);  // kept (no such param here)
  shardc::DiagnosticSink parse_sink;
  CHECK(shardc::parse_recipe(shardc::SourceFile{"r.yaml", text}, parse_sink));
  CHECK_FALSE(parse_sink.has_errors());
}

TEST_CASE("--ep: refused when transformers would refuse or shardc cannot state it") {
  struct Refusal {
    std::string ep_plan;
    std::int64_t ep;
    const char* says;
  };
  for (const Refusal& refusal : std::vector<Refusal>{
           {kMixtralEpPlan, 4, "without FSDP ep equals tp"},
           {"{}", 2, "the plan file has no `ep_plan`"},
           {R"({"model.layers.*.mlp.experts": "ep_router"})", 2, "ep style 'ep_router'"},
           {R"({"model.layers.*.mlp.experts.up_proj": "grouped_gemm"})", 2,
            "matches no param of the model"}}) {
    CAPTURE(refusal.ep_plan);
    shardc::DiagnosticSink sink;
    CHECK_FALSE(translate_mixtral_ep(refusal.ep_plan, refusal.ep, sink));
    REQUIRE(sink.has_errors());
    CHECK(sink.items().front().code == shardc::DiagCode::EHfTpPlan);
    CHECK(sink.items().front().message.find(refusal.says) != std::string::npos);
  }
}
