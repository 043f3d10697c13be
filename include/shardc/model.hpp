// The model description after parsing (contract §3): every parameter's FQN,
// global shape and dtype, in module (registration) order, with `repeat`
// groups already expanded.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "shardc/diagnostics.hpp"
#include "shardc/dtype.hpp"
#include "shardc/shape.hpp"

namespace shardc {

/// A fused parameter's layout on one dim (contract §5.12): the tensor is
/// several logical tensors ("parts": q|k|v, gate|up) stored in one. With
/// `groups == 1` the parts are blocked (part after part, as GPT-2's
/// `c_attn.split(split_size, dim=2)`); with `groups == G > 1` the dim is G
/// consecutive groups, each holding `parts[i] / G` elements of every part in
/// part order: interleaved when those blocks are equal (gpt-oss
/// `gate_up[..., ::2], gate_up[..., 1::2]`: G = intermediate size, blocks of
/// 1), per group otherwise (Megatron `linear_qkv`: per KV group its q heads,
/// then its k head and its v head). Extents are elements of `dim`.
struct FusedLayout {
  int dim = 0;                          ///< normalized, in [0, ndim)
  std::vector<std::int64_t> parts;      ///< each part's extent on `dim` (sum = the dim)
  std::vector<std::string> part_names;  ///< "q", "k", "v" / "gate", "up" (same length)
  std::int64_t groups = 1;              ///< 1 = blocked; G: G groups of every part
  /// Where the layout comes from: the module code it follows, or "model
  /// description" for a `fused:` entry.
  std::string source;
  bool operator==(const FusedLayout&) const = default;
};

/// One parameter as written in the model description.
struct Param {
  std::string name;              ///< fully-qualified name (FQN), Hugging Face naming
  Shape shape;                   ///< global shape, elements
  DType dtype = DType::Float32;  ///< torch's default dtype when none is given
  bool requires_grad = true;
  SourceLoc loc;  ///< the entry (or the repeat-expanded template) in the model file
  /// `fused:` of the entry (a fused tensor and its parts), or none; import
  /// writes it where the architecture decides a layout its name does not
  /// (include/shardc/fused.hpp).
  std::optional<FusedLayout> fused = std::nullopt;
};

/// A tie: `alias` shares the storage of `source` (contract §5.5). From the
/// model's `tied: [[source, alias]]` or an inventory's `tied_weights:
/// {alias: source}`.
struct TiePair {
  std::string source;
  std::string alias;
  SourceLoc loc;
};

/// Model config values that checks use. Absent values are nullopt.
struct ModelAttributes {
  std::optional<std::int64_t> num_attention_heads;
  std::optional<std::int64_t> num_key_value_heads;
  std::optional<std::int64_t> num_experts;
  /// Rows of the token embedding / output head (config.json `vocab_size`):
  /// the vocab lint recognizes vocab tensors by it (a 2-D param whose dim 0
  /// equals it), whatever their name.
  std::optional<std::int64_t> vocab_size;
  std::optional<std::int64_t> hidden_size;  ///< config.json `hidden_size` (elements)
  /// Rows per attention head (config.json `head_dim`); when absent, checks
  /// use hidden_size / num_attention_heads.
  std::optional<std::int64_t> head_dim;
  std::optional<bool> tie_word_embeddings;
  // Architecture sizes the activation model reads (include/shardc/activations.hpp),
  // config.json names (import copies them; GPT-2's n_layer / n_inner are aliases).
  std::optional<std::int64_t> num_hidden_layers;      ///< decoder layers
  std::optional<std::int64_t> intermediate_size;      ///< dense MLP width (elements)
  std::optional<std::int64_t> moe_intermediate_size;  ///< one routed expert's MLP width
  std::optional<std::int64_t> num_experts_per_tok;    ///< top-k of the router
  std::optional<std::int64_t> n_shared_experts;       ///< DeepSeek's shared experts per layer
  std::optional<std::int64_t> q_lora_rank;            ///< MLA query down-projection rank
  std::optional<std::int64_t> kv_lora_rank;           ///< MLA key/value down-projection rank
  std::optional<std::int64_t> qk_nope_head_dim;       ///< MLA per-head q/k width without RoPE
  std::optional<std::int64_t> qk_rope_head_dim;       ///< MLA per-head q/k RoPE width
  std::optional<std::int64_t> v_head_dim;             ///< MLA per-head value width
  std::optional<std::int64_t> first_k_dense_replace;  ///< DeepSeek: leading dense layers
  /// FP8 block quantization block size [rows, cols] in elements, from
  /// config.json `quantization_config.weight_block_size` (DeepSeek-V3: [128, 128]).
  std::vector<std::int64_t> weight_block_size;
  SourceLoc num_experts_loc;
};

struct Model {
  std::string name;
  std::string source_path;  ///< the file it was read from
  std::string sha256;       ///< hex digest of the file's bytes
  std::vector<Param> params;
  std::vector<TiePair> tied;
  ModelAttributes attributes;
};

}  // namespace shardc
