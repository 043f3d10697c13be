// Registration-order rules per architecture: for each module (path with
// layer/expert indices as `#`), the order in which its __init__ registers
// its children. named_parameters() walks modules depth-first in that order
// (ModuleList children by index), so these tables give the exact order.
//
// Sources: the transformers modeling files (modeling_llama.py, modeling_qwen2.py,
// modeling_qwen3_moe.py, modeling_mixtral.py, modeling_gemma2.py,
// modeling_gpt2.py, modeling_gpt_oss.py, modeling_llama4.py) and DeepSeek-V3's
// modeling_deepseek.py; checked against the inventories in tests/data/models
// (dumped from the real modules). Pre-stacked experts (transformers 5's fused
// MixtralExperts / Qwen3MoeExperts / DeepseekV3Experts, gpt-oss, Llama-4)
// register gate_up_proj before down_proj.
//
// Syntax: one `parent: child child ...` per line; the empty parent is the
// root. Leaves of a module without a line use kLeafOrder.
#include "import/module_order.hpp"

namespace shardc::imp {
namespace {

constexpr std::string_view kLlama = R"(
: model lm_head
model: embed_tokens layers norm
model.layers.#: self_attn mlp input_layernorm post_attention_layernorm
model.layers.#.self_attn: q_proj k_proj v_proj o_proj q_norm k_norm
model.layers.#.mlp: gate_proj up_proj down_proj
)";

constexpr std::string_view kQwen3Moe = R"(
: model lm_head
model: embed_tokens layers norm
model.layers.#: self_attn mlp input_layernorm post_attention_layernorm
model.layers.#.self_attn: q_proj k_proj v_proj o_proj q_norm k_norm
model.layers.#.mlp: gate experts gate_proj up_proj down_proj
model.layers.#.mlp.experts.#: gate_proj up_proj down_proj
model.layers.#.mlp.experts: gate_up_proj down_proj
)";

// transformers 5's Qwen3MoeSparseMoeBlock.__init__ sets `self.experts` before `self.gate`.
constexpr std::string_view kQwen3MoeTransformers5 = R"(
: model lm_head
model: embed_tokens layers norm
model.layers.#: self_attn mlp input_layernorm post_attention_layernorm
model.layers.#.self_attn: q_proj k_proj v_proj o_proj q_norm k_norm
model.layers.#.mlp: experts gate gate_proj up_proj down_proj
model.layers.#.mlp.experts.#: gate_proj up_proj down_proj
model.layers.#.mlp.experts: gate_up_proj down_proj
)";

constexpr std::string_view kMixtral = R"(
: model lm_head
model: embed_tokens layers norm
model.layers.#: self_attn block_sparse_moe input_layernorm post_attention_layernorm
model.layers.#.self_attn: q_proj k_proj v_proj o_proj
model.layers.#.block_sparse_moe: gate experts
model.layers.#.block_sparse_moe.experts.#: w1 w2 w3
model.layers.#.mlp: gate experts
model.layers.#.mlp.experts: gate_up_proj down_proj
)";

constexpr std::string_view kDeepseekV3 = R"(
: model lm_head
model: embed_tokens layers norm
model.layers.#: self_attn mlp input_layernorm post_attention_layernorm
model.layers.#.self_attn: q_proj q_a_proj q_a_layernorm q_b_proj kv_a_proj_with_mqa kv_a_layernorm kv_b_proj o_proj
model.layers.#.mlp: gate_proj up_proj down_proj experts gate shared_experts
model.layers.#.mlp.experts.#: gate_proj up_proj down_proj
model.layers.#.mlp.experts: gate_up_proj down_proj
model.layers.#.mlp.shared_experts: gate_proj up_proj down_proj
model.layers.#.mlp.gate: weight e_score_correction_bias
)";

constexpr std::string_view kGemma2 = R"(
: model lm_head
model: embed_tokens layers norm
model.layers.#: self_attn mlp input_layernorm post_attention_layernorm pre_feedforward_layernorm post_feedforward_layernorm
model.layers.#.self_attn: q_proj k_proj v_proj o_proj
model.layers.#.mlp: gate_proj up_proj down_proj
)";

constexpr std::string_view kGpt2 = R"(
: transformer lm_head
transformer: wte wpe h ln_f
transformer.h.#: ln_1 attn ln_2 mlp
transformer.h.#.attn: c_attn c_proj
transformer.h.#.mlp: c_fc c_proj
)";

// GptOssForCausalLM: attention sinks are the attention module's own param,
// registered before its projections; GptOssMLP holds router then experts.
constexpr std::string_view kGptOss = R"(
: model lm_head
model: embed_tokens layers norm
model.layers.#: self_attn mlp input_layernorm post_attention_layernorm
model.layers.#.self_attn: sinks q_proj k_proj v_proj o_proj
model.layers.#.mlp: router experts
model.layers.#.mlp.experts: gate_up_proj gate_up_proj_bias down_proj down_proj_bias
)";

// Llama4ForConditionalGeneration: the vision tower, the projector, then the text model
// (Llama4TextMoe: experts, router, shared_expert; dense layers Llama4TextMLP).
constexpr std::string_view kLlama4 = R"(
: vision_model multi_modal_projector language_model
vision_model: class_embedding positional_embedding_vlm patch_embedding layernorm_pre layernorm_post model vision_adapter
vision_model.patch_embedding: linear
vision_model.model: layers
vision_model.model.layers.#: self_attn mlp input_layernorm post_attention_layernorm
vision_model.model.layers.#.self_attn: q_proj k_proj v_proj o_proj
vision_model.model.layers.#.mlp: fc1 fc2
vision_model.vision_adapter: mlp
vision_model.vision_adapter.mlp: fc1 fc2
multi_modal_projector: linear_1
language_model: model lm_head
language_model.model: embed_tokens layers norm
language_model.model.layers.#: self_attn feed_forward input_layernorm post_attention_layernorm
language_model.model.layers.#.self_attn: q_proj k_proj v_proj o_proj
language_model.model.layers.#.feed_forward: experts router shared_expert gate_proj up_proj down_proj
language_model.model.layers.#.feed_forward.experts: gate_up_proj down_proj
language_model.model.layers.#.feed_forward.shared_expert: gate_proj up_proj down_proj
)";

// Selected by any of `keys` (config.json `architectures` entries, then `model_type`).
constexpr ArchRuleText kRules[] = {
    {{"LlamaForCausalLM", "llama", "MistralForCausalLM", "mistral"}, "", kLlama},
    {{"Qwen2ForCausalLM", "qwen2", "Qwen3ForCausalLM", "qwen3"}, "", kLlama},
    {{"Qwen3MoeForCausalLM", "qwen3_moe", "", ""}, "", kQwen3Moe, 4},
    {{"Qwen3MoeForCausalLM", "qwen3_moe", "", ""}, "", kQwen3MoeTransformers5, 5},
    {{"MixtralForCausalLM", "mixtral", "", ""}, "", kMixtral},
    {{"DeepseekV3ForCausalLM", "deepseek_v3", "", ""}, "", kDeepseekV3},
    {{"Gemma2ForCausalLM", "gemma2", "", ""}, "", kGemma2},
    {{"GPT2LMHeadModel", "gpt2", "", ""}, "transformer", kGpt2},
    {{"GptOssForCausalLM", "gpt_oss", "", ""}, "", kGptOss},
    {{"Llama4ForConditionalGeneration", "llama4", "", ""}, "", kLlama4},
};

}  // namespace

std::span<const ArchRuleText> arch_rule_texts() { return kRules; }

}  // namespace shardc::imp
