// Activation memory (src/core/activations.hpp, src/core/activations.cpp):
// per-layer pins with the arithmetic written out for a dense, a GQA, an MoE and
// an MLA model; the monotonic properties; the in-flight counts of the schedules;
// Korthikanti et al.'s published formula (the second anchor); and the training
// shape through the recipe, the planner and the memory report.
#include <doctest/doctest.h>

#include "core/activations.hpp"
#include "frontend/frontend.hpp"
#include "memory/memory.hpp"
#include "planner/planner.hpp"

#include "../source_text.hpp"

using namespace shardc;
using shardc::test::slurp;

namespace {

TrainingShape shape_of(std::int64_t seq, std::int64_t micro_batch,
                       AttentionImpl attention = AttentionImpl::Sdpa) {
  TrainingShape shape;
  shape.seq_len = seq;
  shape.micro_batch_size = micro_batch;
  shape.attention = attention;
  return shape;
}

ActivationArch llama(std::int64_t hidden, std::int64_t heads, std::int64_t kv_heads,
                     std::int64_t intermediate) {
  ActivationArch arch;
  arch.hidden = hidden;
  arch.heads = heads;
  arch.kv_heads = kv_heads;
  arch.head_dim = hidden / heads;
  arch.intermediate = intermediate;
  arch.vocab = 128256;
  return arch;
}

ActivationArch mixtral() {
  ActivationArch arch = llama(4096, 32, 8, 14336);
  arch.experts = 8;
  arch.top_k = 2;
  arch.moe_intermediate = 14336;
  return arch;
}

ActivationArch deepseek_v3() {
  ActivationArch arch = llama(7168, 128, 128, 18432);
  arch.head_dim = 128;
  arch.experts = 256;
  arch.top_k = 8;
  arch.moe_intermediate = 2048;
  arch.shared_experts = 1;
  arch.q_lora_rank = 1536;
  arch.kv_lora_rank = 512;
  arch.qk_nope_head_dim = 128;
  arch.qk_rope_head_dim = 64;
  arch.v_head_dim = 128;
  return arch;
}

std::int64_t layer(const ActivationArch& arch, const TrainingShape& shape,
                   const ActivationLayout& layout, LayerKind kind, Recompute mode) {
  return layer_activation_bytes(arch, shape, 2, layout, kind, mode);
}

std::int64_t term(const std::vector<ActivationTerm>& terms, const std::string& name) {
  for (const ActivationTerm& entry : terms)
    if (entry.name == name) return entry.bytes;
  return -1;
}

}  // namespace

TEST_CASE("activations: dense MHA layer (Llama-2-7B sizes), seq 4096, bf16, sdpa, tp 1") {
  // T = 4096 tokens, h = 4096, a_q = a_kv = 32, d = 128, I = 11008, e = 2.
  // Each norm: 4 T h (fp32 copy) + 4 T (rstd) + e T h (normalized) + e T h (linear input)
  //   = 67,108,864 + 16,384 + 33,554,432 + 33,554,432 = 134,234,112; two norms.
  // Attention: q_embed, k_embed, v e T (a_q + 2 a_kv) d = 2 x 4096 x 96 x 128 = 100,663,296
  //   out e T a_q d = 33,554,432; lse 4 b a_q s = 4 x 32 x 4096 = 524,288
  //   o_proj input 33,554,432 -> 168,296,448.
  // MLP: 4 e T I = 8 x 4096 x 11008 = 360,710,144.
  // Layer: 2 x 134,234,112 + 168,296,448 + 360,710,144 = 797,474,816.
  const ActivationArch arch = llama(4096, 32, 32, 11008);
  const auto terms =
      layer_activation_terms(arch, shape_of(4096, 1), 2, {}, LayerKind::Dense, Recompute::None);
  CHECK(term(terms, "attention.qkv") == 100663296);
  CHECK(term(terms, "attention.softmax_lse") == 524288);
  CHECK(term(terms, "attention.o_proj_input") == 33554432);
  CHECK(term(terms, "mlp.gate_up_act") == 360710144);
  CHECK(term(terms, "attention.scores") == -1);  // sdpa: no s x s scores
  CHECK(layer(arch, shape_of(4096, 1), {}, LayerKind::Dense, Recompute::None) == 797474816);
}

