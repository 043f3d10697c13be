// The local attributes a runtime sets (src/planner/local_attributes.cpp,
// contract §6.7): head counts of dense and GQA attention (kv < tp with k/v
// replicated), expert ids under uneven EP, padded vocab ranges, fused q|k|v
// under `packed` and a plain split that cuts heads (null, never a guess).
#include <doctest/doctest.h>

#include <optional>
#include <string>

#include "backend/backend.hpp"
#include "frontend/frontend.hpp"
#include "planner/local_attributes.hpp"
#include "planner/planner.hpp"

using namespace shardc;

namespace {

Plan plan_of(const std::string& model, const std::string& recipe) {
  DiagnosticSink sink;
  auto parsed_model = parse_model({"m.yaml", model}, sink);
  auto parsed_recipe = parse_recipe({"r.yaml", recipe}, sink);
  REQUIRE(parsed_model);
  REQUIRE(parsed_recipe);
  auto planned = build_plan(*parsed_model, *parsed_recipe, sink);
  REQUIRE_MESSAGE(planned, (sink.items().empty() ? std::string() : sink.items().front().message));
  return std::move(*planned);
}

const std::string kLlama =
    "format: shardc.model/v1\nname: t\ndtype: bfloat16\n"
    "attributes: {num_attention_heads: 8, num_key_value_heads: 2, head_dim: 4, vocab_size: 37}\n"
    "params:\n"
    "  - {name: model.embed_tokens.weight, shape: [37, 32]}\n"
    "  - {name: model.layers.0.self_attn.q_proj.weight, shape: [32, 32]}\n"
    "  - {name: model.layers.0.self_attn.k_proj.weight, shape: [8, 32]}\n"
    "  - {name: model.layers.0.self_attn.v_proj.weight, shape: [8, 32]}\n"
    "  - {name: model.layers.0.self_attn.o_proj.weight, shape: [32, 32]}\n"
    "  - {name: lm_head.weight, shape: [37, 32]}\n";

IdRange range(std::int64_t start, std::int64_t end) { return {start, end}; }

}  // namespace

TEST_CASE("dense GQA split like q: q, KV and used KV heads per tp rank (FSDP does not count)") {
  const Plan plan = plan_of(kLlama,
                            "mesh: [{name: dp_shard, size: 2}, {name: tp, size: 2}]\n"
                            "rules:\n"
                            "  - {match: '**.[qkv]_proj.weight', placements: {tp: Shard(0)}}\n"
                            "  - {match: '**', placements: {}}\n"
                            "fsdp: {shard: dp_shard}\n");
  REQUIRE(plan.local_attributes.attention.size() == 1);
  CHECK(plan.local_attributes.attention[0].module == "model.layers.0.self_attn");
  for (std::int64_t rank = 0; rank < 4; ++rank) {
    const std::int64_t tp = rank % 2;
    const LocalAttributes attrs = local_attributes_at(plan, rank);
    REQUIRE(attrs.attention[0]);
    CHECK(attrs.attention[0]->query == range(4 * tp, 4 * tp + 4));
    CHECK(attrs.attention[0]->key_value == range(tp, tp + 1));
    CHECK(attrs.attention[0]->kv_used == range(tp, tp + 1));
    // The vocab tensors are FSDP-sharded only: every rank's forward sees all of them.
    REQUIRE(attrs.vocab.size() == 2);
    CHECK(attrs.vocab[0].ids == range(0, 37));
    CHECK(attrs.vocab[0].padding_rows == 0);
  }
}

TEST_CASE("GQA with kv < tp: k/v replicated, each rank uses the one KV head its q heads attend") {
  const Plan plan = plan_of(kLlama,
                            "mesh: [{name: tp, size: 4}]\n"
                            "rules:\n"
                            "  - {match: '**.q_proj.weight', placements: {tp: Shard(0)}}\n"
                            "  - {match: '**.o_proj.weight', placements: {tp: Shard(1)}}\n"
                            "  - {match: '**', placements: {}}\n");
  for (std::int64_t tp = 0; tp < 4; ++tp) {
    const LocalAttributes attrs = local_attributes_at(plan, tp);
    REQUIRE(attrs.attention[0]);
    CHECK(attrs.attention[0]->query == range(2 * tp, 2 * tp + 2));
    CHECK(attrs.attention[0]->key_value == range(0, 2));  // all held
    CHECK(attrs.attention[0]->kv_used == range(tp / 2, tp / 2 + 1));
  }
  const std::string text = render_local_attributes_json(plan, 3);
  CHECK(text.find("\"model.layers.0.self_attn\":{\"q_heads\":2,\"q_head_range\":[6,8],"
                  "\"kv_heads\":2,\"kv_head_range\":[0,2],\"kv_head_range_used\":[1,2]}") !=
        std::string::npos);
}

