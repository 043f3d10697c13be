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

/// One parameter as written in the model description.
struct Param {
  std::string name;              ///< fully-qualified name (FQN), Hugging Face naming
  Shape shape;                   ///< global shape, elements
  DType dtype = DType::Float32;  ///< torch's default dtype when none is given
  bool requires_grad = true;
  SourceLoc loc;  ///< the entry (or the repeat-expanded template) in the model file
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