TEST_CASE("activations: GQA layer (Llama-3.1-8B), seq 8192, tp 8 with sequence parallel") {
  // T = 8192, T / t = 1024 (width-h tensors under SP), a_q / t = 4, a_kv / t = 1, I / t = 1792.
  // Norm: 4 x 1024 x 4096 + 4 x 1024 + 2 x 1024 x 4096 x 2 = 33,558,528 (x 2 norms).
  // Attention: qkv 2 x 8192 x 6 x 128 = 12,582,912; out 2 x 8192 x 4 x 128 = 8,388,608;
  //   lse 4 x 4 x 8192 = 131,072; o_proj 8,388,608 -> 29,491,200.
  // MLP: 8 x 8192 x 1792 = 117,440,512.
  // Layer: 2 x 33,558,528 + 29,491,200 + 117,440,512 = 214,048,768.
  const ActivationArch arch = llama(4096, 32, 8, 14336);
  const ActivationLayout tp8{8, 1, true, 1};
  CHECK(layer(arch, shape_of(8192, 1), tp8, LayerKind::Dense, Recompute::None) == 214048768);
  // Selective drops the attention core's out and lse: 214,048,768 - 8,388,608 - 131,072.
  CHECK(layer(arch, shape_of(8192, 1), tp8, LayerKind::Dense, Recompute::Selective) == 205529088);
  // Full keeps the layer input, e T h / t = 2 x 1024 x 4096.
  CHECK(layer(arch, shape_of(8192, 1), tp8, LayerKind::Dense, Recompute::Full) == 8388608);
  // Eager: q_embed and the repeat_kv copies of K and V (3 e T a_q d / t) and the scores
  // (4 + e) b a_q s s_kv / t.
  const auto eager = layer_activation_terms(arch, shape_of(8192, 1, AttentionImpl::Eager), 2, tp8,
                                            LayerKind::Dense, Recompute::None);
  CHECK(term(eager, "attention.scores") == std::int64_t{6} * 4 * 8192 * 8192);
  CHECK(term(eager, "attention.qkv") == std::int64_t{3} * 2 * 8192 * 4 * 128);
}

TEST_CASE("activations: MoE layer (Mixtral-8x7B), seq 4096, tp 1, dropless") {
  // T = 4096, E = 8, k = 2, R = T k = 8192 routed tokens, I_e = 14336.
  // Norms 2 x 134,234,112; attention (a_q 32, a_kv 8): 2 x 4096 x 48 x 128 + 33,554,432 +
  //   524,288 + 33,554,432 = 117,964,800.
  // MoE: router 4 T E + 12 T k + 4 T = 131,072 + 98,304 + 16,384 = 245,760
  //   dispatch indices 20 R = 163,840; dispatched e R h = 67,108,864
  //   experts 4 e R I_e = 8 x 8192 x 14336 = 939,524,096; expert out + cast 2 e R h =
  //   134,217,728 -> 1,141,260,288.
  // Layer: 268,468,224 + 117,964,800 + 1,141,260,288 = 1,527,693,312.
  const ActivationArch arch = mixtral();
  CHECK(layer(arch, shape_of(4096, 1), {}, LayerKind::Moe, Recompute::None) == 1527693312);
  // A capacity factor of 1.25 pads every expert to 1.25 x its share: R = 10,240.
  TrainingShape capped = shape_of(4096, 1);
  capped.moe.capacity_factor = 1.25;
  const auto terms = layer_activation_terms(arch, capped, 2, {}, LayerKind::Moe, Recompute::None);
  CHECK(term(terms, "moe.dispatched") == std::int64_t{2} * 10240 * 4096);
}

TEST_CASE("activations: MLA + MoE layer (DeepSeek-V3), seq 4096, tp 1") {
  // T = 4096, h = 7168, a_q = 128, r_q = 1536, r_kv = 512, d_nope = 128, d_rope = 64,
  // d_v = 128, E = 256, k = 8, I_e = 2048, one shared expert; a norm of width w keeps
  // (4 + e + e) T w + 4 T.
  const ActivationArch arch = deepseek_v3();
  const TrainingShape shape = shape_of(4096, 1);
  const auto terms = layer_activation_terms(arch, shape, 2, {}, LayerKind::Moe, Recompute::None);
  // q_a_layernorm: 8 x 4096 x 1536 + 4 x 4096 = 50,348,032.
  CHECK(term(terms, "attention.q_a_layernorm.norm_input_fp32") == 4 * 4096 * 1536);
  // kv_b e T a (d_nope + d_v) = 2 x 4096 x 128 x 256 = 268,435,456; q/k cat 2 e T a (d_nope
  // + d_rope) = 4 x 4096 x 128 x 192 = 402,653,184.
  CHECK(term(terms, "attention.kv_b") == 268435456);
  CHECK(term(terms, "attention.qk_cat") == 402653184);
  // The router's fp32 input copy 4 T h + 9 T = 117,440,512 + 36,864.
  CHECK(term(terms, "moe.router_fp32_input") == 117477376);
  // Shared expert: 4 e T (n_shared I_e) = 8 x 4096 x 2048 = 67,108,864.
  CHECK(term(terms, "moe.shared_experts") == 67108864);
  // Whole layer: 2 x 234,897,408 (h norms) + 1,008,762,880 (MLA: q_a / kv_a norms 50,348,032
  // + 16,793,600, kv_b, q/k cat, out 134,217,728 + lse 2,097,152, o_proj 134,217,728) +
  // 2,136,002,560 (MoE) = 3,614,560,256.
  CHECK(layer(arch, shape, {}, LayerKind::Moe, Recompute::None) == 3614560256);
}