TEST_CASE("a vision tower's attention counts its own heads (sub-model attributes)") {
  // Llama-4-style: the text model has 8 heads / 2 KV heads, the vision tower 4 heads of
  // 8 rows and no GQA. At tp 2 the tower's ranks hold 2 heads each; counted with the text
  // model's heads its 32 rows were 8 heads of 4 rows (or null where they did not divide).
  const std::string model = kLlama +
                            "  - {name: vision_model.layers.0.self_attn.q_proj.weight, shape: "
                            "[32, 32]}\n"
                            "  - {name: vision_model.layers.0.self_attn.k_proj.weight, shape: "
                            "[32, 32]}\n"
                            "  - {name: vision_model.layers.0.self_attn.v_proj.weight, shape: "
                            "[32, 32]}\n"
                            "submodels:\n"
                            "  - {prefix: vision_model, attributes: {num_attention_heads: 4, "
                            "hidden_size: 32}}\n";
  const Plan plan = plan_of(model,
                            "mesh: [{name: tp, size: 2}]\n"
                            "rules:\n"
                            "  - {match: '**.[qkv]_proj.weight', placements: {tp: Shard(0)}}\n"
                            "  - {match: '**', placements: {}}\n");
  REQUIRE(plan.local_attributes.attention.size() == 2);
  CHECK(plan.local_attributes.attention[1].module == "vision_model.layers.0.self_attn");
  for (std::int64_t tp = 0; tp < 2; ++tp) {
    const LocalAttributes attrs = local_attributes_at(plan, tp);
    REQUIRE(attrs.attention[0]);
    CHECK(attrs.attention[0]->query == range(4 * tp, 4 * tp + 4));  // text: 8 heads
    REQUIRE(attrs.attention[1]);
    CHECK(attrs.attention[1]->query == range(2 * tp, 2 * tp + 2));  // vision: 4 heads
    CHECK(attrs.attention[1]->key_value == range(2 * tp, 2 * tp + 2));
  }
}

TEST_CASE("MoE with uneven EP: 10 experts over ep 4 (chunk 3, 3, 3, 1), expert FSDP on top") {
  std::string model =
      "format: shardc.model/v1\nname: t\ndtype: bfloat16\n"
      "attributes: {num_experts: 10}\n"
      "params:\n"
      "  - repeat: {e: [0, 10]}\n"
      "    params:\n"
      "      - {name: 'model.layers.0.mlp.experts.{e}.gate_proj.weight', shape: [8, 16]}\n"
      "      - {name: 'model.layers.0.mlp.experts.{e}.down_proj.weight', shape: [16, 8]}\n"
      "  - {name: model.norm.weight, shape: [16]}\n";
  const Plan plan = plan_of(model,
                            "mesh: [{name: dp, size: 8}]\n"
                            "expert_mesh: [{name: efsdp, size: 2}, {name: ep, size: 4}]\n"
                            "experts:\n"
                            "  - match: 'model.layers.0.mlp.experts.{E}.{P}.weight'\n"
                            "    stack: 'model.layers.0.mlp.experts.{P}'\n"
                            "    placements: {ep: Shard(0)}\n"
                            "rules: [{match: '**', placements: {}}]\n"
                            "fsdp: {shard: dp, expert_shard: efsdp}\n");
  REQUIRE(plan.local_attributes.experts.size() == 1);
  CHECK(plan.local_attributes.experts[0].module == "model.layers.0.mlp.experts");
  CHECK(plan.local_attributes.experts[0].params.size() == 2);
  const IdRange want[] = {range(0, 3), range(3, 6), range(6, 9), range(9, 10)};
  for (std::int64_t rank = 0; rank < 8; ++rank) {
    const LocalAttributes attrs = local_attributes_at(plan, rank);
    REQUIRE(attrs.experts[0]);
    CHECK(*attrs.experts[0] == want[rank % 4]);  // efsdp does not change what the forward sees
  }
  CHECK(render_local_attributes_json(plan, 7).find(
            "\"model.layers.0.mlp.experts\":{\"num_experts\":10,\"local_experts\":1,"
            "\"expert_range\":[9,10]}") != std::string::npos);
}

TEST_CASE(
    "padded vocab: 37 rows over tp 4 with pad 8 (16 rows per rank): padding and empty ranks") {
  const Plan plan = plan_of(kLlama,
                            "mesh: [{name: tp, size: 4}]\n"
                            "rules:\n"
                            "  - match: [model.embed_tokens.weight, lm_head.weight]\n"
                            "    placements: {tp: Shard(0)}\n"
                            "    uneven: {pad: 8}\n"
                            "  - {match: '**', placements: {}}\n");
  const IdRange ids[] = {range(0, 16), range(16, 32), range(32, 37), range(37, 37)};
  const std::int64_t padding[] = {0, 0, 11, 16};
  for (std::int64_t tp = 0; tp < 4; ++tp) {
    const LocalAttributes attrs = local_attributes_at(plan, tp);
    REQUIRE(attrs.vocab.size() == 2);
    for (const VocabLocal& vocab : attrs.vocab) {
      CHECK(vocab.ids == ids[tp]);
      CHECK(vocab.padding_rows == padding[tp]);
    }
  }
  CHECK(render_local_attributes_json(plan, 2).find(
            "\"lm_head.weight\":{\"vocab_size\":37,\"token_range\":[32,37],\"padding_rows\":11}") !=
        std::string::npos);
}

