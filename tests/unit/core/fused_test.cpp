// The fused-parameter table (src/core/fused.hpp): layouts, extents and
// the text the diagnostics quote, against the modeling code each entry cites.
#include "core/fused.hpp"

#include <doctest/doctest.h>

using shardc::FusedLayout;
using shardc::known_fused;
using shardc::ModelAttributes;

namespace {

ModelAttributes heads(std::int64_t q_heads, std::int64_t kv, std::int64_t hidden) {
  ModelAttributes attrs;
  attrs.num_attention_heads = q_heads;
  attrs.num_key_value_heads = kv;
  attrs.hidden_size = hidden;
  return attrs;
}

}  // namespace

TEST_CASE("GPT-2 c_attn: blocked q|k|v on dim 1 of the Conv1D weight, dim 0 of the bias") {
  const ModelAttributes attrs = heads(12, 12, 768);
  const auto weight = known_fused("transformer.h.0.attn.c_attn.weight", {768, 2304}, attrs, "");
  REQUIRE(weight);
  CHECK(weight->dim == 1);
  CHECK(weight->parts == std::vector<std::int64_t>{768, 768, 768});
  CHECK(weight->groups == 1);
  CHECK(std::string(shardc::fused_order_name(*weight)) == "blocked");
  CHECK(shardc::fused_packed_line(*weight, 2) == "packed: {parts: 3, dim: 1}");
  CHECK(shardc::fused_range_text(*weight, 576, 1152) == "q 576..767 and k 0..383");
  CHECK(shardc::fused_range_text(*weight, 0, 576) == "only q 0..575");
  const auto bias = known_fused("transformer.h.0.attn.c_attn.bias", {2304}, attrs, "");
  REQUIRE(bias);
  CHECK(bias->dim == 0);
  CHECK(shardc::fused_packed_line(*bias, 1) == "packed: {parts: 3}");
  // Not fused: c_proj, c_fc, and a cross-attention c_attn of 2 x 768 (q_attn is separate).
  CHECK_FALSE(known_fused("transformer.h.0.attn.c_proj.weight", {768, 768}, attrs, ""));
  CHECK_FALSE(known_fused("transformer.h.0.mlp.c_fc.weight", {768, 3072}, attrs, ""));
}

TEST_CASE("Phi-3 qkv_proj takes the GQA extents, gate_up_proj is [gate | up]") {
  const ModelAttributes attrs = heads(40, 10, 5120);
  const auto qkv = known_fused("model.layers.0.self_attn.qkv_proj.weight", {7680, 5120}, attrs, "");
  REQUIRE(qkv);
  CHECK(qkv->parts == std::vector<std::int64_t>{5120, 1280, 1280});
  CHECK(shardc::fused_packed_line(*qkv, 2) == "packed: {parts: [5120, 1280, 1280]}");
  const auto gu = known_fused("model.layers.0.mlp.gate_up_proj.weight", {35840, 5120}, attrs, "");
  REQUIRE(gu);
  CHECK(gu->parts == std::vector<std::int64_t>{17920, 17920});
  CHECK(gu->part_names == std::vector<std::string>{"gate", "up"});
  // Without head counts a q|k|v of equal thirds is assumed only when it divides.
  CHECK(known_fused("a.qkv_proj.weight", {96, 32}, ModelAttributes{}, "")->parts ==
        std::vector<std::int64_t>{32, 32, 32});
  CHECK_FALSE(known_fused("a.qkv_proj.weight", {97, 32}, ModelAttributes{}, ""));
}

TEST_CASE("per-group and per-head q|k|v: Megatron linear_qkv, InternLM2 wqkv, GPT-NeoX") {
  const ModelAttributes attrs = heads(32, 8, 4096);
  const auto layout =
      known_fused("decoder.layers.0.self_attention.linear_qkv.weight", {6144, 4096}, attrs, "");
  REQUIRE(layout);
  CHECK(layout->groups == 8);
  CHECK(layout->parts == std::vector<std::int64_t>{4096, 1024, 1024});
  CHECK(shardc::fused_group_extent(*layout) == 768);  // 4 q heads + k + v of 128
  CHECK(std::string(shardc::fused_order_name(*layout)) == "per-group");
  CHECK(shardc::fused_packed_line(*layout, 2) == "packed: {parts: [4096, 1024, 1024], groups: 8}");
  CHECK(known_fused("model.layers.0.attention.wqkv.weight", {6144, 4096}, attrs, "")->groups == 8);
  // query_key_value needs the architecture: per head in GPT-NeoX, unknown otherwise.
  const ModelAttributes neox = heads(32, 32, 4096);
  CHECK_FALSE(
      known_fused("gpt_neox.layers.0.attention.query_key_value.weight", {12288, 4096}, neox, ""));
  const auto neox_layout = known_fused("gpt_neox.layers.0.attention.query_key_value.weight",
                                       {12288, 4096}, neox, "GPTNeoXForCausalLM");
  REQUIRE(neox_layout);
  CHECK(neox_layout->groups == 32);
  CHECK(std::string(shardc::fused_order_name(*neox_layout)) == "interleaved");
}

TEST_CASE("pre-stacked experts: fused-MoE [E, 2I, H], Llama-4 [E, H, 2I], gpt-oss interleaved") {
  ModelAttributes attrs;
  attrs.hidden_size = 2048;
  const auto moe =
      known_fused("model.layers.0.mlp.experts.gate_up_proj", {128, 1536, 2048}, attrs, "");
  REQUIRE(moe);
  CHECK(moe->dim == 1);
  CHECK(moe->groups == 1);
  attrs.hidden_size = 5120;
  const auto l4 = known_fused("language_model.model.layers.0.feed_forward.experts.gate_up_proj",
                              {16, 5120, 16384}, attrs, "Llama4ForConditionalGeneration");
  REQUIRE(l4);
  CHECK(l4->dim == 2);
  CHECK(l4->groups == 1);
  CHECK(shardc::fused_packed_line(*l4, 3) == "packed: {parts: 2, dim: -1}");
  attrs.hidden_size = 2880;
  const auto oss = known_fused("model.layers.0.mlp.experts.gate_up_proj", {128, 2880, 5760}, attrs,
                               "GptOssForCausalLM");
  REQUIRE(oss);
  CHECK(oss->dim == 2);
  CHECK(oss->groups == 2880);
  CHECK(shardc::fused_packed_line(*oss, 3) == "packed: {parts: 2, dim: -1, interleave: 1}");
  CHECK(shardc::fused_range_text(*oss, 0, 823) ==
        "elements 0..822 (groups 0..411, cutting a group of 2)");
  const auto bias = known_fused("model.layers.0.mlp.experts.gate_up_proj_bias", {128, 5760}, attrs,
                                "GptOssForCausalLM");
  REQUIRE(bias);
  CHECK(bias->dim == 1);
  CHECK(bias->groups == 2880);
  // Without the hidden size the 3-D form is not guessed; gpt-oss's bias only with gpt-oss.
  CHECK_FALSE(known_fused("x.experts.gate_up_proj", {8, 64, 128}, ModelAttributes{}, ""));
  CHECK_FALSE(known_fused("x.experts.gate_up_proj_bias", {8, 128}, attrs, ""));
}