TEST_CASE("activations: more recompute never stores more (every architecture, attention)") {
  for (const ActivationArch& arch :
       {llama(4096, 32, 32, 11008), llama(4096, 32, 8, 14336), mixtral(), deepseek_v3()}) {
    for (AttentionImpl impl : {AttentionImpl::Flash, AttentionImpl::Sdpa, AttentionImpl::Eager}) {
      for (const ActivationLayout& layout : {ActivationLayout{}, ActivationLayout{8, 1, false, 1},
                                             ActivationLayout{8, 1, true, 2}}) {
        for (LayerKind kind : {LayerKind::Dense, LayerKind::Moe}) {
          const TrainingShape shape = shape_of(4096, 2, impl);
          const std::int64_t none = layer(arch, shape, layout, kind, Recompute::None);
          const std::int64_t selective = layer(arch, shape, layout, kind, Recompute::Selective);
          const std::int64_t full = layer(arch, shape, layout, kind, Recompute::Full);
          CHECK(selective <= none);
          CHECK(full <= selective);
          CHECK(full > 0);
        }
      }
    }
  }
}

TEST_CASE("activations: doubling seq with flash doubles the per-layer term") {
  for (const ActivationArch& arch : {llama(4096, 32, 8, 14336), mixtral(), deepseek_v3()}) {
    for (Recompute mode : {Recompute::None, Recompute::Selective, Recompute::Full}) {
      const std::int64_t one =
          layer(arch, shape_of(4096, 1, AttentionImpl::Flash), {}, LayerKind::Moe, mode);
      const std::int64_t two =
          layer(arch, shape_of(8192, 1, AttentionImpl::Flash), {}, LayerKind::Moe, mode);
      CHECK(two == 2 * one);
    }
  }
  // Eager is quadratic: more than double.
  const ActivationArch arch = llama(4096, 32, 8, 14336);
  CHECK(layer(arch, shape_of(8192, 1, AttentionImpl::Eager), {}, LayerKind::Dense,
              Recompute::None) > 2 * layer(arch, shape_of(4096, 1, AttentionImpl::Eager), {},
                                           LayerKind::Dense, Recompute::None));
}

TEST_CASE("activations: sequence parallel divides the layer by tp") {
  for (const ActivationArch& arch : {llama(4096, 32, 8, 14336), llama(8192, 64, 8, 28672)}) {
    for (std::int64_t tp : {2, 4, 8}) {
      for (Recompute mode : {Recompute::None, Recompute::Selective, Recompute::Full}) {
        const TrainingShape shape = shape_of(8192, 1, AttentionImpl::Flash);
        const std::int64_t whole = layer(arch, shape, {}, LayerKind::Dense, mode);
        const std::int64_t split = layer(arch, shape, {tp, 1, true, 1}, LayerKind::Dense, mode);
        CHECK(split * tp == whole);
        // Without SP the width-h tensors stay whole: more than whole / tp.
        CHECK(layer(arch, shape, {tp, 1, false, 1}, LayerKind::Dense, mode) >= split);
      }
    }
  }
}

