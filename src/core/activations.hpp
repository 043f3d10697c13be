// Activation memory per rank and pipeline stage (issue 26 item 2), in BYTES.
//
// Pure and cheap: a function of the architecture sizes, the training shape
// and the layout degrees (tp, sequence parallel, cp, expert tp, pipeline
// schedule), evaluated once per stage, never per rank x param, so the layout
// search (issue 22) can call it for every candidate layout without a plan.
//
// What is counted: the tensors autograd saves for backward during the
// forward of one micro-batch (deduplicated by storage), times the
// micro-batches in flight on the stage, plus the logits the loss keeps.
// The model follows the modules as Hugging Face transformers 5.24 writes
// them (the modules the witness, tests/torch/test_activation_witness.py,
// runs), term by term; Megatron's published formula is a separate function
// (`korthikanti_layer_bytes`) and the second anchor. Notation (Korthikanti
// et al. 2022, "Reducing Activation Recomputation in Large Transformer
// Models", arXiv 2205.05198, Sec. 4.1): s = sequence length on the rank
// (seq_len / cp), b = micro-batch size, T = s x b tokens, h = hidden, a_q /
// a_kv = query / KV heads, d = head dim, I = MLP intermediate, V = vocab,
// t = tensor-parallel degree, e = activation element size (bytes).
//
// Per decoder layer, recompute none (transformers LlamaDecoderLayer and its
// relatives; every term lists the op that saves it):
//  * norm_input_fp32  4 T h         RMSNorm `hidden_states.to(torch.float32)`,
//                                   saved by pow / mul (LlamaRMSNorm.forward);
//                                   LayerNorm: the input, e T h (aten
//                                   native_layer_norm saves input).
//  * norm_rstd        4 T           rsqrt output (LayerNorm: mean + rstd, 8 T).
//  * norm_normalized  e T h         `hidden_states.to(input_dtype)` saved by
//                                   `self.weight * ...` (RMSNorm only).
//  * linear_input     e T h         the norm output, saved by q/k/v_proj (one
//                                   storage) and again for the MLP's up/gate.
//  * qkv              e T (a_q + 2 a_kv) d / t   q_embed / k_embed (the
//                                   RoPE outputs; `q * cos` saves only cos,
//                                   so q_proj / k_proj outputs are freed) and
//                                   v_proj's output, saved by attention.
//  * attention_out    e T a_q d / t SDPA / flash output (saved by its backward).
//  * softmax_lse      4 b a_q s / t logsumexp of the flash / SDPA kernels
//                                   (_scaled_dot_product_flash_attention).
//  * scores (eager)   (4 + e) b a_q s s_kv / t   fp32 softmax output and its
//                                   cast to e, saved by the matmul with V
//                                   (eager_attention_forward; GPT-2's eager
//                                   softmax stays in e: e b a_q s s_kv);
//                                   Korthikanti's 5 a s^2 b with dropout.
//                                   With GQA, eager saves q and the repeat_kv
//                                   copies of K and V: 3 e T a_q d / t
//                                   instead of qkv. Gemma-2 adds the tanh of
//                                   its soft-capping, e b a_q s s_kv.
//  * o_proj_input     e T a_q d / t `attn_output.transpose(1, 2).contiguous()`.
//  * mlp (gated)      4 e T I / t   gate_proj and up_proj outputs, act(gate),
//                                   act(gate) * up (LlamaMLP.forward); plain
//                                   (GPT-2 gelu_new): 5 e T I / t (fc output,
//                                   tanh, 0.5 x, 1 + tanh, gelu output).
//  * MoE layer (balanced routing, transformers' per-expert loop; tokens
//    routed R = T k, or c T k with capacity factor c): router 4 T E + 12 T k
//    + 4 T (fp32 softmax, top-k indices and weights, their sum), dispatch
//    indices and weights 20 R, dispatched tokens e R h, expert MLPs
//    4 e R I_e / t_e, expert output and its cast 2 e R h; shared experts a
//    gated MLP of width n_shared I_e; DeepSeek's router keeps an fp32 copy
//    of its input (4 T h).
//  * MLA (DeepSeek-V3, transformers DeepseekV3Attention): the RMSNorms of
//    q_a and kv_a ((4 + e + e) T r + 4 T each; the projection outputs are not
//    kept), kv_b's output (the value view), the concatenated q and k
//    (2 e T a_q (d_nope + d_rope)), attention output and o_proj input a_q d_v.
//  * Gemma-2: its RMSNorm keeps the fp32 normalized tensor (4 T h instead of
//    e T h), its post norms feed the residual, the final logits' tanh e T V.
// Tensors of width h (norms, linear inputs) divide by t only with sequence
// parallel (Korthikanti Sec. 4.2.2, Megatron stores the sequence-parallel
// shard and all-gathers again in backward); every term divides by cp
// (s = seq_len / cp; eager scores keep s x seq_len).
//
// Recompute (Korthikanti Sec. 5 and Megatron-Core
// `--recompute-granularity`): selective drops the attention core's saved
// tensors (eager scores, or the flash output and logsumexp); full keeps the
// layer input (e T h, / t with SP: Korthikanti's 2sbh per layer) and, once
// per stage, the recomputed layer's own activations while its backward runs
// (`recompute_working_layer`), less what the layers after it in its model
// chunk held: their backward ran first and freed it (StageLayers::
// recompute_tails; a chunk's last layer recomputed adds its whole
// recompute-none bytes, a first layer before kept ones adds nothing).
//
// Embedding / logits: stage 0 keeps the token ids (8 T: embedding backward)
// and RoPE's cos/sin (2 e s d: batch-1 positions, computed once and shared by
// every layer; not kept when every layer is recomputed);
// the last stage keeps the final norm, lm_head's input, the logits (e T V /
// t: the model's output) and the cross-entropy's fp32 log-softmax (4 T V /
// t: transformers ForCausalLMLoss upcasts `logits.float()`; Megatron's
// theoretical memory counts the same 4 s b V for "inputs to output layer and
// CE loss", megatron/training/theoretical_memory_usage.py).
//
// Micro-batches in flight on stage p of pp (activations alive at the peak):
// 1F1B: min(m, pp - p) (Megatron schedules.py
// forward_backward_pipelining_without_interleaving: num_warmup_microbatches
// = pp - p - 1, plus the one in steady state; torch Schedule1F1B); GPipe: m
// (every forward before the first backward; torch ScheduleGPipe);
// interleaved with v virtual stages: min(m v, 2 (pp - p - 1) + (v - 1) pp +
// 1) model chunks of L_p / v layers (Megatron
// forward_backward_pipelining_with_interleaving, num_warmup_microbatches;
// for p = 0 this is Megatron's theoretical penalty 1 + (pp - 1) / (pp v));
// zero bubble: as 1F1B (Qi et al. 2023, "Zero Bubble Pipeline Parallelism",
// Sec. 3: ZB-H1 keeps 1F1B's peak; its deferred weight-gradient inputs are
// already among the saved tensors); zero bubble with v virtual stages (torch
// ScheduleInterleavedZeroBubble): min(m v, (v - 1) r + pp - p) model chunks, r =
// m / max(1, m / pp) micro-batches per round (torch _get_warmup_ops, factor 1);
// zbv: min(2 m, 2 pp) chunks on every stage (1F1B's first-stage peak: the V
// balances it); dualpipev: min(2 m, 2 pp + 1) chunks (deepseek-ai/DualPipe:
// PP + 1 for PP = 2 pp stages). With model chunks (v > 1) the output terms
// (logits, loss) count once: they live in the model's last chunk, whose
// backward follows its forward; without chunks they count per micro-batch in
// flight (1 on 1F1B's last stage, m under GPipe). Without a pipeline: 1 (gradient
// accumulation runs micro-batches one after the other).
//
// Not counted: backward's transient activation gradients, NCCL and
// allocator buffers, dropout masks (modern LLM configs train with dropout
// 0; Korthikanti's formula, which has them, is `korthikanti_layer_bytes`).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/model.hpp"
#include "core/recipe.hpp"

