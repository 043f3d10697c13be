// Activation memory per layer, stage and schedule (src/core/activations.hpp:
// every term, its formula and its source are listed there).
#include "core/activations.hpp"

#include <algorithm>
#include <string_view>

#include "core/layer_blocks.hpp"
#include "support/saturating.hpp"

namespace shardc {
namespace {

using saturating::add;
using saturating::ceil_div;
using saturating::mul;

bool ends_with(const std::string& text, std::string_view tail) {
  return text.size() >= tail.size() &&
         text.compare(text.size() - tail.size(), tail.size(), tail) == 0;
}
bool contains(const std::string& text, std::string_view part) {
  return text.find(part) != std::string::npos;
}

// The per-rank sizes one micro-batch sees.
struct Local {
  std::int64_t e = 2;          // activation element bytes
  std::int64_t s = 0;          // tokens of one sequence on the rank (seq_len / cp)
  std::int64_t s_kv = 0;       // keys one query attends to (the whole sequence)
  std::int64_t b = 1;          // micro-batch
  std::int64_t tokens = 0;     // T = s b
  std::int64_t tokens_h = 0;   // tokens of width-h tensors (T / t with SP)
  std::int64_t heads = 0;      // a_q / t
  std::int64_t kv_heads = 0;   // max(1, a_kv / t)
  std::int64_t inter = 0;      // I / t
  std::int64_t moe_inter = 0;  // I_e / t_e
  std::int64_t vocab = 0;      // V / t (vocab-parallel)
  bool fused = false;          // training.kernels: fused (Megatron-Core + Transformer Engine)
};

Local local_sizes(const ActivationArch& arch, const TrainingShape& shape,
                  std::int64_t element_bytes, const ActivationLayout& layout) {
  Local local;
  local.e = element_bytes;
  const std::int64_t seq = shape.seq_len.value_or(0);
  local.s = ceil_div(seq, std::max<std::int64_t>(1, layout.cp));
  local.s_kv = seq;
  local.b = shape.micro_batch_size;
  local.tokens = mul(local.s, local.b);
  local.tokens_h = layout.sequence_parallel ? ceil_div(local.tokens, layout.tp) : local.tokens;
  local.heads = ceil_div(arch.heads, layout.tp);
  local.kv_heads = std::max<std::int64_t>(1, ceil_div(arch.kv_heads, layout.tp));
  local.inter = ceil_div(arch.intermediate, layout.tp);
  local.moe_inter = ceil_div(arch.moe_intermediate, layout.expert_tp);
  local.vocab = ceil_div(arch.vocab, layout.tp);
  local.fused = shape.kernels == ActivationKernels::Fused;
  return local;
}

constexpr const char* kFusedNormSource =
    "Megatron-Core + Transformer Engine: TELayerNormColumnParallelLinear (LayerNormLinear) "
    "saves the norm input, rsigma (LayerNorm: mu and rsigma) and ln_out for the weight "
    "gradient, the sequence-parallel shard with SP (all-gathered again in backward)";

constexpr const char* kNormSource =
    "transformers LlamaRMSNorm.forward (to(float32), pow, rsqrt, weight * x); LayerNorm: aten "
    "native_layer_norm saves input, mean, rstd";

class Terms {
 public:
  void add(std::string name, std::int64_t bytes, std::string formula, std::string source) {
    if (bytes == 0) return;
    out_.push_back({std::move(name), bytes, std::move(formula), std::move(source)});
  }
  std::vector<ActivationTerm>& out() { return out_; }