TEST_CASE("activations: micro-batches in flight per schedule") {
  // 1F1B (Megatron forward_backward_pipelining_without_interleaving): pp - stage, at most m.
  CHECK(microbatches_in_flight(PipelineScheduleKind::OneFOneB, 8, 1, 0, 64) == 8);
  CHECK(microbatches_in_flight(PipelineScheduleKind::OneFOneB, 8, 1, 7, 64) == 1);
  CHECK(microbatches_in_flight(PipelineScheduleKind::OneFOneB, 8, 1, 0, 4) == 4);
  // GPipe: every micro-batch.
  CHECK(microbatches_in_flight(PipelineScheduleKind::GPipe, 8, 1, 3, 64) == 64);
  // Interleaved (pp 8, v 5): stage 0 warms up 2 x 7 + 4 x 8 = 46 chunks, + 1 = 47 chunk
  // micro-batches of L_p / 5 layers = 9.4 micro-batches of the stage's layers =
  // pp x (1 + (pp - 1) / (pp v)) = 8 x 1.175, Megatron's theoretical penalty.
  CHECK(microbatches_in_flight(PipelineScheduleKind::Interleaved, 8, 5, 0, 64) == 47);
  CHECK(microbatches_in_flight(PipelineScheduleKind::Interleaved, 8, 5, 7, 64) == 33);
  // No pipeline: one micro-batch at a time.
  CHECK(microbatches_in_flight(PipelineScheduleKind::GPipe, 1, 1, 0, 64) == 1);
  // Zero bubble with chunks (torch ScheduleInterleavedZeroBubble, _get_warmup_ops with
  // factor 1): pp 8, v 2, m 64: 8 rounds of 8; stage 0 warms up 1 x 8 + 7 = 15, + 1.
  CHECK(microbatches_in_flight(PipelineScheduleKind::ZeroBubble, 8, 2, 0, 64) == 16);
  CHECK(microbatches_in_flight(PipelineScheduleKind::ZeroBubble, 8, 2, 7, 64) == 9);
  CHECK(microbatches_in_flight(PipelineScheduleKind::ZeroBubble, 8, 1, 0, 64) == 8);
  // ZB-V: 1F1B's first-stage peak on every rank, 2 pp chunks; DualPipeV: PP + 1 chunks
  // for PP = 2 pp stages (deepseek-ai/DualPipe); both at most 2 m.
  CHECK(microbatches_in_flight(PipelineScheduleKind::ZeroBubbleV, 8, 2, 0, 64) == 16);
  CHECK(microbatches_in_flight(PipelineScheduleKind::ZeroBubbleV, 8, 2, 7, 64) == 16);
  CHECK(microbatches_in_flight(PipelineScheduleKind::DualPipeV, 8, 2, 3, 64) == 17);
  CHECK(microbatches_in_flight(PipelineScheduleKind::DualPipeV, 8, 2, 0, 4) == 8);
}

TEST_CASE("activations: with model chunks the logits count once, not per chunk in flight") {
  // Llama-3.1-8B's last stage under the interleaved schedule (pp 8, v 4, in flight 25
  // chunk micro-batches): the output terms live in the model's last chunk, whose backward
  // follows its forward; 1F1B's last stage has one micro-batch in flight either way.
  DiagnosticSink sink;
  const std::string path = "plans/llama-3.1-8b.model.yaml";
  const auto model = parse_model({path, shardc::test::slurp(path)}, sink);
  REQUIRE(model);
  std::string missing;
  const auto arch = activation_arch(model->attributes, {}, missing);
  REQUIRE(arch);
  TrainingShape shape;
  shape.seq_len = 8192;
  StageLayers layers;
  layers.count[0][0] = 4;
  layers.logits = true;
  StageLayers no_logits = layers;
  no_logits.logits = false;
  const ActivationLayout layout{1, 1, false, 1};
  const StageActivations with = stage_activations(*arch, shape, 2, layout, layers, {7, 25, 4});
  const StageActivations without =
      stage_activations(*arch, shape, 2, layout, no_logits, {7, 25, 4});
  std::int64_t logits = 0;
  for (const ActivationTerm& term : with.once)
    if (term.name.rfind("logits.", 0) == 0) logits += term.bytes;
  REQUIRE(logits > 0);
  CHECK(with.per_microbatch_bytes == without.per_microbatch_bytes);
  CHECK(with.bytes - without.bytes == logits);
  // Without chunks (1F1B's last stage) they are per micro-batch, one in flight.
  const StageActivations single = stage_activations(*arch, shape, 2, layout, layers, {7, 1, 1});
  CHECK(single.per_microbatch_bytes - without.per_microbatch_bytes == logits);
}

