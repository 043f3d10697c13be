// Member-wise comparison of two parsed Models (with locations), for the
// differential tests of the params shortcut (unit tests and the fuzz entry).
#pragma once

#include <optional>
#include <string>

#include "core/diagnostics.hpp"
#include "core/model.hpp"

namespace shardc::test {

inline bool same_loc(const SourceLoc& a, const SourceLoc& b) {
  return a.file == b.file && a.line == b.line && a.column == b.column;
}

inline bool same_model(const Model& a, const Model& b) {
  if (a.name != b.name || a.source_path != b.source_path || a.sha256 != b.sha256 ||
      a.params.size() != b.params.size() || a.tied.size() != b.tied.size()) {
    return false;
  }
  for (std::size_t i = 0; i < a.params.size(); ++i) {
    const Param& x = a.params[i];
    const Param& y = b.params[i];
    if (x.name != y.name || x.shape != y.shape || x.dtype != y.dtype ||
        x.requires_grad != y.requires_grad || !same_loc(x.loc, y.loc)) {
      return false;
    }
  }
  for (std::size_t i = 0; i < a.tied.size(); ++i) {
    const TiePair& x = a.tied[i];
    const TiePair& y = b.tied[i];
    if (x.source != y.source || x.alias != y.alias || !same_loc(x.loc, y.loc)) return false;
  }
  const ModelAttributes& x = a.attributes;
  const ModelAttributes& y = b.attributes;
  return x.num_attention_heads == y.num_attention_heads &&
         x.num_key_value_heads == y.num_key_value_heads && x.num_experts == y.num_experts &&
         x.vocab_size == y.vocab_size && x.hidden_size == y.hidden_size &&
         x.head_dim == y.head_dim && x.tie_word_embeddings == y.tie_word_embeddings &&
         x.weight_block_size == y.weight_block_size &&
         same_loc(x.num_experts_loc, y.num_experts_loc);
}

inline bool same_model(const std::optional<Model>& a, const std::optional<Model>& b) {
  return a.has_value() == b.has_value() && (!a || same_model(*a, *b));
}

}  // namespace shardc::test