 private:
  std::vector<ActivationTerm> out_;
};

// A width-`width` norm over `tokens` tokens (`prefix`.norm_*), its output
// saved by the next linear when `feeds_linear`.
struct NormLayer {
  std::string prefix;
  std::int64_t tokens = 0;
  std::int64_t width = 0;
  bool feeds_linear = false;
};

void norm_terms(Terms& terms, const ActivationArch& arch, const Local& local,
                const NormLayer& norm) {
  const std::string& prefix = norm.prefix;
  const std::int64_t tokens = norm.tokens;
  const std::int64_t width = norm.width;
  const bool feeds_linear = norm.feeds_linear;
  if (local.fused) {
    terms.add(prefix + ".norm_input", mul({local.e, tokens, width}), "e T w", kFusedNormSource);
    terms.add(prefix + (arch.layer_norm ? ".norm_mean_rstd" : ".norm_rstd"),
              mul(arch.layer_norm ? 8 : 4, tokens), arch.layer_norm ? "8 T" : "4 T",
              kFusedNormSource);
    if (feeds_linear)
      terms.add(prefix + ".linear_input", mul({local.e, tokens, width}), "e T w", kFusedNormSource);
    return;
  }
  if (arch.gemma_norm) {
    // Gemma2RMSNorm: `self._norm(x.float()) * (1.0 + self.weight.float())` keeps the fp32
    // input, rstd and the fp32 normalized tensor; the output is cast back.
    terms.add(prefix + ".norm_input_fp32", mul({4, tokens, width}), "4 T w",
              "transformers Gemma2RMSNorm.forward");
    terms.add(prefix + ".norm_rstd", mul({4, tokens}), "4 T", "transformers Gemma2RMSNorm.forward");
    terms.add(prefix + ".norm_normalized", mul({4, tokens, width}), "4 T w",
              "transformers Gemma2RMSNorm.forward (fp32, saved by * (1 + weight))");
  } else if (arch.layer_norm) {
    terms.add(prefix + ".norm_input", mul({local.e, tokens, width}), "e T w", kNormSource);
    terms.add(prefix + ".norm_mean_rstd", mul({8, tokens}), "8 T", kNormSource);
  } else {
    terms.add(prefix + ".norm_input_fp32", mul({4, tokens, width}), "4 T w", kNormSource);
    terms.add(prefix + ".norm_rstd", mul({4, tokens}), "4 T", kNormSource);
    terms.add(prefix + ".norm_normalized", mul({local.e, tokens, width}), "e T w", kNormSource);
  }
  if (feeds_linear) {
    terms.add(prefix + ".linear_input", mul({local.e, tokens, width}), "e T w",
              "nn.Linear saves its input (the norm output)");
  }
}

constexpr const char* kFusedAttentionSource =
    "Megatron-Core + Transformer Engine: TEDotProductAttention (flash) saves q, k, v (after "
    "TE's fused RoPE, which keeps no copy), its output and the logsumexp; linear_proj saves its "
    "input, the same storage as that output";

// Attention under `kernels: fused` (Megatron-Core SelfAttention with TE): q, k, v as flash
// saves them, the output once (flash and linear_proj share it), the logsumexp unless
// selective recompute runs the core again.
void fused_gqa_terms(Terms& terms, const ActivationArch& arch, const Local& local, Recompute mode) {
  const std::int64_t q_bytes = mul({local.e, local.tokens, local.heads, arch.head_dim});
  const std::int64_t kv_bytes = mul({local.e, local.tokens, local.kv_heads, arch.head_dim});
  terms.add("attention.qkv", add(q_bytes, mul(2, kv_bytes)), "e T (a_q + 2 a_kv) d / t",
            kFusedAttentionSource);
  if (arch.qk_norm) {
    terms.add("attention.qk_norm",
              add(mul({local.e, local.tokens, local.heads + local.kv_heads, arch.head_dim}),
                  mul({4, local.tokens, local.heads + local.kv_heads})),
              "e T (a_q + a_kv) d / t + 4 T (a_q + a_kv) / t",
              "Megatron-Core q_layernorm / k_layernorm (TENorm): input and rsigma");
  }
  terms.add("attention.out", q_bytes, "e T a_q d / t", kFusedAttentionSource);
  if (mode == Recompute::None) {
    terms.add("attention.softmax_lse", mul({4, local.b, local.heads, local.s}), "4 b a_q s / t",
              kFusedAttentionSource);
  }
}

// Attention of a dense or GQA layer (q_proj/k_proj/v_proj, RoPE, core, o_proj).
void gqa_terms(Terms& terms, const ActivationArch& arch, const TrainingShape& shape,
               const Local& local, Recompute mode) {
  if (local.fused) {
    fused_gqa_terms(terms, arch, local, mode);
    return;
  }
  const std::int64_t head_dim = arch.head_dim;
  const std::int64_t q_bytes = mul({local.e, local.tokens, local.heads, head_dim});
  const std::int64_t kv_bytes = mul({local.e, local.tokens, local.kv_heads, head_dim});
  const bool eager = shape.attention == AttentionImpl::Eager;
  // With RoPE, q_embed / k_embed (new tensors) are what attention saves: `q * cos` saves only
  // cos (which needs no grad), so the projection outputs of q and k are not kept; v is.
  if (eager && local.kv_heads < local.heads) {
    // eager_attention_forward: repeat_kv copies K and V to a_q heads; the matmuls save the
    // copies (k_embed and v themselves are then freed).
    terms.add("attention.qkv", mul(3, q_bytes), "3 e T a_q d / t",
              "q_embed and repeat_kv(k_embed), repeat_kv(v), saved by the eager matmuls");
  } else {
    // With RoPE, q_embed / k_embed (new tensors) are what attention saves: `q * cos` saves
    // only cos (which needs no grad), so the projection outputs of q and k are not kept.
    terms.add("attention.qkv", add(q_bytes, mul(2, kv_bytes)), "e T (a_q + 2 a_kv) d / t",
              arch.rope ? "q_embed / k_embed (apply_rotary_pos_emb) and v_proj's output, saved by "
                          "attention"
                        : "q / k / v projection outputs, saved by attention");
  }
  if (arch.qk_norm) {
    // Qwen3Attention: q_norm / k_norm over head_dim before RoPE.
    terms.add("attention.qk_norm",
              add(mul({4 + local.e, local.tokens, local.heads + local.kv_heads, head_dim}),
                  mul({4, local.tokens, local.heads + local.kv_heads})),
              "(4 + e) T (a_q + a_kv) d / t + 4 T (a_q + a_kv) / t",
              "transformers Qwen3Attention q_norm / k_norm (RMSNorm per head)");
  }
  if (eager) {
    if (mode == Recompute::None && !arch.rope) {
      // GPT-2's eager attention takes the softmax in e (no fp32 upcast): one s x s tensor.
      terms.add("attention.scores", mul({local.e, local.b, local.heads, local.s, local.s_kv}),
                "e b a_q s s_kv / t",
                "transformers GPT2 eager_attention_forward: softmax in the activation dtype");
    } else if (mode == Recompute::None) {
      terms.add("attention.scores", mul({4 + local.e, local.b, local.heads, local.s, local.s_kv}),
                "(4 + e) b a_q s s_kv / t",
                "eager_attention_forward: softmax(dtype=float32) output and its cast to e");
      if (arch.softcap) {
        terms.add("attention.softcap", mul({local.e, local.b, local.heads, local.s, local.s_kv}),
                  "e b a_q s s_kv / t",
                  "transformers Gemma2 eager_attention_forward: tanh(scores / softcap) output");
      }
    }
  } else if (mode == Recompute::None) {
    terms.add("attention.out", q_bytes, "e T a_q d / t",
              "scaled_dot_product_attention output (flash / efficient kernels save it)");
    terms.add("attention.softmax_lse", mul({4, local.b, local.heads, local.s}), "4 b a_q s / t",
              "logsumexp of _scaled_dot_product_flash_attention");
  }
  terms.add("attention.o_proj_input", q_bytes, "e T a_q d / t",
            "attn_output.transpose(1, 2).contiguous(), saved by o_proj");
}

// DeepSeek-V3 multi-head latent attention (transformers DeepseekV3Attention). The
// q_a / kv_a projection outputs are not kept (their RMSNorms keep the fp32 copies), nor
// q_b's (RoPE's muls save only cos / sin; torch.cat makes the query states); kv_b's
// output is, as the storage of the value view.
void mla_terms(Terms& terms, const ActivationArch& arch, const TrainingShape& shape,
               const Local& local, Recompute mode) {
  const std::int64_t dqk = arch.qk_nope_head_dim + arch.qk_rope_head_dim;
  const std::string src = "transformers DeepseekV3Attention.forward";
  if (arch.q_lora_rank > 0) {
    norm_terms(terms, arch, local,
               {"attention.q_a_layernorm", local.tokens, arch.q_lora_rank, true});
  }
  norm_terms(terms, arch, local,
             {"attention.kv_a_layernorm", local.tokens, arch.kv_lora_rank, true});
  terms.add("attention.kv_b",
            mul({local.e, local.tokens, local.heads, arch.qk_nope_head_dim + arch.v_head_dim}),
            "e T a_q (d_nope + d_v) / t", src + ": kv_b_proj output (the value view's storage)");
  terms.add("attention.qk_cat", mul({2, local.e, local.tokens, local.heads, dqk}),
            "2 e T a_q (d_nope + d_rope) / t", src + ": torch.cat of query and key states");
  if (local.fused) {
    // TEDotProductAttention's output is linear_proj's input (one storage).
    terms.add("attention.out", mul({local.e, local.tokens, local.heads, arch.v_head_dim}),
              "e T a_q d_v / t", kFusedAttentionSource);
    if (mode == Recompute::None) {
      terms.add("attention.softmax_lse", mul({4, local.b, local.heads, local.s}), "4 b a_q s / t",
                kFusedAttentionSource);
    }
    return;
  }
  if (shape.attention == AttentionImpl::Eager) {
    if (mode == Recompute::None) {
      terms.add("attention.scores", mul({4 + local.e, local.b, local.heads, local.s, local.s_kv}),
                "(4 + e) b a_q s s_kv / t", "eager_attention_forward softmax fp32 and cast");
    }
  } else if (mode == Recompute::None) {
    terms.add("attention.out", mul({local.e, local.tokens, local.heads, arch.v_head_dim}),
              "e T a_q d_v / t", "scaled_dot_product_attention output");
    terms.add("attention.softmax_lse", mul({4, local.b, local.heads, local.s}), "4 b a_q s / t",
              "logsumexp of the flash / efficient kernels");
  }
  terms.add("attention.o_proj_input", mul({local.e, local.tokens, local.heads, arch.v_head_dim}),
            "e T a_q d_v / t", "attn_output reshape, saved by o_proj");
}

constexpr const char* kFusedSwigluSource =
    "Megatron-Core MLP with TE: linear_fc1's output [gate | up] saved by bias_swiglu_impl "
    "(fused, recomputes the activation in backward), the product saved by linear_fc2";

void gated_mlp_terms(Terms& terms, const Local& local, const std::string& name, std::int64_t tokens,
                     std::int64_t width, const std::string& src) {
  if (local.fused) {
    terms.add(name, mul({3, local.e, tokens, width}), "3 e T I / t", kFusedSwigluSource);
    return;
  }
  terms.add(name, mul({4, local.e, tokens, width}), "4 e T I / t",
            src + ": gate_proj, up_proj outputs, act(gate), act(gate) * up");
}

void dense_mlp_terms(Terms& terms, const ActivationArch& arch, const Local& local) {
  if (arch.gated_mlp) {
    gated_mlp_terms(terms, local, "mlp.gate_up_act", local.tokens, local.inter,
                    "transformers LlamaMLP.forward");
    return;
  }
  if (local.fused) {
    terms.add("mlp.fc_gelu", mul({2, local.e, local.tokens, local.inter}), "2 e T I / t",
              "Megatron-Core MLP with TE: linear_fc1's output saved by the fused bias-GeLU, "
              "the GeLU output saved by linear_fc2");
    return;
  }
  terms.add("mlp.fc_gelu", mul({5, local.e, local.tokens, local.inter}), "5 e T I / t",
            "transformers GPT2MLP with NewGELUActivation: fc output, pow input, tanh, 0.5 x, "
            "1 + tanh; c_proj input");
}

void moe_terms(Terms& terms, const ActivationArch& arch, const TrainingShape& shape,
               const Local& local) {
  const std::string src = "transformers MoE block (router, per-expert loop)";
  const std::int64_t top_k = std::max<std::int64_t>(1, arch.top_k);
  std::int64_t routed = mul(local.tokens, top_k);
  std::string routed_text = "T k";
  if (shape.moe.capacity_factor) {
    routed = static_cast<std::int64_t>(static_cast<double>(routed) * *shape.moe.capacity_factor +
                                       0.999999);
    routed_text = "c T k";
  }
  terms.add("moe.router",
            add(add(mul({4, local.tokens, arch.experts}), mul({4 + 8, local.tokens, top_k})),
                mul(4, local.tokens)),
            "4 T E + 12 T k + 4 T",
            src +
                ": softmax(router_logits, float32) output, top-k indices (int64) and weights "
                "(fp32), their sum");
  if (arch.mla()) {
    terms.add("moe.router_fp32_input",
              add(mul({4, local.tokens, arch.hidden}),
                  mul({1 + 8, local.tokens, arch.experts > 0 ? 1 : 0})),
              "4 T h + 9 T",
              "transformers DeepseekV3TopkRouter: F.linear(hidden_states.float(), ...) "
              "keeps the fp32 input; group masks and indices");
  }
  if (local.fused) {
    // Megatron-Core MoELayer with TEGroupedMLP: the permutation keeps the sorted indices
    // (int64) and the routing probs (fp32); the grouped fc1 its input (the permuted tokens);
    // unpermute with probs keeps the fc2 output for the probs' gradient.
    const std::string fused_src = "Megatron-Core MoELayer (token permutation, TEGroupedMLP)";
    terms.add("moe.dispatch_indices", mul(12, routed), "12 " + routed_text,
              fused_src + ": sorted indices (int64) and routing probs (fp32) per routed token");
    terms.add("moe.dispatched", mul({local.e, routed, arch.hidden}), "e " + routed_text + " h",
              fused_src + ": the permuted tokens, linear_fc1's input");
    gated_mlp_terms(terms, local, "moe.experts", routed, local.moe_inter, fused_src);
    terms.add("moe.expert_out", mul({local.e, routed, arch.hidden}), "e " + routed_text + " h",
              fused_src + ": linear_fc2's output, saved by unpermute's * probs");
    if (arch.shared_experts > 0) {
      gated_mlp_terms(terms, local, "moe.shared_experts", local.tokens,
                      mul(arch.shared_experts, arch.moe_intermediate), fused_src);
    }
    return;
  }
  terms.add("moe.dispatch_indices", mul(20, routed), "20 " + routed_text,
            src + ": token_idx and top_k_pos (int64) per routed token, its fp32 routing weight");
  terms.add("moe.dispatched", mul({local.e, routed, arch.hidden}), "e " + routed_text + " h",
            src + ": hidden_states[token_idx] per expert (the tokens EP dispatches)");
  gated_mlp_terms(terms, local, "moe.experts", routed, local.moe_inter, src + ", each expert");
  terms.add("moe.expert_out", mul({2 * local.e, routed, arch.hidden}), "2 e " + routed_text + " h",
            src +
                ": expert output saved by * routing weight, and the weighted output cast back "
                "to e saved by index_add_");
  if (arch.shared_experts > 0) {
    gated_mlp_terms(terms, local, "moe.shared_experts", local.tokens,
                    ceil_div(mul(arch.shared_experts, arch.moe_intermediate), 1),
                    src + ": shared_experts");
  }
}

// Adds `from` (bytes x factor) into `into`, merging terms by name.
void merge(std::vector<ActivationTerm>& into, const std::vector<ActivationTerm>& from,
           std::int64_t factor) {
  for (const ActivationTerm& term : from) {
    auto it = std::find_if(into.begin(), into.end(), [&](const ActivationTerm& existing) {
      return existing.name == term.name;
    });
    if (it == into.end()) {
      into.push_back(term);
      into.back().bytes = mul(term.bytes, factor);
    } else {
      it->bytes = add(it->bytes, mul(term.bytes, factor));
    }
  }
}

std::int64_t sum(const std::vector<ActivationTerm>& terms) {
  std::int64_t total = 0;
  for (const ActivationTerm& term : terms) total = add(total, term.bytes);
  return total;
}

}  // namespace

std::optional<ActivationArch> activation_arch(const ModelAttributes& attrs,
                                              const std::vector<LayerParamShape>& layer_params,
                                              std::string& missing) {
  ActivationArch arch;
  auto need = [&missing](const std::optional<std::int64_t>& value, const char* name) {
    if (!value && missing.empty()) missing = name;
    return value.value_or(0);
  };
  arch.hidden = need(attrs.hidden_size, "hidden_size");
  arch.heads = need(attrs.num_attention_heads, "num_attention_heads");
  arch.layers = attrs.num_hidden_layers.value_or(0);
  arch.vocab = need(attrs.vocab_size, "vocab_size");
  arch.kv_heads = attrs.num_key_value_heads.value_or(arch.heads);
  arch.head_dim = attrs.head_dim_or_derived().value_or(0);
  arch.experts = attrs.num_experts.value_or(0);
  arch.top_k = attrs.num_experts_per_tok.value_or(arch.experts > 0 ? 1 : 0);
  arch.moe_intermediate = attrs.moe_intermediate_size.value_or(attrs.intermediate_size.value_or(0));
  arch.shared_experts = attrs.n_shared_experts.value_or(0);
  arch.q_lora_rank = attrs.q_lora_rank.value_or(0);
  arch.kv_lora_rank = attrs.kv_lora_rank.value_or(0);
  arch.qk_nope_head_dim = attrs.qk_nope_head_dim.value_or(0);
  arch.qk_rope_head_dim = attrs.qk_rope_head_dim.value_or(0);
  arch.v_head_dim = attrs.v_head_dim.value_or(0);
  // The block structure from the names of layer 0's params.
  bool any_gate = false;
  bool any_fc = false;
  std::int64_t norms = 0;
  for (const LayerParamShape& param : layer_params) {
    const std::string& name = param.name;
    if (contains(name, "gate_proj") || contains(name, ".w1.") || contains(name, "gate_up"))
      any_gate = true;
    if (contains(name, "c_fc") || contains(name, "fc1") || contains(name, "dense_h_to_4h")) {
      // Megatron-Core names its fused SwiGLU gate|up `linear_fc1` [2 I, h] (gated_linear_unit;
      // stacked experts [E, 2 I, h]): a name alone said GeLU (trial D 1, 2.57 GiB too few
      // activations on the shipped Megatron-Llama-3-70B).
      const Shape& shape = param.shape;
      const std::int64_t rows = shape.size() == 3 ? shape[1] : shape.empty() ? 0 : shape[0];
      const bool twice =
          (shape.size() == 2 || shape.size() == 3) &&
          ((attrs.intermediate_size && rows == 2 * *attrs.intermediate_size) ||
           (attrs.moe_intermediate_size && rows == 2 * *attrs.moe_intermediate_size));
      if (twice && ends_with(name, ".weight") && !contains(name, "c_fc"))
        any_gate = true;
      else
        any_fc = true;
    }
    if ((contains(name, "norm") || contains(name, ".ln_")) && ends_with(name, ".bias"))
      arch.layer_norm = true;
    if (contains(name, "q_norm") || contains(name, "q_layernorm.")) arch.qk_norm = !arch.mla();
    if (is_position_embedding(name)) arch.rope = false;
    const bool layer_norm_weight = ends_with(name, ".weight") &&
                                   (contains(name, "layernorm") || contains(name, ".ln_") ||
                                    contains(name, "_norm.") || contains(name, "feedforward_norm"));
    if (layer_norm_weight && !contains(name, "q_norm") && !contains(name, "k_norm") &&
        !contains(name, "q_a_layernorm") && !contains(name, "kv_a_layernorm")) {
      ++norms;
    }
  }
  arch.gated_mlp = any_gate || !any_fc;
  // Gemma-2's block: pre/post feed-forward norms, (1 + weight) RMSNorm, logit soft-capping
  // (Gemma-3, with q_norm / k_norm, has no soft-capping).
  arch.gemma_norm =
      std::any_of(layer_params.begin(), layer_params.end(), [](const LayerParamShape& param) {
        return contains(param.name, "pre_feedforward_layernorm");
      });
  arch.softcap = arch.gemma_norm && !arch.qk_norm;
  arch.extra_norms = std::max<std::int64_t>(0, norms - 2);
  arch.intermediate = attrs.intermediate_size.value_or(arch.gated_mlp ? 0 : 4 * arch.hidden);
  if (arch.intermediate == 0 && missing.empty()) missing = "intermediate_size";
  if (!missing.empty()) return std::nullopt;
  return arch;
}

std::vector<ActivationTerm> layer_activation_terms(const ActivationArch& arch,
                                                   const TrainingShape& shape,
                                                   std::int64_t element_bytes,
                                                   const ActivationLayout& layout, LayerKind kind,
                                                   Recompute mode) {
  const Local local = local_sizes(arch, shape, element_bytes, layout);
  Terms terms;
  if (mode == Recompute::Full) {
    terms.add("layer_input", mul({local.e, local.tokens_h, arch.hidden}), "e T h (/ t with SP)",
              "Korthikanti et al. 2022 Sec. 4: full recompute keeps each layer's input (2sbh); "
              "torch.utils.checkpoint saves the checkpointed layer's inputs");
    return std::move(terms.out());
  }
  norm_terms(terms, arch, local, {"attention", local.tokens_h, arch.hidden, true});
  if (arch.mla()) {
    mla_terms(terms, arch, shape, local, mode);
  } else {
    gqa_terms(terms, arch, shape, local, mode);
  }
  norm_terms(terms, arch, local, {"mlp", local.tokens_h, arch.hidden, true});
  for (std::int64_t i = 0; i < arch.extra_norms; ++i)
    norm_terms(terms, arch, local,
               {"post_norm" + std::to_string(i), local.tokens_h, arch.hidden, false});
  if (kind == LayerKind::Moe && arch.experts > 0) {
    moe_terms(terms, arch, shape, local);
  } else {
    dense_mlp_terms(terms, arch, local);
  }
  return std::move(terms.out());
}

std::int64_t layer_activation_bytes(const ActivationArch& arch, const TrainingShape& shape,
                                    std::int64_t element_bytes, const ActivationLayout& layout,
                                    LayerKind kind, Recompute mode) {
  return sum(layer_activation_terms(arch, shape, element_bytes, layout, kind, mode));
}

std::int64_t StageLayers::layers() const {
  std::int64_t total = 0;
  for (const auto& row : count)
    for (std::int64_t layer_count : row) total += layer_count;
  return total;
}

void StageLayers::add_layer(LayerKind kind, Recompute mode, bool chunk_start) {
  const int kind_index = static_cast<int>(kind);
  const int mode_index = static_cast<int>(mode);
  ++count[kind_index][mode_index];
  if (chunk_start) chunk_tails_begin = recompute_tails.size();
  // The layer follows every full layer of its chunk so far...
  for (std::size_t i = chunk_tails_begin; i < recompute_tails.size(); ++i)
    ++recompute_tails[i].after[kind_index][mode_index];
  if (mode != Recompute::Full) return;
  // ...and is the last full layer of its kind in the chunk: its tail starts empty.
  for (std::size_t i = chunk_tails_begin; i < recompute_tails.size(); ++i) {
    if (recompute_tails[i].kind == kind) {
      recompute_tails[i] = RecomputeTail{kind, {{0, 0, 0}, {0, 0, 0}}};
      return;
    }
  }
  recompute_tails.push_back(RecomputeTail{kind, {{0, 0, 0}, {0, 0, 0}}});
}

std::int64_t microbatches_in_flight(PipelineScheduleKind kind, std::int64_t stages,
                                    std::int64_t virtual_stages, std::int64_t stage,
                                    std::int64_t microbatches) {
  const std::int64_t microbatch_count = std::max<std::int64_t>(1, microbatches);
  if (stages <= 1) return 1;
  switch (kind) {
    case PipelineScheduleKind::GPipe:
      return microbatch_count;
    case PipelineScheduleKind::Interleaved: {
      const std::int64_t chunks = std::max<std::int64_t>(1, virtual_stages);
      const std::int64_t warmup = 2 * (stages - stage - 1) + (chunks - 1) * stages;
      return std::min(mul(microbatch_count, chunks), warmup + 1);
    }
    case PipelineScheduleKind::ZeroBubble: {
      const std::int64_t chunks = std::max<std::int64_t>(1, virtual_stages);
      if (chunks == 1) return std::min(microbatch_count, stages - stage);
      // torch ScheduleInterleavedZeroBubble: _get_warmup_ops with multiply_factor 1,
      // (chunks - 1) x microbatches_per_round + (pp - 1 - p), one more in steady state.
      const std::int64_t rounds = std::max<std::int64_t>(1, microbatch_count / stages);
      const std::int64_t per_round = microbatch_count / rounds;
      const std::int64_t warmup = (chunks - 1) * per_round + (stages - 1 - stage);
      return std::min(mul(microbatch_count, chunks), warmup + 1);
    }
    case PipelineScheduleKind::ZeroBubbleV:
      // ZB-V (Qi et al. 2024, "Pipeline Parallelism with Controllable Memory", and the
      // zero-bubble paper's ZB-V): 1F1B's peak, pp micro-batches of a whole stage, on
      // every rank alike: 2 pp chunk micro-batches.
      return std::min(mul(microbatch_count, 2), 2 * stages);
    case PipelineScheduleKind::DualPipeV:
      // deepseek-ai/DualPipe README: activation per device PP + 1 chunk micro-batches,
      // PP the number of stages (2 x the ranks).
      return std::min(mul(microbatch_count, 2), 2 * stages + 1);
    case PipelineScheduleKind::OneFOneB:
      return std::min(microbatch_count, stages - stage);
  }
  return 1;
}

namespace {

// Stage 0's terms: the token ids, RoPE's cos / sin (`with_rope`: not kept when every layer
// is recomputed) or GPT-2's learned positions.
std::vector<ActivationTerm> embedding_terms(const ActivationArch& arch, const Local& local,
                                            bool with_rope) {
  Terms terms;
  terms.add("embedding.token_ids", mul(8, local.tokens), "8 T",
            "nn.Embedding backward keeps the int64 indices");
  if (arch.rope && arch.head_dim > 0 && with_rope) {
    const std::int64_t rope_dim = arch.mla() ? arch.qk_rope_head_dim : arch.head_dim;
    terms.add("embedding.rope_cos_sin", mul({2, local.e, local.s, rope_dim}), "2 e s d",
              "transformers rotary embedding: cos and sin of the positions (batch 1), computed "
              "once, saved by every layer's `* cos` / `* sin`");
  }
  if (!arch.rope) {
    terms.add("embedding.position_ids", mul(8, local.s), "8 s",
              "learned position embedding (GPT-2 wpe) backward keeps its int64 positions");
  }
  return std::move(terms.out());
}

// The last stage's terms: the final norm, the logits and the loss.
std::vector<ActivationTerm> logits_terms(const ActivationArch& arch, const Local& local) {
  Terms terms;
  norm_terms(terms, arch, local, {"logits.final", local.tokens_h, arch.hidden, true});
  if (local.fused) {
    terms.add("logits.labels", mul(8, local.tokens), "8 T",
              "vocab-parallel cross entropy keeps the int64 targets");
    terms.add("logits.softmax_fp32", mul({4, local.tokens, local.vocab}), "4 T V / t",
              "Megatron-Core fused vocab-parallel cross entropy: the fp32 softmax it keeps "
              "(the bf16 logits are freed); theoretical_memory_usage.py: 4 s b V");
  } else {
    terms.add("logits.output", mul({local.e, local.tokens, local.vocab}), "e T V / t",
              "lm_head output (vocab-parallel), the model's logits");
    terms.add("logits.labels", mul(8, local.tokens), "8 T",
              "cross_entropy (nll_loss) keeps the int64 targets");
    if (arch.softcap) {
      terms.add("logits.softcap", mul({local.e, local.tokens, local.vocab}), "e T V / t",
                "transformers Gemma2ForCausalLM final_logit_softcapping: tanh output");
    }
    terms.add(
        "logits.log_softmax_fp32", mul({4, local.tokens, local.vocab}), "4 T V / t",
        "transformers ForCausalLMLoss: logits.float(), cross_entropy's log_softmax output; "
        "Megatron theoretical_memory_usage.py: 4 s b h (1 + V / h) for the output layer and CE");
  }
  return std::move(terms.out());
}

bool every_layer_full(const StageLayers& layers) {
  return layers.count[0][0] + layers.count[0][1] + layers.count[1][0] + layers.count[1][1] == 0;
}

// The recomputed layer being rebuilt (StageActivations::once's recompute_working_layer).
std::int64_t recompute_working_bytes(const ActivationBytes& table, const StageLayers& layers) {
  constexpr int kNone = static_cast<int>(Recompute::None);
  constexpr int kFull = static_cast<int>(Recompute::Full);
  std::int64_t working = 0;
  if (layers.recompute_tails.empty()) {
    for (int kind = 0; kind < 2; ++kind)
      if (layers.count[kind][kFull] > 0) working = std::max(working, table.layer[kind][kNone]);
    return working;
  }
  // With the layers' order known, the rebuilt layer adds only what exceeds the layers after
  // it in its chunk, freed by their own backward before it runs (the chunk's last full layer
  // of a kind is the worst of that kind: the fewest layers after it).
  for (const RecomputeTail& tail : layers.recompute_tails) {
    std::int64_t freed = 0;
    for (int kind = 0; kind < 2; ++kind)
      for (int mode = 0; mode < 3; ++mode)
        freed = add(freed, mul(tail.after[kind][mode], table.layer[kind][mode]));
    const std::int64_t rebuilt = table.layer[static_cast<int>(tail.kind)][kNone];
    working = std::max(working, rebuilt - std::min(rebuilt, freed));
  }
  return working;
}

}  // namespace

namespace {

// Every term one layout's stages take, computed once: each layer kind and recompute mode,
// stage 0's terms with and without RoPE's cos / sin, the last stage's output terms.
struct LayoutTerms {
  std::vector<ActivationTerm> layer[2][3];
  std::vector<ActivationTerm> embedding;       // without RoPE's cos / sin
  std::vector<ActivationTerm> embedding_rope;  // with them
  std::vector<ActivationTerm> logits;
};

LayoutTerms layout_terms(const ActivationArch& arch, const TrainingShape& shape,
                         std::int64_t element_bytes, const ActivationLayout& layout) {
  const Local local = local_sizes(arch, shape, element_bytes, layout);
  LayoutTerms terms;
  for (int kind = 0; kind < 2; ++kind)
    for (int mode = 0; mode < 3; ++mode)
      terms.layer[kind][mode] =
          layer_activation_terms(arch, shape, element_bytes, layout, static_cast<LayerKind>(kind),
                                 static_cast<Recompute>(mode));
  terms.embedding = embedding_terms(arch, local, false);
  terms.embedding_rope = embedding_terms(arch, local, true);
  terms.logits = logits_terms(arch, local);
  return terms;
}

ActivationBytes bytes_of(const LayoutTerms& terms) {
  ActivationBytes table;
  for (int kind = 0; kind < 2; ++kind)
    for (int mode = 0; mode < 3; ++mode) table.layer[kind][mode] = sum(terms.layer[kind][mode]);
  table.embedding = sum(terms.embedding);
  table.embedding_rope = sum(terms.embedding_rope) - table.embedding;
  table.logits = sum(terms.logits);
  return table;
}

}  // namespace

ActivationBytes activation_bytes(const ActivationArch& arch, const TrainingShape& shape,
                                 std::int64_t element_bytes, const ActivationLayout& layout) {
  return bytes_of(layout_terms(arch, shape, element_bytes, layout));
}

std::int64_t stage_activation_bytes(const ActivationBytes& table, const StageLayers& layers,
                                    const StagePosition& position) {
  const std::int64_t virtual_stages = std::max<std::int64_t>(1, position.virtual_stages);
  std::int64_t per_microbatch = 0;
  if (layers.embedding) {
    per_microbatch = add(per_microbatch, table.embedding);
    if (!every_layer_full(layers)) per_microbatch = add(per_microbatch, table.embedding_rope);
  }
  for (int kind = 0; kind < 2; ++kind)
    for (int mode = 0; mode < 3; ++mode)
      per_microbatch = add(per_microbatch, mul(layers.count[kind][mode], table.layer[kind][mode]));
  std::int64_t held_once = recompute_working_bytes(table, layers);
  // With model chunks the output terms live in the model's last chunk, whose backward
  // follows its forward (every chunked schedule turns around there): held once.
  if (layers.logits) {
    if (virtual_stages > 1) {
      held_once = add(held_once, table.logits);
    } else {
      per_microbatch = add(per_microbatch, table.logits);
    }
  }
  // Interleaved, zero bubble with chunks, zbv, dualpipev: each in-flight unit is one model
  // chunk's micro-batch (layers / v). Without chunks the last stage has 1F1B's one
  // micro-batch in flight, GPipe's m (every forward before the first backward).
  const std::int64_t per_unit =
      virtual_stages > 1 ? ceil_div(per_microbatch, virtual_stages) : per_microbatch;
  return add(mul(per_unit, position.in_flight), held_once);
}

StageActivations stage_activations(const ActivationArch& arch, const TrainingShape& shape,
                                   std::int64_t element_bytes, const ActivationLayout& layout,
                                   const StageLayers& layers, const StagePosition& position) {
  StageActivations activations;
  activations.stage = position.stage;
  activations.layers = layers.layers();
  activations.in_flight = position.in_flight;
  activations.virtual_stages = std::max<std::int64_t>(1, position.virtual_stages);
  const LayoutTerms all = layout_terms(arch, shape, element_bytes, layout);
  const ActivationBytes table = bytes_of(all);
  if (layers.embedding)
    merge(activations.per_microbatch, every_layer_full(layers) ? all.embedding : all.embedding_rope,
          1);
  for (int kind = 0; kind < 2; ++kind) {
    for (int mode = 0; mode < 3; ++mode) {
      const std::int64_t layer_count = layers.count[kind][mode];
      if (layer_count > 0) merge(activations.per_microbatch, all.layer[kind][mode], layer_count);
    }
  }
  if (layers.logits) {
    std::vector<ActivationTerm> terms = all.logits;
    if (activations.virtual_stages > 1) {
      for (ActivationTerm& held : terms) {
        held.source +=
            "; held once: the model's last chunk runs its backward right after "
            "its forward";
        activations.once.push_back(std::move(held));
      }
    } else {
      merge(activations.per_microbatch, terms, 1);
    }
  }
  activations.per_microbatch_bytes = sum(activations.per_microbatch);
  const std::int64_t working = recompute_working_bytes(table, layers);
  if (working > 0) {
    activations.once.push_back({"recompute_working_layer", working,
                                layers.recompute_tails.empty()
                                    ? "one layer's recompute-none terms"
                                    : "one layer's recompute-none terms less the layers after "
                                      "it in its chunk (freed by their backward first)",
                                "torch.utils.checkpoint / Megatron full recompute: the layer being "
                                "recomputed holds its activations during its backward"});
  }
  // The total is stage_activation_bytes's (one assembly rule for `memory` and the search).
  activations.bytes = stage_activation_bytes(table, layers, position);
  return activations;
}

double korthikanti_layer_bytes(const KorthikantiLayer& layer, Recompute mode) {
  const double sbh = layer.seq_len * layer.micro_batch * layer.hidden;
  const double tp = layer.tp;
  if (mode == Recompute::Full) return 2.0 * sbh / (layer.sequence_parallel ? tp : 1.0);
  const double scores =
      mode == Recompute::Selective ? 0.0 : 5.0 * layer.heads * layer.seq_len / layer.hidden;
  if (layer.sequence_parallel) return sbh / tp * (34.0 + scores);
  return sbh * (10.0 + 24.0 / tp + scores / tp);
}

}  // namespace shardc
