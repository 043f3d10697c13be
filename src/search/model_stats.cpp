// ModelStats: one pass over the model's params (src/search/model_stats.hpp).
#include "search/model_stats.hpp"

#include <algorithm>
#include <map>
#include <string_view>

#include "core/layer_blocks.hpp"
#include "support/dtype.hpp"

namespace shardc::search {
namespace {

double numel(const Param& param) {
  double elements = 1;
  for (const std::int64_t extent : param.shape) elements *= static_cast<double>(extent);
  return elements;
}

}  // namespace

ModelStats model_stats(const Model& model) {
  ModelStats stats;
  const ModelAttributes& attrs = model.attributes;
  std::map<std::int64_t, double> per_layer;
  std::map<std::int64_t, double> per_layer_expert;  // routed experts' elements per block
  std::map<std::int64_t, bool> moe;
  std::vector<LayerParamShape> layer0;
  std::int64_t first = -1;
  bool lm_head = false;
  // The decoder's blocks (core/layer_blocks.hpp): another stack (a vision tower) counts
  // with the params outside the blocks, as the training-shape pass reads it.
  std::vector<std::string_view> names;
  names.reserve(model.params.size());
  for (const Param& param : model.params) names.emplace_back(param.name);
  const std::string decoder = decoder_stack(names, attrs.num_hidden_layers);
  for (const Param& param : model.params) {
    const double elements = numel(param);
    const std::int64_t layer = decoder_block(param.name, decoder);
    // Routed experts: a name segment `experts` (transformers, Megatron's
    // `mlp.experts.local_experts`), or torchtitan's `routed_experts` /
    // `inner_experts` (its DeepSeek-V3 GroupedExperts); never `shared_experts`.
    const bool expert = param.name.find(".experts.") != std::string::npos ||
                        param.name.find(".routed_experts.") != std::string::npos ||
                        param.name.find(".inner_experts.") != std::string::npos;
    if (layer < 0 && (param.name.find("wpe") != std::string::npos ||
                      param.name.find("position_embeddings") != std::string::npos)) {
      layer0.push_back({param.name, param.shape});
    }
    if (layer >= 0) {
      if (first < 0) first = layer;
      if (layer == first) layer0.push_back({param.name, param.shape});
      per_layer[layer] += elements;
      if (expert) {
        moe[layer] = true;
        per_layer_expert[layer] += elements;
        stats.expert += elements;
      } else if (param.shape.size() >= 2) {
        stats.layer_dense += elements;
      } else {
        stats.layer_vector += elements;
      }
    } else {
      stats.outside += elements;
      if (layer_block(param.name)) stats.other_stacks += elements;
      if (param.name.find("embed_tokens") != std::string::npos ||
          param.name.find("wte") != std::string::npos)
        stats.embedding += elements;
      if (param.name.find("lm_head") != std::string::npos) lm_head = true;
      if (is_position_embedding(param.name)) stats.position_embedding += elements;
      if (std::any_of(model.tied.begin(), model.tied.end(),
                      [&param](const TiePair& tie) { return tie.alias == param.name; }))
        stats.tied_outside += elements;
    }
    if (&param == &model.params.front()) stats.activation_dtype = param.dtype;
    stats.param_bytes = element_size(param.dtype);
  }
  stats.layers = static_cast<std::int64_t>(per_layer.size());
  for (const auto& entry : per_layer) {
    stats.largest_layer = std::max(stats.largest_layer, entry.second);
    stats.moe_layer.push_back(moe.count(entry.first) > 0);
  }
  stats.heads = attrs.num_attention_heads.value_or(0);
  stats.kv_heads = attrs.num_key_value_heads.value_or(stats.heads);
  stats.vocab = attrs.vocab_size.value_or(0);
  stats.experts = attrs.num_experts.value_or(0);
  stats.top_k = attrs.num_experts_per_tok.value_or(0);
  stats.hidden = attrs.hidden_size.value_or(0);
  const std::int64_t head_dim = attrs.head_dim_or_derived().value_or(0);
  if (attrs.kv_lora_rank.value_or(0) > 0) {
    const double qk_dim = static_cast<double>(attrs.qk_nope_head_dim.value_or(0) +
                                              attrs.qk_rope_head_dim.value_or(0));
    const double v_dim = static_cast<double>(attrs.v_head_dim.value_or(head_dim));
    stats.attention_dim = (qk_dim + v_dim) / 2;
    stats.kv_dim = stats.heads * static_cast<std::int64_t>(qk_dim + v_dim);
  } else {
    stats.attention_dim = static_cast<double>(head_dim);
    stats.kv_dim = 2 * stats.kv_heads * head_dim;
  }
  // Active params: experts by top-k / experts; the embedding lookup has no FLOPs, but a tied
  // output head (no lm_head param) multiplies by the embedding.
  const double expert_share =
      stats.experts > 0 ? static_cast<double>(stats.top_k) / static_cast<double>(stats.experts) : 0;
  // Another stack's blocks (a vision tower) run per image, not per text token: no FLOPs.
  stats.head_active = stats.outside - stats.other_stacks - stats.embedding -
                      stats.position_embedding + (lm_head ? 0 : stats.embedding);
  stats.active =
      stats.layer_dense + stats.layer_vector + stats.expert * expert_share + stats.head_active;
  for (const auto& [layer, elements] : per_layer) {
    const auto found = per_layer_expert.find(layer);
    const double experts = found == per_layer_expert.end() ? 0 : found->second;
    stats.block_active.push_back(elements - experts + experts * expert_share);
  }
  stats.arch = activation_arch(attrs, layer0, stats.arch_missing);
  return stats;
}

}  // namespace shardc::search
