// Activation memory per layer, stage and schedule (src/core/activations.hpp:
// every term, its formula and its source are listed there).
#include "core/activations.hpp"

#include <algorithm>
#include <string_view>

#include "support/saturating.hpp"

namespace shardc {
namespace {

using saturating::add;
using saturating::ceil_div;
using saturating::mul;

bool ends_with(const std::string& s, std::string_view tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}
bool contains(const std::string& s, std::string_view part) {
  return s.find(part) != std::string::npos;
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
};

Local local_sizes(const ActivationArch& a, const TrainingShape& shape, std::int64_t e,
                  const ActivationLayout& l) {
  Local x;
  x.e = e;
  const std::int64_t seq = shape.seq_len.value_or(0);
  x.s = ceil_div(seq, std::max<std::int64_t>(1, l.cp));
  x.s_kv = seq;
  x.b = shape.micro_batch_size;
  x.tokens = mul(x.s, x.b);
  x.tokens_h = l.sequence_parallel ? ceil_div(x.tokens, l.tp) : x.tokens;
  x.heads = ceil_div(a.heads, l.tp);
  x.kv_heads = std::max<std::int64_t>(1, ceil_div(a.kv_heads, l.tp));
  x.inter = ceil_div(a.intermediate, l.tp);
  x.moe_inter = ceil_div(a.moe_intermediate, l.expert_tp);
  x.vocab = ceil_div(a.vocab, l.tp);
  return x;
}

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

void norm_terms(Terms& t, const ActivationArch& a, const Local& x, const NormLayer& norm) {
  const std::string& prefix = norm.prefix;
  const std::int64_t tokens = norm.tokens;
  const std::int64_t width = norm.width;
  const bool feeds_linear = norm.feeds_linear;
  if (a.gemma_norm) {
    // Gemma2RMSNorm: `self._norm(x.float()) * (1.0 + self.weight.float())` keeps the fp32
    // input, rstd and the fp32 normalized tensor; the output is cast back.
    t.add(prefix + ".norm_input_fp32", mul({4, tokens, width}), "4 T w",
          "transformers Gemma2RMSNorm.forward");
    t.add(prefix + ".norm_rstd", mul({4, tokens}), "4 T", "transformers Gemma2RMSNorm.forward");
    t.add(prefix + ".norm_normalized", mul({4, tokens, width}), "4 T w",
          "transformers Gemma2RMSNorm.forward (fp32, saved by * (1 + weight))");
  } else if (a.layer_norm) {
    t.add(prefix + ".norm_input", mul({x.e, tokens, width}), "e T w", kNormSource);
    t.add(prefix + ".norm_mean_rstd", mul({8, tokens}), "8 T", kNormSource);
  } else {
    t.add(prefix + ".norm_input_fp32", mul({4, tokens, width}), "4 T w", kNormSource);
    t.add(prefix + ".norm_rstd", mul({4, tokens}), "4 T", kNormSource);
    t.add(prefix + ".norm_normalized", mul({x.e, tokens, width}), "e T w", kNormSource);
  }
  if (feeds_linear) {
    t.add(prefix + ".linear_input", mul({x.e, tokens, width}), "e T w",
          "nn.Linear saves its input (the norm output)");
  }
}

// Attention of a dense or GQA layer (q_proj/k_proj/v_proj, RoPE, core, o_proj).
void gqa_terms(Terms& t, const ActivationArch& a, const TrainingShape& shape, const Local& x,
               Recompute mode) {
  const std::int64_t d = a.head_dim;
  const std::int64_t q = mul({x.e, x.tokens, x.heads, d});
  const std::int64_t kv = mul({x.e, x.tokens, x.kv_heads, d});
  const bool eager = shape.attention == AttentionImpl::Eager;
  // With RoPE, q_embed / k_embed (new tensors) are what attention saves: `q * cos` saves only
  // cos (which needs no grad), so the projection outputs of q and k are not kept; v is.
  if (eager && x.kv_heads < x.heads) {
    // eager_attention_forward: repeat_kv copies K and V to a_q heads; the matmuls save the
    // copies (k_embed and v themselves are then freed).
    t.add("attention.qkv", mul(3, q), "3 e T a_q d / t",
          "q_embed and repeat_kv(k_embed), repeat_kv(v), saved by the eager matmuls");
  } else {
    // With RoPE, q_embed / k_embed (new tensors) are what attention saves: `q * cos` saves
    // only cos (which needs no grad), so the projection outputs of q and k are not kept.
    t.add("attention.qkv", add(q, mul(2, kv)), "e T (a_q + 2 a_kv) d / t",
          a.rope ? "q_embed / k_embed (apply_rotary_pos_emb) and v_proj's output, saved by "
                   "attention"
                 : "q / k / v projection outputs, saved by attention");
  }
  if (a.qk_norm) {
    // Qwen3Attention: q_norm / k_norm over head_dim before RoPE.
    t.add("attention.qk_norm",
          add(mul({4 + x.e, x.tokens, x.heads + x.kv_heads, d}),
              mul({4, x.tokens, x.heads + x.kv_heads})),
          "(4 + e) T (a_q + a_kv) d / t + 4 T (a_q + a_kv) / t",
          "transformers Qwen3Attention q_norm / k_norm (RMSNorm per head)");
  }
  if (eager) {
    if (mode == Recompute::None && !a.rope) {
      // GPT-2's eager attention takes the softmax in e (no fp32 upcast): one s x s tensor.
      t.add("attention.scores", mul({x.e, x.b, x.heads, x.s, x.s_kv}), "e b a_q s s_kv / t",
            "transformers GPT2 eager_attention_forward: softmax in the activation dtype");
    } else if (mode == Recompute::None) {
      t.add("attention.scores", mul({4 + x.e, x.b, x.heads, x.s, x.s_kv}),
            "(4 + e) b a_q s s_kv / t",
            "eager_attention_forward: softmax(dtype=float32) output and its cast to e");
      if (a.softcap) {
        t.add("attention.softcap", mul({x.e, x.b, x.heads, x.s, x.s_kv}), "e b a_q s s_kv / t",
              "transformers Gemma2 eager_attention_forward: tanh(scores / softcap) output");
      }
    }
  } else if (mode == Recompute::None) {
    t.add("attention.out", q, "e T a_q d / t",
          "scaled_dot_product_attention output (flash / efficient kernels save it)");
    t.add("attention.softmax_lse", mul({4, x.b, x.heads, x.s}), "4 b a_q s / t",
          "logsumexp of _scaled_dot_product_flash_attention");
  }
  t.add("attention.o_proj_input", q, "e T a_q d / t",
        "attn_output.transpose(1, 2).contiguous(), saved by o_proj");
}

// DeepSeek-V3 multi-head latent attention (transformers DeepseekV3Attention). The
// q_a / kv_a projection outputs are not kept (their RMSNorms keep the fp32 copies), nor
// q_b's (RoPE's muls save only cos / sin; torch.cat makes the query states); kv_b's
// output is, as the storage of the value view.
void mla_terms(Terms& t, const ActivationArch& a, const TrainingShape& shape, const Local& x,
               Recompute mode) {
  const std::int64_t dqk = a.qk_nope_head_dim + a.qk_rope_head_dim;
  const std::string src = "transformers DeepseekV3Attention.forward";
  if (a.q_lora_rank > 0) {
    norm_terms(t, a, x, {"attention.q_a_layernorm", x.tokens, a.q_lora_rank, true});
  }
  norm_terms(t, a, x, {"attention.kv_a_layernorm", x.tokens, a.kv_lora_rank, true});
  t.add("attention.kv_b", mul({x.e, x.tokens, x.heads, a.qk_nope_head_dim + a.v_head_dim}),
        "e T a_q (d_nope + d_v) / t", src + ": kv_b_proj output (the value view's storage)");
  t.add("attention.qk_cat", mul({2, x.e, x.tokens, x.heads, dqk}),
        "2 e T a_q (d_nope + d_rope) / t", src + ": torch.cat of query and key states");
  if (shape.attention == AttentionImpl::Eager) {
    if (mode == Recompute::None) {
      t.add("attention.scores", mul({4 + x.e, x.b, x.heads, x.s, x.s_kv}),
            "(4 + e) b a_q s s_kv / t", "eager_attention_forward softmax fp32 and cast");
    }
  } else if (mode == Recompute::None) {
    t.add("attention.out", mul({x.e, x.tokens, x.heads, a.v_head_dim}), "e T a_q d_v / t",
          "scaled_dot_product_attention output");
    t.add("attention.softmax_lse", mul({4, x.b, x.heads, x.s}), "4 b a_q s / t",
          "logsumexp of the flash / efficient kernels");
  }
  t.add("attention.o_proj_input", mul({x.e, x.tokens, x.heads, a.v_head_dim}), "e T a_q d_v / t",
        "attn_output reshape, saved by o_proj");
}

void gated_mlp_terms(Terms& t, const Local& x, const std::string& name, std::int64_t tokens,
                     std::int64_t width, const std::string& src) {
  t.add(name, mul({4, x.e, tokens, width}), "4 e T I / t",
        src + ": gate_proj, up_proj outputs, act(gate), act(gate) * up");
}

void dense_mlp_terms(Terms& t, const ActivationArch& a, const Local& x) {
  if (a.gated_mlp) {
    gated_mlp_terms(t, x, "mlp.gate_up_act", x.tokens, x.inter, "transformers LlamaMLP.forward");
    return;
  }
  t.add("mlp.fc_gelu", mul({5, x.e, x.tokens, x.inter}), "5 e T I / t",
        "transformers GPT2MLP with NewGELUActivation: fc output, pow input, tanh, 0.5 x, "
        "1 + tanh; c_proj input");
}

void moe_terms(Terms& t, const ActivationArch& a, const TrainingShape& shape, const Local& x) {
  const std::string src = "transformers MoE block (router, per-expert loop)";
  const std::int64_t k = std::max<std::int64_t>(1, a.top_k);
  std::int64_t routed = mul(x.tokens, k);
  std::string routed_text = "T k";
  if (shape.moe.capacity_factor) {
    routed = static_cast<std::int64_t>(static_cast<double>(routed) * *shape.moe.capacity_factor +
                                       0.999999);
    routed_text = "c T k";
  }
  t.add("moe.router",
        add(add(mul({4, x.tokens, a.experts}), mul({4 + 8, x.tokens, k})), mul(4, x.tokens)),
        "4 T E + 12 T k + 4 T",
        src +
            ": softmax(router_logits, float32) output, top-k indices (int64) and weights "
            "(fp32), their sum");
  if (a.mla()) {
    t.add("moe.router_fp32_input",
          add(mul({4, x.tokens, a.hidden}), mul({1 + 8, x.tokens, a.experts > 0 ? 1 : 0})),
          "4 T h + 9 T",
          "transformers DeepseekV3TopkRouter: F.linear(hidden_states.float(), ...) "
          "keeps the fp32 input; group masks and indices");
  }
  t.add("moe.dispatch_indices", mul(20, routed), "20 " + routed_text,
        src + ": token_idx and top_k_pos (int64) per routed token, its fp32 routing weight");
  t.add("moe.dispatched", mul({x.e, routed, a.hidden}), "e " + routed_text + " h",
        src + ": hidden_states[token_idx] per expert (the tokens EP dispatches)");
  gated_mlp_terms(t, x, "moe.experts", routed, x.moe_inter, src + ", each expert");
  t.add("moe.expert_out", mul({2 * x.e, routed, a.hidden}), "2 e " + routed_text + " h",
        src +
            ": expert output saved by * routing weight, and the weighted output cast back "
            "to e saved by index_add_");
  if (a.shared_experts > 0) {
    gated_mlp_terms(t, x, "moe.shared_experts", x.tokens,
                    ceil_div(mul(a.shared_experts, a.moe_intermediate), 1),
                    src + ": shared_experts");
  }
}

// Adds `from` (bytes x factor) into `into`, merging terms by name.
void merge(std::vector<ActivationTerm>& into, const std::vector<ActivationTerm>& from,
           std::int64_t factor) {
  for (const ActivationTerm& term : from) {
    auto it = std::find_if(into.begin(), into.end(),
                           [&](const ActivationTerm& t) { return t.name == term.name; });
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
  for (const ActivationTerm& t : terms) total = add(total, t.bytes);
  return total;
}

}  // namespace

std::optional<ActivationArch> activation_arch(const ModelAttributes& attrs,
                                              const std::vector<std::string>& param_names,
                                              std::string& missing) {
  ActivationArch a;
  auto need = [&missing](const std::optional<std::int64_t>& v, const char* name) {
    if (!v && missing.empty()) missing = name;
    return v.value_or(0);
  };
  a.hidden = need(attrs.hidden_size, "hidden_size");
  a.heads = need(attrs.num_attention_heads, "num_attention_heads");
  a.layers = attrs.num_hidden_layers.value_or(0);
  a.vocab = need(attrs.vocab_size, "vocab_size");
  a.kv_heads = attrs.num_key_value_heads.value_or(a.heads);
  a.head_dim = attrs.head_dim.value_or(a.heads > 0 ? a.hidden / a.heads : 0);
  a.experts = attrs.num_experts.value_or(0);
  a.top_k = attrs.num_experts_per_tok.value_or(a.experts > 0 ? 1 : 0);
  a.moe_intermediate = attrs.moe_intermediate_size.value_or(attrs.intermediate_size.value_or(0));
  a.shared_experts = attrs.n_shared_experts.value_or(0);
  a.q_lora_rank = attrs.q_lora_rank.value_or(0);
  a.kv_lora_rank = attrs.kv_lora_rank.value_or(0);
  a.qk_nope_head_dim = attrs.qk_nope_head_dim.value_or(0);
  a.qk_rope_head_dim = attrs.qk_rope_head_dim.value_or(0);
  a.v_head_dim = attrs.v_head_dim.value_or(0);
  // The block structure from the names of layer 0's params.
  bool any_gate = false;
  bool any_fc = false;
  std::int64_t norms = 0;
  for (const std::string& n : param_names) {
    if (contains(n, "gate_proj") || contains(n, ".w1.") || contains(n, "gate_up")) any_gate = true;
    if (contains(n, "c_fc") || contains(n, "fc1") || contains(n, "dense_h_to_4h")) any_fc = true;
    if ((contains(n, "norm") || contains(n, ".ln_")) && ends_with(n, ".bias")) a.layer_norm = true;
    if (contains(n, "q_norm") || contains(n, "q_layernorm.")) a.qk_norm = !a.mla();
    if (contains(n, "wpe") || contains(n, "position_embeddings")) a.rope = false;
    const bool layer_norm_weight =
        ends_with(n, ".weight") && (contains(n, "layernorm") || contains(n, ".ln_") ||
                                    contains(n, "_norm.") || contains(n, "feedforward_norm"));
    if (layer_norm_weight && !contains(n, "q_norm") && !contains(n, "k_norm") &&
        !contains(n, "q_a_layernorm") && !contains(n, "kv_a_layernorm")) {
      ++norms;
    }
  }
  a.gated_mlp = any_gate || !any_fc;
  // Gemma-2's block: pre/post feed-forward norms, (1 + weight) RMSNorm, logit soft-capping
  // (Gemma-3, with q_norm / k_norm, has no soft-capping).
  a.gemma_norm = std::any_of(param_names.begin(), param_names.end(), [](const std::string& n) {
    return contains(n, "pre_feedforward_layernorm");
  });
  a.softcap = a.gemma_norm && !a.qk_norm;
  a.extra_norms = std::max<std::int64_t>(0, norms - 2);
  a.intermediate = attrs.intermediate_size.value_or(a.gated_mlp ? 0 : 4 * a.hidden);
  if (a.intermediate == 0 && missing.empty()) missing = "intermediate_size";
  if (!missing.empty()) return std::nullopt;
  return a;
}

std::vector<ActivationTerm> layer_activation_terms(const ActivationArch& arch,
                                                   const TrainingShape& shape,
                                                   std::int64_t element_bytes,
                                                   const ActivationLayout& layout, LayerKind kind,
                                                   Recompute mode) {
  const Local x = local_sizes(arch, shape, element_bytes, layout);
  Terms t;
  if (mode == Recompute::Full) {
    t.add("layer_input", mul({x.e, x.tokens_h, arch.hidden}), "e T h (/ t with SP)",
          "Korthikanti et al. 2022 Sec. 4: full recompute keeps each layer's input (2sbh); "
          "torch.utils.checkpoint saves the checkpointed layer's inputs");
    return std::move(t.out());
  }
  norm_terms(t, arch, x, {"attention", x.tokens_h, arch.hidden, true});
  if (arch.mla()) {
    mla_terms(t, arch, shape, x, mode);
  } else {
    gqa_terms(t, arch, shape, x, mode);
  }
  norm_terms(t, arch, x, {"mlp", x.tokens_h, arch.hidden, true});
  for (std::int64_t i = 0; i < arch.extra_norms; ++i)
    norm_terms(t, arch, x, {"post_norm" + std::to_string(i), x.tokens_h, arch.hidden, false});
  if (kind == LayerKind::Moe && arch.experts > 0) {
    moe_terms(t, arch, shape, x);
  } else {
    dense_mlp_terms(t, arch, x);
  }
  return std::move(t.out());
}

std::int64_t layer_activation_bytes(const ActivationArch& arch, const TrainingShape& shape,
                                    std::int64_t element_bytes, const ActivationLayout& layout,
                                    LayerKind kind, Recompute mode) {
  return sum(layer_activation_terms(arch, shape, element_bytes, layout, kind, mode));
}

std::int64_t StageLayers::layers() const {
  std::int64_t n = 0;
  for (const auto& row : count)
    for (std::int64_t c : row) n += c;
  return n;
}

std::int64_t microbatches_in_flight(PipelineScheduleKind kind, std::int64_t stages,
                                    std::int64_t virtual_stages, std::int64_t stage,
                                    std::int64_t microbatches) {
  const std::int64_t m = std::max<std::int64_t>(1, microbatches);
  if (stages <= 1) return 1;
  switch (kind) {
    case PipelineScheduleKind::GPipe:
      return m;
    case PipelineScheduleKind::Interleaved: {
      const std::int64_t v = std::max<std::int64_t>(1, virtual_stages);
      const std::int64_t warmup = 2 * (stages - stage - 1) + (v - 1) * stages;
      return std::min(mul(m, v), warmup + 1);
    }
    case PipelineScheduleKind::OneFOneB:
    case PipelineScheduleKind::ZeroBubble:
      return std::min(m, stages - stage);
  }
  return 1;
}

StageActivations stage_activations(const ActivationArch& arch, const TrainingShape& shape,
                                   std::int64_t element_bytes, const ActivationLayout& layout,
                                   const StageLayers& layers, const StagePosition& position) {
  const std::int64_t in_flight = position.in_flight;
  StageActivations s;
  s.stage = position.stage;
  s.layers = layers.layers();
  s.in_flight = in_flight;
  s.virtual_stages = std::max<std::int64_t>(1, position.virtual_stages);
  const Local x = local_sizes(arch, shape, element_bytes, layout);
  if (layers.embedding) {
    Terms t;
    t.add("embedding.token_ids", mul(8, x.tokens), "8 T",
          "nn.Embedding backward keeps the int64 indices");
    const bool all_full =
        layers.count[0][0] + layers.count[0][1] + layers.count[1][0] + layers.count[1][1] == 0;
    if (arch.rope && arch.head_dim > 0 && !all_full) {
      const std::int64_t d = arch.mla() ? arch.qk_rope_head_dim : arch.head_dim;
      t.add("embedding.rope_cos_sin", mul({2, x.e, x.s, d}), "2 e s d",
            "transformers rotary embedding: cos and sin of the positions (batch 1), computed "
            "once, saved by every layer's `* cos` / `* sin`");
    }
    if (!arch.rope) {
      t.add("embedding.position_ids", mul(8, x.s), "8 s",
            "learned position embedding (GPT-2 wpe) backward keeps its int64 positions");
    }
    merge(s.per_microbatch, t.out(), 1);
  }
  std::int64_t working = 0;
  for (int kind = 0; kind < 2; ++kind) {
    for (int mode = 0; mode < 3; ++mode) {
      const std::int64_t n = layers.count[kind][mode];
      if (n == 0) continue;
      merge(s.per_microbatch,
            layer_activation_terms(arch, shape, element_bytes, layout, static_cast<LayerKind>(kind),
                                   static_cast<Recompute>(mode)),
            n);
      if (static_cast<Recompute>(mode) == Recompute::Full) {
        working = std::max(working,
                           layer_activation_bytes(arch, shape, element_bytes, layout,
                                                  static_cast<LayerKind>(kind), Recompute::None));
      }
    }
  }
  if (layers.logits) {
    Terms t;
    norm_terms(t, arch, x, {"logits.final", x.tokens_h, arch.hidden, true});
    t.add("logits.output", mul({x.e, x.tokens, x.vocab}), "e T V / t",
          "lm_head output (vocab-parallel), the model's logits");
    t.add("logits.labels", mul(8, x.tokens), "8 T",
          "cross_entropy (nll_loss) keeps the int64 targets");
    if (arch.softcap) {
      t.add("logits.softcap", mul({x.e, x.tokens, x.vocab}), "e T V / t",
            "transformers Gemma2ForCausalLM final_logit_softcapping: tanh output");
    }
    t.add("logits.log_softmax_fp32", mul({4, x.tokens, x.vocab}), "4 T V / t",
          "transformers ForCausalLMLoss: logits.float(), cross_entropy's log_softmax output; "
          "Megatron theoretical_memory_usage.py: 4 s b h (1 + V / h) for the output layer and CE");
    merge(s.per_microbatch, t.out(), 1);
  }
  s.per_microbatch_bytes = sum(s.per_microbatch);
  if (working > 0) {
    s.once.push_back({"recompute_working_layer", working, "one layer's recompute-none terms",
                      "torch.utils.checkpoint / Megatron full recompute: the layer being "
                      "recomputed holds its activations during its backward"});
  }
  // Interleaved: each in-flight unit is one model chunk's micro-batch (layers / v).
  const std::int64_t per_unit = s.virtual_stages > 1
                                    ? ceil_div(s.per_microbatch_bytes, s.virtual_stages)
                                    : s.per_microbatch_bytes;
  s.bytes = add(mul(per_unit, in_flight), working);
  return s;
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