TEST_CASE("activations: a recomputed layer adds only what the layers after it do not free") {
  // Found by a fresh-user trial: recomputing layer 0 alone of Llama-3.1-8B's 32 (one
  // micro-batch) reported 0.03 GiB more than recomputing nothing. Layer 0's backward runs
  // last, after layers 1-31 freed theirs, so its rebuilt activations add nothing; only a
  // chunk's last layer, recomputed, adds its whole recompute-none bytes.
  const ActivationArch arch = llama(4096, 32, 8, 14336);
  const TrainingShape shape = shape_of(4096, 1, AttentionImpl::Flash);
  const ActivationLayout layout{1, 1, false, 1};
  const std::int64_t none = layer(arch, shape, layout, LayerKind::Dense, Recompute::None);
  const std::int64_t full = layer(arch, shape, layout, LayerKind::Dense, Recompute::Full);
  const auto peak = [&](const StageLayers& layers) {
    return stage_activations(arch, shape, 2, layout, layers, {0, 1, 1}).bytes;
  };
  StageLayers first_only;  // layer 0 full, 1-31 kept
  first_only.add_layer(LayerKind::Dense, Recompute::Full, true);
  for (int i = 1; i < 32; ++i) first_only.add_layer(LayerKind::Dense, Recompute::None, false);
  REQUIRE(first_only.recompute_tails.size() == 1);
  CHECK(first_only.recompute_tails[0].after[0][0] == 31);
  StageLayers nothing;
  for (int i = 0; i < 32; ++i) nothing.add_layer(LayerKind::Dense, Recompute::None, i == 0);
  CHECK(peak(nothing) - peak(first_only) == none - full);
  // Every layer full: the last one's backward rebuilds it with nothing after it.
  StageLayers every;
  for (int i = 0; i < 32; ++i) every.add_layer(LayerKind::Dense, Recompute::Full, i == 0);
  REQUIRE(every.recompute_tails.size() == 1);
  StageLayers unordered;  // counts written without the order: the whole layer (upper bound)
  unordered.count[0][2] = 32;
  CHECK(peak(every) == peak(unordered));
  CHECK(peak(every) - peak(nothing) == 32 * (full - none) + none);
  // The last layer full after 31 kept ones: it is the chunk's last, nothing frees before it.
  StageLayers last_only;
  for (int i = 0; i < 31; ++i) last_only.add_layer(LayerKind::Dense, Recompute::None, i == 0);
  last_only.add_layer(LayerKind::Dense, Recompute::Full, false);
  CHECK(peak(last_only) == peak(nothing) - none + full + none);
  // Two chunks on the stage (interleaved): each chunk's tail is its own; a kept layer of
  // the second chunk does not free the first chunk's rebuilt layer.
  StageLayers chunks;
  chunks.add_layer(LayerKind::Dense, Recompute::None, true);
  chunks.add_layer(LayerKind::Dense, Recompute::Full, false);  // chunk 0's last layer
  chunks.add_layer(LayerKind::Dense, Recompute::Full, true);
  chunks.add_layer(LayerKind::Dense, Recompute::None, false);
  REQUIRE(chunks.recompute_tails.size() == 2);
  CHECK(chunks.recompute_tails[0].after[0][0] == 0);
  CHECK(chunks.recompute_tails[1].after[0][0] == 1);
  const StageActivations two = stage_activations(arch, shape, 2, layout, chunks, {0, 1, 2});
  std::int64_t working = 0;
  for (const ActivationTerm& term : two.once)
    if (term.name == "recompute_working_layer") working = term.bytes;
  CHECK(working == none);
}

TEST_CASE("activations: Korthikanti et al. 2022 per-layer formula (GPT shapes of the paper)") {
  // Table 2 of the paper, bytes per layer, 16-bit activations with dropout. GPT-3 175B:
  // s = 2048, b = 1, h = 12288, a = 96, t = 8 (Table 3).
  // No parallelism: 34 s b h + 5 a s^2 b = 34 x 25,165,824 + 5 x 96 x 2048^2 = 855,638,016 +
  // 2,013,265,920 = 2,868,903,936.
  CHECK(korthikanti_layer_bytes({2048, 1, 12288, 96, 1, false}, Recompute::None) ==
        doctest::Approx(2868903936.0));
  // Tensor parallel: s b h (10 + 24 / t + 5 a s / (h t)) = 25,165,824 x (10 + 3 + 10) =
  // 578,813,952.
  CHECK(korthikanti_layer_bytes({2048, 1, 12288, 96, 8, false}, Recompute::None) ==
        doctest::Approx(578813952.0));
  // Tensor + sequence parallel: s b h / t (34 + 5 a s / h) = 3,145,728 x 114 = 358,612,992.
  CHECK(korthikanti_layer_bytes({2048, 1, 12288, 96, 8, true}, Recompute::None) ==
        doctest::Approx(358612992.0));
  // + selective recompute: 34 s b h / t = 106,954,752 (Table 2, last row).
  CHECK(korthikanti_layer_bytes({2048, 1, 12288, 96, 8, true}, Recompute::Selective) ==
        doctest::Approx(106954752.0));
  // Full recompute with SP: 2 s b h / t = 6,291,456.
  CHECK(korthikanti_layer_bytes({2048, 1, 12288, 96, 8, true}, Recompute::Full) ==
        doctest::Approx(6291456.0));
  // Megatron-Core's theoretical memory (megatron/training/theoretical_memory_usage.py,
  // compute_activation_memory, SP + selective): s b h (18 + 4 ffn / h) / t; ffn = 4h gives 34.
  const double megatron = 2048.0 * 12288 * (18 + 4 * 4.0) / 8;
  CHECK(korthikanti_layer_bytes({2048, 1, 12288, 96, 8, true}, Recompute::Selective) ==
        doctest::Approx(megatron));
  // The paper's 530B (h 20480, a 128, t 8, s 2048) and 1T (h 25600, a 160, t 8) rows:
  // SP + selective 34 s b h / t.
  CHECK(korthikanti_layer_bytes({2048, 1, 20480, 128, 8, true}, Recompute::Selective) ==
        doctest::Approx(34.0 * 2048 * 20480 / 8));
  CHECK(korthikanti_layer_bytes({2048, 1, 25600, 160, 8, true}, Recompute::Selective) ==
        doctest::Approx(34.0 * 2048 * 25600 / 8));
}

