#include "core/module_buffers.hpp"

namespace shardc {

std::string_view module_buffer_reason(std::string_view fqn, const Shape& shape, DType dtype) {
  const auto dot = fqn.rfind('.');
  const std::string_view leaf = dot == std::string_view::npos ? fqn : fqn.substr(dot + 1);
  const std::string_view parent =
      dot == std::string_view::npos ? std::string_view{} : fqn.substr(0, dot);
  const auto parent_dot = parent.rfind('.');
  const std::string_view module =
      parent_dot == std::string_view::npos ? parent : parent.substr(parent_dot + 1);
  // modeling_rope_utils.py: register_buffer("inv_freq", ..., persistent=False); old
  // checkpoints store one per layer (transformers#35255), modeling_utils.py
  // _adjust_missing_and_unexpected_keys ignores `rotary_emb.inv_freq` on load.
  if (leaf == "inv_freq" || leaf == "original_inv_freq")
    return "rotary inv_freq buffers (persistent=False, recomputed by the module: "
           "modeling_rope_utils.py; ignored on load by modeling_utils.py "
           "_adjust_missing_and_unexpected_keys)";
  // Gemma's scaled embedding: nn.Buffer(torch.tensor(embed_scale), persistent=False)
  // (models/gemma2/modeling_gemma2.py Gemma2TextScaledWordEmbedding), a 0-d constant.
  if (leaf == "embed_scale" && shape.empty())
    return "embed_scale buffers (Gemma's scaled embedding constant, persistent=False: "
           "modeling_gemma2.py)";
  // Same function: `position_ids` used to be a persistent buffer, now persistent=False.
  if (leaf == "position_ids" && !can_require_grad(dtype))
    return "int64 position_ids buffers (persistent=False in transformers 5; ignored on load by "
           "modeling_utils.py _adjust_missing_and_unexpected_keys)";
  // GPT-2 / GPT-J / GPT-NeoX causal masks: `_keys_to_ignore_on_load_unexpected =
  // ["attn.bias", "crossattention.bias"]` (modeling_gpt2.py), [r"attn.bias",
  // r"attn.masked_bias"] (modeling_gptj.py), attention.* (modeling_gpt_neox.py). A real
  // bias is 1-D; the mask is [1, 1, n, n] and masked_bias a scalar.
  if ((module == "attn" || module == "attention" || module == "crossattention") &&
      ((leaf == "bias" && shape.size() == 4) || leaf == "masked_bias"))
    return "causal-mask buffers attn.bias / attn.masked_bias (GPT-2, GPT-J, GPT-NeoX: "
           "_keys_to_ignore_on_load_unexpected in their modeling files)";
  return {};
}

}  // namespace shardc