TEST_CASE("fused q|k|v: heads part by part under packed, null when a plain split cuts heads") {
  const std::string model =
      "format: shardc.model/v1\nname: t\ndtype: bfloat16\n"
      "attributes: {num_attention_heads: 4, num_key_value_heads: 2, head_dim: 8, "
      "hidden_size: 32}\n"
      "params:\n"
      "  - {name: model.layers.0.self_attn.qkv_proj.weight, shape: [64, 32]}\n";
  const Plan packed = plan_of(model,
                              "mesh: [{name: tp, size: 2}]\n"
                              "rules:\n"
                              "  - match: '**'\n"
                              "    placements: {tp: Shard(0)}\n"
                              "    packed: {parts: [32, 16, 16]}\n");
  REQUIRE(packed.local_attributes.attention.size() == 1);
  for (std::int64_t tp = 0; tp < 2; ++tp) {
    const LocalAttributes attrs = local_attributes_at(packed, tp);
    REQUIRE(attrs.attention[0]);
    CHECK(attrs.attention[0]->query == range(2 * tp, 2 * tp + 2));
    CHECK(attrs.attention[0]->key_value == range(tp, tp + 1));
  }
  const Plan plain = plan_of(model,
                             "mesh: [{name: tp, size: 2}]\n"
                             "rules: [{match: '**', placements: {tp: Shard(0)}}]\n");
  const LocalAttributes attrs = local_attributes_at(plain, 0);
  CHECK_FALSE(attrs.attention[0]);  // W-FUSED-SPLIT: rank 0 holds q and no k
  CHECK(render_local_attributes_json(plain, 0).find("\"model.layers.0.self_attn\":null") !=
        std::string::npos);
}

TEST_CASE(
    "no num_attention_heads: no attention entries, and pipeline stages hold only their modules") {
  const std::string model =
      "format: shardc.model/v1\nname: t\ndtype: bfloat16\n"
      "attributes: {num_attention_heads: 2}\n"
      "params:\n"
      "  - repeat: {i: [0, 2]}\n"
      "    params:\n"
      "      - {name: 'model.layers.{i}.self_attn.q_proj.weight', shape: [8, 8]}\n"
      "      - {name: 'model.layers.{i}.self_attn.k_proj.weight', shape: [8, 8]}\n";
  const Plan plan = plan_of(model,
                            "mesh: [{name: pp, size: 2}]\n"
                            "pipeline: {axis: pp, stages: auto}\n"
                            "rules: [{match: '**', placements: {}}]\n");
  REQUIRE(plan.local_attributes.attention.size() == 2);
  const LocalAttributes attrs = local_attributes_at(plan, 1);
  CHECK_FALSE(attrs.attention_held[0]);
  CHECK(attrs.attention_held[1]);
  const std::string text = render_local_attributes_json(plan, 1);
  CHECK(text.find("model.layers.0.") == std::string::npos);
  CHECK(text.find("\"model.layers.1.self_attn\":{\"q_heads\":2") != std::string::npos);
  const Plan bare = plan_of(
      "format: shardc.model/v1\nname: t\ndtype: bfloat16\n"
      "params:\n  - {name: model.layers.0.self_attn.q_proj.weight, shape: [8, 8]}\n"
      "  - {name: model.layers.0.self_attn.k_proj.weight, shape: [8, 8]}\n",
      "mesh: [{name: tp, size: 1}]\nrules: [{match: '**', placements: {}}]\n");
  CHECK(bare.local_attributes.attention.empty());
}

TEST_CASE("fused q|k|v packed with KV-head replicas: each rank's q heads and its one KV head") {
  // Trial C 4: vLLM's layout (tp 4 > 2 KV heads, `replicas: 2` on k and v) gave null heads.
  const std::string model =
      "format: shardc.model/v1\nname: t\ndtype: bfloat16\n"
      "attributes: {num_attention_heads: 8, num_key_value_heads: 2, head_dim: 4}\n"
      "params:\n"
      "  - {name: model.layers.0.self_attn.qkv_proj.weight, shape: [48, 32]}\n"
      "  - {name: model.layers.0.self_attn.o_proj.weight, shape: [32, 32]}\n";
  const Plan plan = plan_of(model,
                            "format: shardc.recipe/v1\nmesh: [{name: tp, size: 4}]\nrules:\n"
                            "  - match: '**.qkv_proj.weight'\n    placements: {tp: Shard(0)}\n"
                            "    packed: {parts: [{name: q, size: 32}, {name: k, size: 8, "
                            "replicas: 2}, {name: v, size: 8, replicas: 2}]}\n"
                            "  - match: '**.o_proj.weight'\n    placements: {tp: Shard(1)}\n");
  for (std::int64_t tp = 0; tp < 4; ++tp) {
    CAPTURE(tp);
    const LocalAttributes attrs = local_attributes_at(plan, tp);
    REQUIRE(attrs.attention[0]);
    CHECK(attrs.attention[0]->query == range(2 * tp, 2 * tp + 2));
    CHECK(attrs.attention[0]->key_value == range(tp / 2, tp / 2 + 1));
    CHECK(attrs.attention[0]->kv_used == range(tp / 2, tp / 2 + 1));
  }
}