TEST_CASE("activations: the shipped Llama-3.1-8B on 64 ranks, each recompute mode") {
  // docs/memory.md's worked example: dp 8 x tp 8, seq 8192, micro-batch 1, bf16, sdpa.
  const std::string recipe = slurp("plans/llama-3.1-8b-dp8-tp8.recipe.yaml");
  for (const char* mode : {"none", "selective", "full"}) {
    DiagnosticSink sink;
    auto parsed_model = parse_model({"llama.yaml", slurp("plans/llama-3.1-8b.model.yaml")}, sink);
    auto parsed_recipe =
        parse_recipe({"recipe.yaml", recipe + "training:\n  seq_len: 8192\n  recompute: " + mode +
                                         "\n  sequence_parallel: true\n"},
                     sink);
    REQUIRE(parsed_model);
    REQUIRE(parsed_recipe);
    auto plan = build_plan(*parsed_model, *parsed_recipe, sink);
    REQUIRE(plan);
    const MemoryReport report = compute_memory(*plan);
    REQUIRE(report.activations_counted);
    REQUIRE(report.stage_activations.size() == 1);
    const StageActivations& sa = report.stage_activations.front();
    CHECK(plan->training_layout.degrees.tp == 8);
    CHECK(plan->training_layout.dp == 8);
    CHECK(sa.layers == 32);
    // Embedding 8 T = 65,536 + cos/sin 2 e s d = 4,194,304 (not kept when every layer is
    // recomputed); loss: final norm 33,558,528, labels 8 T = 65,536, logits e T V / t = 2 x
    // 8192 x 16032 = 262,668,288, fp32 log-softmax 4 T V / t = 525,336,576.
    const std::int64_t ends = 65536 + 33558528 + 65536 + 262668288 + 525336576;
    const std::string mode_text = mode;
    if (mode_text == "none") CHECK(sa.bytes == 32 * std::int64_t{214048768} + ends + 4194304);
    if (mode_text == "selective") {
      CHECK(sa.bytes == 32 * std::int64_t{205529088} + ends + 4194304);
    }
    // Full: 32 layer inputs + one layer recomputed in backward.
    if (mode_text == "full") CHECK(sa.bytes == 32 * std::int64_t{8388608} + ends + 214048768);
    CHECK(report.ranks[0].activations == sa.bytes);
    CHECK(report.ranks[0].total > sa.bytes);
  }
}

TEST_CASE("activations: no training shape, no change") {
  DiagnosticSink sink;
  auto parsed_model = parse_model({"llama.yaml", slurp("plans/llama-3.1-8b.model.yaml")}, sink);
  auto parsed_recipe =
      parse_recipe({"recipe.yaml", slurp("plans/llama-3.1-8b-dp8-tp8.recipe.yaml")}, sink);
  REQUIRE(parsed_model);
  REQUIRE(parsed_recipe);
  auto plan = build_plan(*parsed_model, *parsed_recipe, sink);
  REQUIRE(plan);
  const MemoryReport report = compute_memory(*plan);
  CHECK_FALSE(report.activations_counted);
  CHECK(report.ranks[0].activations == 0);
  CHECK(report.ranks[0].total == report.ranks[0].of(MemoryKind::Params) +
                                     report.ranks[0].of(MemoryKind::Grads) +
                                     report.ranks[0].of(MemoryKind::MasterWeights) +
                                     report.ranks[0].of(MemoryKind::OptimizerState) +
                                     std::max(report.ranks[0].of(MemoryKind::Fsdp2AllGather),
                                              report.ranks[0].of(MemoryKind::MuonAllGather)));
}

