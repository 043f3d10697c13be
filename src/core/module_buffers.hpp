// Tensors that are module buffers, not parameters, by the names transformers gives them
// (docs/import.md "Left out"). `import` leaves them out of a checkpoint's model; a model
// file that lists one gets W-MODULE-BUFFER (it would be planned as a trainable param).
#pragma once

#include <string_view>

#include "support/dtype.hpp"
#include "support/shape.hpp"

namespace shardc {

/// Why a tensor named `fqn` of `shape` and `dtype` is a module buffer (a phrase naming
/// the kind and its source: "rotary inv_freq buffers (persistent=False, ...)"), or empty
/// when the name is a parameter's. Rules: `inv_freq` / `original_inv_freq` (rotary,
/// modeling_rope_utils.py), a 0-d `embed_scale` (Gemma's scaled embedding), an integer
/// `position_ids`, the causal masks `attn.bias` (4-D) and `attn.masked_bias` (GPT-2,
/// GPT-J, GPT-NeoX `_keys_to_ignore_on_load_unexpected`).
std::string_view module_buffer_reason(std::string_view fqn, const Shape& shape, DType dtype);

}  // namespace shardc
