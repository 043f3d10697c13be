// Layer blocks: which params belong to which transformer block of which stack.
//
// A block's params share a prefix ending in a `layers` / `h` / `layer` / `blocks` segment
// and the numeric segment after it ("model.layers.12.mlp.up_proj.weight": stack
// "model.layers", block 12). A model may hold more than one stack: Llama-4's
// `vision_model.model.layers.{0..33}` beside `language_model.model.layers.{0..47}`;
// keyed by the bare index, their blocks 0..33 would collide (a planner and search bug
// found 2026-12-05: 34 "layers" on stage 0, sized as text MoE layers). The activation
// model (core/activations.hpp) and the layout search size the decoder's stack only.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace shardc {

/// The stack and block of `fqn`: the prefix up to and including the block-list segment,
/// and the index after it; nullopt outside every block (embeddings, final norm, head).
struct LayerBlock {
  std::string_view stack;  ///< "model.layers" (a view into the FQN)
  std::int64_t index = 0;
};
std::optional<LayerBlock> layer_block(std::string_view fqn);

/// The decoder's stack among the stacks of `fqns` (model order): the one stack whose
/// block count equals `num_hidden_layers` when exactly one does, else the stack with the
/// most blocks (the last of equals: vision towers come first in Hugging Face's
/// multimodal naming); "" when no FQN is in a block.
std::string decoder_stack(const std::vector<std::string_view>& fqns,
                          std::optional<std::int64_t> num_hidden_layers);

/// The decoder block of `fqn` (its index), or -1: outside every block or in another stack.
std::int64_t decoder_block(std::string_view fqn, std::string_view decoder);

/// A learned absolute position embedding: a `wpe` segment (GPT-2's `transformer.wpe`),
/// `position_embeddings` (BERT-style) or `embed_positions` (OPT). A lookup: no FLOPs per
/// token, and a model with one has no RoPE (core/activations.hpp).
bool is_position_embedding(std::string_view fqn);

/// A vocab tensor by name: the input embedding or the output head of the usual spellings
/// (`embed_tokens.weight`, `lm_head.weight`, `wte.weight`, `tok_embeddings.weight`,
/// `word_embeddings.weight`, `output.weight`, `output_layer.weight`, `embed_in.weight`,
/// `embed_out.weight` as the name's end). W-VOCAB's rule when the model states no
/// `vocab_size` (planner/lints.cpp) and import's check of config.json's `vocab_size`.
bool has_vocab_name(std::string_view fqn);

}  // namespace shardc
