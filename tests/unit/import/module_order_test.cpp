// Module order: per-architecture registration rules and the natural order.
#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "import/import.hpp"

namespace {

std::vector<shardc::Param> params_of(const std::vector<std::string>& names) {
  std::vector<shardc::Param> out;
  for (const auto& name : names)
    out.push_back(shardc::Param{name, {1}, shardc::DType::BFloat16, true, {}});
  return out;
}

std::vector<std::string> names_of(const std::vector<shardc::Param>& params) {
  std::vector<std::string> out;
  for (const auto& param : params) out.push_back(param.name);
  return out;
}

}  // namespace

TEST_CASE("Llama: hub (sorted) order back to named_parameters() order") {
  const std::vector<std::string> want = {"model.embed_tokens.weight",
                                         "model.layers.0.self_attn.q_proj.weight",
                                         "model.layers.0.self_attn.k_proj.weight",
                                         "model.layers.0.self_attn.v_proj.weight",
                                         "model.layers.0.self_attn.o_proj.weight",
                                         "model.layers.0.mlp.gate_proj.weight",
                                         "model.layers.0.mlp.up_proj.weight",
                                         "model.layers.0.mlp.down_proj.weight",
                                         "model.layers.0.input_layernorm.weight",
                                         "model.layers.0.post_attention_layernorm.weight",
                                         "model.layers.2.self_attn.q_proj.weight",
                                         "model.layers.10.self_attn.q_proj.weight",
                                         "model.norm.weight",
                                         "lm_head.weight"};
  std::vector<std::string> sorted = want;
  std::sort(sorted.begin(), sorted.end());
  auto params = params_of(sorted);
  shardc::CheckpointConfig config;
  config.architectures = {"LlamaForCausalLM"};
  CHECK(shardc::order_params(params, config) == 0);
  CHECK(names_of(params) == want);
}

TEST_CASE("DeepSeek-V3: experts, router gate, shared experts, FP8 scales following weights") {
  const std::vector<std::string> want = {"model.layers.3.self_attn.q_a_proj.weight",
                                         "model.layers.3.self_attn.q_a_proj.weight_scale_inv",
                                         "model.layers.3.self_attn.q_a_layernorm.weight",
                                         "model.layers.3.mlp.experts.2.gate_proj.weight",
                                         "model.layers.3.mlp.experts.2.gate_proj.weight_scale_inv",
                                         "model.layers.3.mlp.experts.2.up_proj.weight",
                                         "model.layers.3.mlp.experts.11.gate_proj.weight",
                                         "model.layers.3.mlp.gate.weight",
                                         "model.layers.3.mlp.gate.e_score_correction_bias",
                                         "model.layers.3.mlp.shared_experts.gate_proj.weight",
                                         "model.layers.3.input_layernorm.weight"};
  std::vector<std::string> shuffled = want;
  std::reverse(shuffled.begin(), shuffled.end());
  auto params = params_of(shuffled);
  shardc::CheckpointConfig config;
  config.model_type = "deepseek_v3";  // matched by model_type when architectures is unknown
  config.architectures = {"SomethingElse"};
  CHECK(shardc::order_params(params, config) == 0);
  CHECK(names_of(params) == want);
}

TEST_CASE("unknown architectures and unknown names: natural order, counted") {
  auto params = params_of({"b.10.w", "b.9.w", "a.w", "b.9.bias"});
  shardc::CheckpointConfig none;
  CHECK(shardc::order_params(params, none) == 4);
  CHECK(names_of(params) == std::vector<std::string>{"a.w", "b.9.bias", "b.9.w", "b.10.w"});

  auto llama = params_of({"model.layers.0.extra.weight", "model.norm.weight"});
  shardc::CheckpointConfig config;
  config.architectures = {"LlamaForCausalLM"};
  CHECK(shardc::order_params(llama, config) == 1);
  CHECK(names_of(llama).back() == "model.norm.weight");
}

TEST_CASE("a literal '#' segment does not share the template of a number (fuzz_safetensors)") {
  // "0" and "#" both looked like the template "#": the second took the first's number slots
  // and read a number it did not have (std::out_of_range; a crash of `shardc import`).
  auto params = params_of({"0", "#", "a.#.w", "a.1.w", "a.#.w.0"});
  shardc::CheckpointConfig none;
  CHECK(shardc::order_params(params, none) == 5);
  CHECK(names_of(params).size() == 5);
  CHECK(names_of(params).front() == "0");
}

TEST_CASE("Qwen3-MoE: transformers 4 registers the router first, transformers 5 the experts") {
  const std::vector<std::string> v4 = {"model.layers.0.mlp.gate.weight",
                                       "model.layers.0.mlp.experts.0.gate_proj.weight",
                                       "model.layers.0.mlp.experts.0.up_proj.weight",
                                       "model.layers.0.mlp.experts.0.down_proj.weight",
                                       "model.layers.0.mlp.experts.1.gate_proj.weight"};
  std::vector<std::string> v5 = v4;
  std::rotate(v5.begin(), v5.begin() + 1, v5.end());  // the router after the experts
  shardc::CheckpointConfig config;
  config.architectures = {"Qwen3MoeForCausalLM"};
  std::vector<std::string> sorted = v4;
  std::sort(sorted.begin(), sorted.end());
  auto params = params_of(sorted);
  CHECK(shardc::order_params(params, config) == 0);  // transformers 4: the default
  CHECK(names_of(params) == v4);
  params = params_of(sorted);
  CHECK(shardc::order_params(params, config, shardc::TransformersOrder::V5) == 0);
  CHECK(names_of(params) == v5);
  // Architectures whose modules did not change order the same under both.
  shardc::CheckpointConfig llama;
  llama.architectures = {"LlamaForCausalLM"};
  auto four = params_of({"model.norm.weight", "model.embed_tokens.weight", "lm_head.weight"});
  auto five = four;
  shardc::order_params(four, llama);
  shardc::order_params(five, llama, shardc::TransformersOrder::V5);
  CHECK(names_of(four) == names_of(five));
}