TEST_CASE("activations: kernels fused (Megatron-Core + TE), Llama-3.1-405B layer, tp 8 with SP") {
  // T = 8192 tokens, h = 16384, a_q = 128, a_kv = 8, d = 128, I = 53248, t = 8, e = 2.
  // With SP the width-h tensors hold T / t = 1024 tokens:
  //   each norm (LayerNormLinear): input e T/t h + rsigma 4 T/t + ln_out e T/t h
  //     = 33,554,432 + 4,096 + 33,554,432; two norms: 134,225,920.
  //   q, k, v (flash): e T (16 + 2 x 1) 128 = 2 x 8192 x 2304 = 37,748,736.
  //   attention output (flash's, linear_proj's input: one storage): 2 x 8192 x 16 x 128
  //     = 33,554,432; logsumexp 4 x 16 x 8192 = 524,288.
  //   MLP: fc1 [gate | up] and the product: 3 e T I / t = 3 x 2 x 8192 x 6656 = 327,155,712.
  // Total 533,209,088: Megatron-Core's theoretical_memory_usage.py (s b h (18 + 4 F / h)
  // with selective recompute, no SwiGLU term) would say 31 sbh / t = 520,093,696; the
  // SwiGLU's third tensor and the kept logsumexp make up the difference.
  TrainingShape shape = shape_of(8192, 1, AttentionImpl::Flash);
  shape.kernels = ActivationKernels::Fused;
  const ActivationArch arch = llama(16384, 128, 8, 53248);
  const ActivationLayout layout{8, 1, true, 1};
  const std::vector<ActivationTerm> terms =
      layer_activation_terms(arch, shape, 2, layout, LayerKind::Dense, Recompute::None);
  CHECK(term(terms, "attention.norm_input") == 33554432);
  CHECK(term(terms, "attention.norm_rstd") == 4096);
  CHECK(term(terms, "attention.linear_input") == 33554432);
  CHECK(term(terms, "attention.qkv") == 37748736);
  CHECK(term(terms, "attention.out") == 33554432);
  CHECK(term(terms, "attention.softmax_lse") == 524288);
  CHECK(term(terms, "attention.o_proj_input") == -1);  // the output's own storage
  CHECK(term(terms, "mlp.gate_up_act") == 327155712);
  CHECK(layer(arch, shape, layout, LayerKind::Dense, Recompute::None) == 533209088);
  // Eager (transformers' modules) keeps more: fp32 norm copies, four SwiGLU tensors, the
  // attention output copied for o_proj.
  TrainingShape eager = shape;
  eager.kernels = ActivationKernels::Eager;
  CHECK(layer(arch, eager, layout, LayerKind::Dense, Recompute::None) > 533209088 * 3 / 2);
  // Selective recompute runs the core attention again: the logsumexp goes, the output
  // stays (linear_proj's input). Full keeps the layer input only, as under eager.
  CHECK(layer(arch, shape, layout, LayerKind::Dense, Recompute::Selective) == 533209088 - 524288);
  CHECK(layer(arch, shape, layout, LayerKind::Dense, Recompute::Full) ==
        layer(arch, eager, layout, LayerKind::Dense, Recompute::Full));
}

TEST_CASE("activations: kernels fused keeps less than eager, every architecture and mode") {
  // The fused kernels keep a subset of what transformers' modules keep (or the same
  // tensor once instead of twice), never more.
  TrainingShape fused = shape_of(4096, 1, AttentionImpl::Flash);
  fused.kernels = ActivationKernels::Fused;
  TrainingShape eager = shape_of(4096, 1, AttentionImpl::Flash);
  ActivationArch gpt2 = llama(768, 12, 12, 3072);
  gpt2.gated_mlp = false;
  gpt2.layer_norm = true;
  gpt2.rope = false;
  for (const ActivationArch& arch : {llama(4096, 32, 8, 14336), mixtral(), deepseek_v3(), gpt2}) {
    for (const LayerKind kind : {LayerKind::Dense, LayerKind::Moe}) {
      for (const Recompute mode : {Recompute::None, Recompute::Selective, Recompute::Full}) {
        for (const ActivationLayout& layout :
             {ActivationLayout{1, 1, false, 1}, ActivationLayout{4, 1, true, 2}}) {
          CHECK(layer(arch, fused, layout, kind, mode) <= layer(arch, eager, layout, kind, mode));
        }
      }
    }
  }
}

