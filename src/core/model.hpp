// The model description after parsing (contract §3): every parameter's FQN,
// global shape and dtype, in module (registration) order, with `repeat`
// groups already expanded.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/diagnostics.hpp"
#include "support/dtype.hpp"
#include "support/shape.hpp"

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

/// A parameter indexed by attention head on one dim (contract §5.13): gpt-oss's
/// attention sinks `[num_attention_heads]` (transformers models/gpt_oss/
/// modeling_gpt_oss.py: `self.sinks = nn.Parameter(torch.empty(num_attention_heads))`,
/// one logit per q head), Cohere's per-head q_norm `[num_heads, head_dim]` and
/// k_norm `[num_key_value_heads, head_dim]` (models/cohere/modeling_cohere.py
/// CohereLayerNorm((num_heads, head_dim))). Each rank must hold the heads its
/// q (or k) projection rows hold, so its split on `dim` must be the split of the
/// projection's head dim.
struct HeadIndexed {
  int dim = 0;      ///< normalized, in [0, ndim)
  bool kv = false;  ///< indexed by KV head (follows k_proj) instead of q head (q_proj)
  /// Where the fact comes from: the module code, or "model description".
  std::string source;
  bool operator==(const HeadIndexed&) const = default;
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
  /// (src/core/fused.hpp).
  std::optional<FusedLayout> fused = std::nullopt;
  /// `head_indexed:` of the entry, or none; import writes it from the
  /// architecture (src/core/fused.hpp known_head_indexed).
  std::optional<HeadIndexed> head_indexed = std::nullopt;
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
  /// Rows per attention head as transformers' attention modules read it:
  /// `head_dim`, else hidden_size // num_attention_heads (floor: getattr(config,
  /// "head_dim", config.hidden_size // config.num_attention_heads)); nullopt
  /// without either.
  [[nodiscard]] std::optional<std::int64_t> head_dim_or_derived() const {
    if (head_dim) return head_dim;
    if (hidden_size && num_attention_heads && *num_attention_heads > 0)
      return *hidden_size / *num_attention_heads;
    return std::nullopt;
  }
  std::optional<bool> tie_word_embeddings;
  // Architecture sizes the activation model reads (src/core/activations.hpp),
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
  /// The `attributes:` key in the model file, or the file alone when it has
  /// none: where a missing size is reported (E-TRAINING of `shardc cost`).
  SourceLoc loc;
};

/// A sub-model (contract §3.2): a vision or audio tower whose config
/// (`vision_config`, `audio_config` of a multimodal config.json) has its own
/// head counts and sizes. Every param whose FQN starts with `prefix` + "."
/// is checked against `attributes` instead of the model's (text) ones.
struct SubModel {
  std::string prefix;  ///< FQN prefix, e.g. "visual" or "vision_model"
  std::string config;  ///< the config.json key it came from ("vision_config"), or empty
  ModelAttributes attributes;
  SourceLoc loc;
};

struct Model {
  std::string name;
  std::string source_path;  ///< the file it was read from
  std::string sha256;       ///< hex digest of the file's bytes
  std::vector<Param> params;
  std::vector<TiePair> tied;
  ModelAttributes attributes;
  /// Sub-models by FQN prefix (a param takes the longest prefix it starts with).
  std::vector<SubModel> submodels;
  /// `module_order:` as written: "" (not said), "module" (named_parameters()
  /// order, e.g. tools/dump_model.py), "natural" (shardc import had no exact
  /// rules: validate repeats W-MODULE-ORDER until the order is confirmed).
  std::string module_order;
  SourceLoc module_order_loc;

  /// The sub-model a param belongs to, or nullptr for the main (text) model.
  [[nodiscard]] const SubModel* submodel_of(std::string_view fqn) const {
    const SubModel* best = nullptr;
    for (const SubModel& s : submodels) {
      if (fqn.size() > s.prefix.size() && fqn.starts_with(s.prefix) &&
          fqn[s.prefix.size()] == '.' && (best == nullptr || s.prefix.size() > best->prefix.size()))
        best = &s;
    }
    return best;
  }
  /// The attributes a param named `fqn` is checked against: its sub-model's
  /// (longest matching prefix), else the model's.
  [[nodiscard]] const ModelAttributes& attributes_of(std::string_view fqn) const {
    const SubModel* s = submodel_of(fqn);
    return s != nullptr ? s->attributes : attributes;
  }
};

}  // namespace shardc
