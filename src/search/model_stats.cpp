// ModelStats: one pass over the model's params (src/search/model_stats.hpp).
#include "search/model_stats.hpp"

#include <algorithm>
#include <map>
#include <string_view>

#include "support/dtype.hpp"

namespace shardc::search {
namespace {

// The layer block of `fqn` ("model.layers.12.mlp..." -> 12), -1 outside the
// blocks: the segment after a `layers` / `h` / `blocks` segment, as the
// training-shape pass reads it.
std::int64_t layer_of(std::string_view fqn) {
  std::size_t pos = 0;
  bool after = false;
  while (pos <= fqn.size()) {
    std::size_t dot = fqn.find('.', pos);
    if (dot == std::string_view::npos) dot = fqn.size();
    const std::string_view seg = fqn.substr(pos, dot - pos);
    if (after) {
      if (seg.empty() || seg.size() > 9 ||
          seg.find_first_not_of("0123456789") != std::string_view::npos)
        return -1;
      return std::stoll(std::string(seg));
    }
    after = seg == "layers" || seg == "h" || seg == "blocks";
    pos = dot + 1;
  }
  return -1;
}

double numel(const Param& p) {
  double n = 1;
  for (const std::int64_t extent : p.shape) n *= static_cast<double>(extent);
  return n;
}

}  // namespace

ModelStats model_stats(const Model& model) {
  ModelStats s;
  const ModelAttributes& a = model.attributes;
  std::map<std::int64_t, double> per_layer;
  std::map<std::int64_t, bool> moe;
  std::vector<std::string> layer0;
  std::int64_t first = -1;
  bool lm_head = false;
  for (const Param& p : model.params) {
    const double n = numel(p);
    const std::int64_t li = layer_of(p.name);
    const bool expert = p.name.find(".experts.") != std::string::npos;
    if (li < 0 && (p.name.find("wpe") != std::string::npos ||
                   p.name.find("position_embeddings") != std::string::npos)) {
      layer0.push_back(p.name);
    }
    if (li >= 0) {
      if (first < 0) first = li;
      if (li == first) layer0.push_back(p.name);
      per_layer[li] += n;
      if (expert) {
        moe[li] = true;
        s.expert += n;
      } else if (p.shape.size() >= 2) {
        s.layer_dense += n;
      } else {
        s.layer_vector += n;
      }
    } else {
      s.outside += n;
      if (p.name.find("embed_tokens") != std::string::npos ||
          p.name.find("wte") != std::string::npos)
        s.embedding += n;
      if (p.name.find("lm_head") != std::string::npos) lm_head = true;
    }
    s.param_bytes = element_size(p.dtype);
  }
  s.layers = static_cast<std::int64_t>(per_layer.size());
  for (const auto& entry : per_layer) {
    s.largest_layer = std::max(s.largest_layer, entry.second);
    s.moe_layer.push_back(moe.count(entry.first) > 0);
  }
  s.heads = a.num_attention_heads.value_or(0);
  s.kv_heads = a.num_key_value_heads.value_or(s.heads);
  s.vocab = a.vocab_size.value_or(0);
  s.experts = a.num_experts.value_or(0);
  s.top_k = a.num_experts_per_tok.value_or(0);
  s.hidden = a.hidden_size.value_or(0);
  const std::int64_t head_dim = a.head_dim.value_or(s.heads > 0 ? s.hidden / s.heads : 0);
  if (a.kv_lora_rank.value_or(0) > 0) {
    const double qk =
        static_cast<double>(a.qk_nope_head_dim.value_or(0) + a.qk_rope_head_dim.value_or(0));
    const double v = static_cast<double>(a.v_head_dim.value_or(head_dim));
    s.attention_dim = (qk + v) / 2;
    s.kv_dim = s.heads * static_cast<std::int64_t>(qk + v);
  } else {
    s.attention_dim = static_cast<double>(head_dim);
    s.kv_dim = 2 * s.kv_heads * head_dim;
  }
  // Active params: experts by top-k / experts; the embedding lookup has no FLOPs, but a tied
  // output head (no lm_head param) multiplies by the embedding.
  const double expert_share =
      s.experts > 0 ? static_cast<double>(s.top_k) / static_cast<double>(s.experts) : 0;
  s.active = s.layer_dense + s.layer_vector + s.expert * expert_share + s.outside - s.embedding +
             (lm_head ? 0 : s.embedding);
  s.arch = activation_arch(a, layer0, s.arch_missing);
  return s;
}

}  // namespace shardc::search