TEST_CASE("activations: Megatron-Core's linear_fc1 of 2 x intermediate_size rows is SwiGLU") {
  // Trial D 1: `fc1` in a name said GeLU, so the shipped Megatron-Llama-3-70B (linear_fc1
  // [2 x 28672, 8192], gated_linear_unit) got the GeLU terms.
  ModelAttributes attrs;
  attrs.hidden_size = 8192;
  attrs.num_attention_heads = 64;
  attrs.intermediate_size = 28672;
  attrs.vocab_size = 128256;
  std::string missing;
  const auto gated = activation_arch(
      attrs, {{"decoder.layers.0.mlp.linear_fc1.weight", {2 * 28672, 8192}}}, missing);
  REQUIRE(gated);
  CHECK(gated->gated_mlp);
  const auto gelu =
      activation_arch(attrs, {{"decoder.layers.0.mlp.linear_fc1.weight", {28672, 8192}}}, missing);
  REQUIRE(gelu);
  CHECK_FALSE(gelu->gated_mlp);
  // GPT-2's Conv1D c_fc [h, 4h] stays GeLU whatever its extents.
  attrs.intermediate_size = 4096;
  attrs.hidden_size = 8192;
  const auto gpt2 = activation_arch(attrs, {{"h.0.mlp.c_fc.weight", {8192, 4096}}}, missing);
  REQUIRE(gpt2);
  CHECK_FALSE(gpt2->gated_mlp);
  // Stacked Megatron experts [E, 2 I, h] with moe_intermediate_size.
  attrs.moe_intermediate_size = 1536;
  const auto experts = activation_arch(
      attrs, {{"decoder.layers.0.mlp.experts.linear_fc1.weight", {8, 3072, 8192}}}, missing);
  REQUIRE(experts);
  CHECK(experts->gated_mlp);
}

TEST_CASE(
    "activations: stage_activation_bytes (the search's path) equals stage_activations' terms") {
  // The layout search assembles a stage from activation_bytes (no texts); `memory` prints
  // stage_activations' terms. Both must give one total: the printed terms summed per unit
  // in flight, plus the terms held once.
  TrainingShape eager = shape_of(4096, 2, AttentionImpl::Flash);
  TrainingShape fused = eager;
  fused.kernels = ActivationKernels::Fused;
  ActivationArch gpt2 = llama(768, 12, 12, 3072);
  gpt2.gated_mlp = false;
  gpt2.layer_norm = true;
  gpt2.rope = false;
  const ActivationArch archs[] = {llama(4096, 32, 8, 14336), mixtral(), deepseek_v3(), gpt2};
  const ActivationLayout layouts[] = {{1, 1, false, 1}, {8, 1, true, 1}, {4, 1, false, 2}};
  const StagePosition positions[] = {{0, 1, 1}, {0, 9, 1}, {3, 25, 4}, {0, 33, 2}};
  int checked = 0;
  for (const ActivationArch& arch : archs) {
    for (const TrainingShape* shape : {&eager, &fused}) {
      for (const ActivationLayout& layout : layouts) {
        const ActivationBytes table = activation_bytes(arch, *shape, 2, layout);
        for (const StagePosition& position : positions) {
          for (int variant = 0; variant < 4; ++variant) {
            // 0: kept layers with the embedding; 1: every layer full with the logits;
            // 2: block recompute in two chunks (ordered); 3: MoE and dense, mixed modes.
            StageLayers layers;
            layers.embedding = variant == 0 || variant == 3;
            layers.logits = variant == 1 || variant == 3;
            for (int i = 0; i < 6; ++i) {
              const LayerKind kind = variant == 3 && i % 2 == 1 ? LayerKind::Moe : LayerKind::Dense;
              Recompute mode = Recompute::None;
              if (variant == 1) mode = Recompute::Full;
              if (variant == 2) mode = i % 3 == 0 ? Recompute::Full : Recompute::None;
              if (variant == 3) mode = static_cast<Recompute>(i % 3);
              layers.add_layer(kind, mode, i == 0 || (variant == 2 && i == 3));
            }
            const StageActivations terms =
                stage_activations(arch, *shape, 2, layout, layers, position);
            std::int64_t once = 0;
            for (const ActivationTerm& held : terms.once) once += held.bytes;
            const std::int64_t chunks = std::max<std::int64_t>(1, position.virtual_stages);
            const std::int64_t per_unit = (terms.per_microbatch_bytes + chunks - 1) / chunks;
            CAPTURE(checked);
            CHECK(terms.bytes == per_unit * position.in_flight + once);
            CHECK(stage_activation_bytes(table, layers, position) == terms.bytes);
            ++checked;
          }
        }
      }
    }
  }
  CHECK(checked == 4 * 2 * 3 * 4 * 4);
}
