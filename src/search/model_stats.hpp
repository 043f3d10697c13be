// What the search reads off a model once (internal to src/search): element
// counts by kind and layer, the architecture for the activation model, the
// active parameter count for FLOPs.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/activations.hpp"
#include "core/model.hpp"

namespace shardc::search {

struct ModelStats {
  std::int64_t layers = 0;
  std::vector<bool> moe_layer;  ///< per layer block: holds routed experts
  /// Elements (global, unpadded).
  double layer_dense = 0;   ///< non-expert params inside layer blocks, 2-D and up
  double layer_vector = 0;  ///< 1-D params inside layer blocks (norms, biases)
  double expert = 0;        ///< routed experts' params
  double outside = 0;       ///< embedding, lm_head, final norm, other stacks' blocks
  /// Blocks of a stack other than the decoder's (a vision tower, core/layer_blocks.hpp):
  /// memory with `outside`, no FLOPs per text token.
  double other_stacks = 0;
  double embedding = 0;      ///< the token embedding (no FLOPs)
  double largest_layer = 0;  ///< the largest layer block (non-expert + expert)
  double active = 0;         ///< params a token's FLOPs use (embedding out, experts x k / E)
  /// Per layer block, in model order: the params a token's FLOPs use in that block
  /// (experts x k / E); `active` = their sum + `head_active`.
  std::vector<double> block_active;
  double head_active = 0;  ///< outside the blocks: lm_head (or the tied embedding), final norm
  std::int64_t heads = 0;
  std::int64_t kv_heads = 0;
  std::int64_t vocab = 0;
  std::int64_t experts = 0;
  std::int64_t top_k = 0;
  std::int64_t hidden = 0;
  double attention_dim = 0;  ///< (qk head dim + v head dim) / 2
  std::int64_t kv_dim = 0;   ///< K + V width per token (elements), for context parallel
  std::optional<ActivationArch> arch;
  std::string arch_missing;
  std::int64_t param_bytes = 2;  ///< the model's param dtype width
  /// The activations' dtype when the training shape sets none: the model's first param's,
  /// as the planner takes it (planner/training_shape.cpp; float32 for GPT-2 and gemma-2's
  /// shipped inventories).
  DType activation_dtype = DType::BFloat16;
  /// Learned position embeddings (GPT-2 `wpe`, `embed_positions`): a lookup, no FLOPs.
  double position_embedding = 0;
  /// Params outside the blocks that are a tie's alias (a tied lm_head): counted in
  /// `outside`, no storage of their own (no FSDP2 unit bytes).
  double tied_outside = 0;
};

ModelStats model_stats(const Model& model);

}  // namespace shardc::search