namespace shardc {

/// The architecture sizes the model needs (elements), from the model's
/// attributes and its params' names (src/core/model.hpp).
struct ActivationArch {
  std::int64_t hidden = 0;
  std::int64_t heads = 0;
  std::int64_t kv_heads = 0;
  std::int64_t head_dim = 0;
  std::int64_t intermediate = 0;  ///< dense MLP width
  std::int64_t layers = 0;
  std::int64_t vocab = 0;
  std::int64_t experts = 0;  ///< routed experts (0 = dense)
  std::int64_t top_k = 0;
  std::int64_t moe_intermediate = 0;
  std::int64_t shared_experts = 0;
  std::int64_t q_lora_rank = 0;   ///< MLA: 0 = no q down-projection (q_proj)
  std::int64_t kv_lora_rank = 0;  ///< MLA when > 0
  std::int64_t qk_nope_head_dim = 0;
  std::int64_t qk_rope_head_dim = 0;
  std::int64_t v_head_dim = 0;
  bool gated_mlp = true;    ///< gate/up (SwiGLU, GeGLU) vs one fc (GPT-2)
  bool layer_norm = false;  ///< LayerNorm (GPT-2) vs RMSNorm
  bool rope = true;         ///< rotary embeddings (GPT-2: learned positions)
  bool qk_norm = false;     ///< per-head RMSNorm of q and k (Qwen3)
  bool gemma_norm = false;  ///< Gemma's RMSNorm: fp32 normalized kept (x (1 + weight))
  bool softcap = false;     ///< Gemma-2's attention and final logit soft-capping (tanh kept)
  /// Width-h norms per layer beyond the two pre-norms (Gemma-2's post norms):
  /// each stores what a norm stores, its output goes to the residual add.
  std::int64_t extra_norms = 0;
  [[nodiscard]] bool mla() const { return kv_lora_rank > 0; }
};

/// One param of a decoder layer, as activation_arch reads it.
struct LayerParamShape {
  std::string name;  ///< FQN
  Shape shape;       ///< global shape, elements
};

/// The architecture of `attrs` and `layer_params` (the params of ONE decoder layer decide
/// the block structure: gate_proj / c_fc, LayerNorm biases, q_norm, post norms; an
/// `fc1` whose output rows are twice `intermediate_size` (or `moe_intermediate_size`) is a
/// fused gate|up, Megatron-Core's SwiGLU `linear_fc1` [2 I, h]). nullopt with `missing`
/// naming the first absent attribute.
std::optional<ActivationArch> activation_arch(const ModelAttributes& attrs,
                                              const std::vector<LayerParamShape>& layer_params,
                                              std::string& missing);

/// The layout as the activation model sees it (degrees, not ranks).
struct ActivationLayout {
  std::int64_t tp = 1;         ///< tensor-parallel degree of the layer weights
  std::int64_t expert_tp = 1;  ///< tensor-parallel degree of the expert weights
  bool sequence_parallel = false;
  std::int64_t cp = 1;  ///< context-parallel degree
};

/// One term: bytes per micro-batch for `count` layers (or once), what it is
/// and where the formula comes from.
struct ActivationTerm {
  std::string name;  ///< "attention.qkv", "mlp.gate_up_act", "logits.log_softmax_fp32"
  std::int64_t bytes = 0;
  std::string formula;  ///< "e T (a_q + 2 a_kv) d / t = 2 x 8192 x 48 x 128 / 8"
  std::string source;   ///< the module / paper it follows
};

enum class LayerKind { Dense, Moe };

/// Bytes one layer of `kind` stores for one micro-batch of `micro_batch`
/// sequences of `seq_len` tokens (before cp) under `mode`, term by term.
/// Precondition: the sizes fit (checked by the caller: seq_len <= 2^24).
std::vector<ActivationTerm> layer_activation_terms(const ActivationArch& arch,
                                                   const TrainingShape& shape,
                                                   std::int64_t element_bytes,
                                                   const ActivationLayout& layout, LayerKind kind,
                                                   Recompute mode);

/// Sum of `layer_activation_terms`.
std::int64_t layer_activation_bytes(const ActivationArch& arch, const TrainingShape& shape,
                                    std::int64_t element_bytes, const ActivationLayout& layout,
                                    LayerKind kind, Recompute mode);

/// A fully recomputed layer and what follows it in its model chunk: the layers after it
/// by [kind][mode]. Their backward runs before its own, so their activations are freed
/// while it is rebuilt (torch.utils.checkpoint recomputes a layer in its backward).
struct RecomputeTail {
  LayerKind kind = LayerKind::Dense;  ///< the recomputed layer's kind
  std::int64_t after[2][3] = {{0, 0, 0}, {0, 0, 0}};
};

/// What a pipeline stage runs: layer counts by (kind, recompute mode), and
/// whether it holds the embedding (first) and the loss (last).
struct StageLayers {
  /// [kind][mode]: layers of LayerKind (Dense, Moe) and Recompute (None,
  /// Selective, Full) on the stage.
  std::int64_t count[2][3] = {{0, 0, 0}, {0, 0, 0}};
  bool embedding = false;
  bool logits = false;
  /// Per model chunk on the stage and layer kind: its last fully recomputed layer and the
  /// layers after it in the chunk (`add_layer` keeps them). The layer being recomputed
  /// adds max(0, its recompute-none bytes - the bytes of those layers) to the stage's
  /// peak. Empty while full layers are counted without their order (`count` written
  /// directly): the working layer then counts whole (an upper bound).
  std::vector<RecomputeTail> recompute_tails;
  /// Where the chunk being walked starts in `recompute_tails` (add_layer's state).
  std::size_t chunk_tails_begin = 0;
  [[nodiscard]] std::int64_t layers() const;
  /// Counts one layer, walking each model chunk of the stage in model order
  /// (`chunk_start` on a chunk's first layer), and keeps `recompute_tails`.
  void add_layer(LayerKind kind, Recompute mode, bool chunk_start);
};

/// Micro-batches (interleaved: model-chunk micro-batches) whose activations
/// are alive on `stage` at the peak (see the header comment).
std::int64_t microbatches_in_flight(PipelineScheduleKind kind, std::int64_t stages,
                                    std::int64_t virtual_stages, std::int64_t stage,
                                    std::int64_t microbatches);

/// One stage's activations: the per-micro-batch terms (layers summed by
/// name), the in-flight count and the total.
struct StageActivations {
  int stage = 0;
  std::int64_t layers = 0;
  std::int64_t in_flight = 1;  ///< micro-batches (model chunks) alive
  /// `in_flight` as chunk micro-batches with virtual stages: each holds
  /// layers / virtual_stages layers.
  std::int64_t virtual_stages = 1;
  std::vector<ActivationTerm> per_microbatch;  ///< summed over the stage's layers
  std::vector<ActivationTerm> once;            ///< held once (recompute working layer)
  std::int64_t per_microbatch_bytes = 0;       ///< the stage's layers, one micro-batch
  std::int64_t bytes = 0;                      ///< the stage's peak activation bytes
};

/// Where a stage sits in the pipeline schedule: its index, the micro-batches (model-chunk
/// micro-batches) alive at its peak (microbatches_in_flight) and the model chunks per rank
/// (`pipeline.virtual_stages`: 1 for 1F1B and GPipe, 2 for zbv and dualpipev).
struct StagePosition {
  int stage = 0;
  std::int64_t in_flight = 1;
  std::int64_t virtual_stages = 1;
};

/// The activation bytes of one stage holding `layers`, at `position` in the schedule, with
/// activations of `element_bytes` bytes per element.
StageActivations stage_activations(const ActivationArch& arch, const TrainingShape& shape,
                                   std::int64_t element_bytes, const ActivationLayout& layout,
                                   const StageLayers& layers, const StagePosition& position);

/// One layout's activation bytes per micro-batch by part (what stage_activations sums),
/// independent of the pipeline: the layout search computes it once per (tp, sequence
/// parallel, cp) and assembles every stage of every pipeline from it.
struct ActivationBytes {
  std::int64_t layer[2][3] = {{0, 0, 0}, {0, 0, 0}};  ///< one layer of [LayerKind][Recompute]
  std::int64_t embedding = 0;                         ///< stage 0's terms but RoPE's cos / sin
  std::int64_t embedding_rope = 0;  ///< RoPE's cos / sin (not kept when every layer is full)
  std::int64_t logits = 0;          ///< the last stage's final norm, logits and loss terms
};
ActivationBytes activation_bytes(const ActivationArch& arch, const TrainingShape& shape,
                                 std::int64_t element_bytes, const ActivationLayout& layout);

/// stage_activations(...).bytes from `table` (the same assembly: in-flight units, the
/// output terms held once with model chunks, the recompute working layer), without the
/// terms' texts.
std::int64_t stage_activation_bytes(const ActivationBytes& table, const StageLayers& layers,
                                    const StagePosition& position);

/// Korthikanti et al. 2022 activation bytes per transformer layer (GPT with
/// dropout, 16-bit activations), Table 2: no parallelism 34 s b h + 5 a s^2
/// b; tensor parallel s b h (10 + 24 / t + 5 a s / (h t)); with sequence
/// parallel s b h / t (34 + 5 a s / h); selective recompute drops the
/// 5 a s^2 b / t term; full recompute 2 s b h (/ t with SP). `heads` is
/// the paper's a.
struct KorthikantiLayer {
  double seq_len = 0;      ///< s, tokens
  double micro_batch = 0;  ///< b, sequences
  double hidden = 0;       ///< h, elements
  double heads = 0;        ///< a
  double tp = 1;           ///< t, the tensor-parallel degree
  bool sequence_parallel = false;
};
double korthikanti_layer_bytes(const KorthikantiLayer& layer, Recompute mode);

}  // namespace shardc
