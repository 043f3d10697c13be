// The step-time model of `shardc search` (docs/search.md has every term and
// its source). Seconds per optimizer step on one rank; bytes per rank.
#include "search/cost.hpp"

#include <algorithm>
#include <cmath>

namespace shardc::search {
namespace {

// A ring collective of `bytes` per rank per call over `group` ranks,
// `calls` times: time = bytes / bandwidth + calls x steps x latency.
AxisCommTime ring(std::string axis, std::string collective, double bytes, double calls,
                  double steps_per_call, bool inter, const Hardware& hw) {
  AxisCommTime t;
  t.axis = std::move(axis);
  t.collective = std::move(collective);
  t.bytes = bytes;
  t.inter_node = inter;
  const double bw = inter ? hw.inter_bandwidth : hw.intra_bandwidth;
  const double lat = inter ? hw.inter_latency : hw.intra_latency;
  t.seconds = (bw > 0 ? bytes / bw : 0) + calls * steps_per_call * lat;
  return t;
}

}  // namespace

bool group_inter_node(std::int64_t size, std::int64_t stride, std::int64_t gpus_per_node) {
  // Row-major rank order: the group of an axis holds ranks r, r + stride, ...,
  // r + (size - 1) stride; it stays in one node when its span does.
  return size > 1 && size * stride > gpus_per_node;
}

double flops_per_token(const ModelStats& st, std::int64_t seq_len) {
  // 6 N (Kaplan et al. 2020; forward 2 N, backward 4 N) plus causal attention:
  // PaLM (Chowdhery et al. 2022, App. B) counts 12 L H Q T for QK^T and AV
  // forward and backward; half of it under a causal mask.
  return 6.0 * st.active + 6.0 * static_cast<double>(st.layers) * static_cast<double>(st.heads) *
                               st.attention_dim * static_cast<double>(seq_len);
}

StepCost step_cost(const ModelStats& st, const SearchRequest& req, const Layout& layout) {
  const Hardware& hw = req.hardware;
  const TrainingShape& shape = req.training.shape;
  const double seq = static_cast<double>(shape.seq_len.value_or(1));
  const double mb = static_cast<double>(shape.micro_batch_size);
  const double batch = static_cast<double>(shape.global_batch_size.value_or(1));
  const double world = static_cast<double>(req.world);
  const double m = batch / (static_cast<double>(layout.dp()) * mb);  // micro-batches per step
  const double pp = static_cast<double>(layout.pp);
  const double tp = static_cast<double>(layout.tp);
  const double cp = static_cast<double>(layout.cp);
  const double e = 2;  // bf16 activations
  const double hidden = static_cast<double>(st.hidden);
  StepCost c;
  c.flops_per_token = flops_per_token(st, shape.seq_len.value_or(1));
  const double tokens = batch * seq;
  c.compute = c.flops_per_token * tokens / world / (hw.peak_flops * hw.gemm_efficiency);
  // Recompute: full repeats each layer's forward (1/3 of forward + backward);
  // selective the attention core's forward (its share of the FLOPs / 3).
  const double attn_share = (c.flops_per_token - 6.0 * st.active) / c.flops_per_token;
  if (layout.recompute == Recompute::Full) c.recompute = c.compute / 3.0;
  if (layout.recompute == Recompute::Selective) c.recompute = c.compute * attn_share / 3.0;
  const double work = c.compute + c.recompute;
  // Pipeline bubble (Narayanan et al. 2021, Sec. 2.2): (pp - 1) / m of the work for
  // 1F1B and GPipe, / v interleaved; zero bubble (Qi et al. 2023, ZB-H1) a third of 1F1B's.
  if (layout.pp > 1) {
    double bubble = (pp - 1) / m * work;
    if (layout.schedule == PipelineScheduleKind::Interleaved)
      bubble /= static_cast<double>(layout.virtual_stages);
    if (layout.schedule == PipelineScheduleKind::ZeroBubble) bubble /= 3.0;
    c.bubble = bubble;
  }
  const double layers_stage = std::ceil(static_cast<double>(st.layers) / pp);
  double moe_layers = 0;
  for (const bool moe : st.moe_layer) moe_layers += moe ? 1 : 0;
  const double moe_stage = std::ceil(moe_layers / pp);
  const double tokens_mb = mb * seq / cp;  // tokens of one micro-batch on one rank
  const std::int64_t g = hw.gpus_per_node;
  const double fwd_passes = layout.recompute == Recompute::Full ? 2 : 1;
  // Tensor parallel: per layer two collectives forward and two backward of T h
  // (all-reduce, or with SP all-gather + reduce-scatter: the same bytes;
  // Korthikanti et al. 2022 Sec. 4.2.2), on the critical path: exposed.
  if (layout.tp > 1) {
    const double calls = (2 * fwd_passes + 2) * layers_stage * m;
    const double bytes = calls * 2 * (tp - 1) / tp * tokens_mb * hidden * e;
    AxisCommTime t =
        ring("tp", layout.sequence_parallel ? "all-gather + reduce-scatter" : "all-reduce", bytes,
             calls, 2 * (tp - 1), group_inter_node(layout.tp, 1, g), hw);
    t.exposed = t.seconds;
    t.overlap = "none: between the layer's matrix multiplies";
    c.comm.push_back(t);
  }
  // Context parallel: all-gather of K and V forward, reduce-scatter of their
  // grads backward (Llama 3, Dubey et al. 2024, Sec. 3.3.2), exposed.
  if (layout.cp > 1) {
    const double calls = (fwd_passes + 1) * layers_stage * m;
    const double bytes = calls * (cp - 1) * tokens_mb * static_cast<double>(st.kv_dim) / tp * e;
    AxisCommTime t = ring("cp", "all-gather K,V + reduce-scatter dK,dV", bytes, calls, cp - 1,
                          group_inter_node(layout.cp, layout.tp, g), hw);
    t.exposed = t.seconds;
    t.overlap = "none (all-gather based context parallelism)";
    c.comm.push_back(t);
  }
  // Expert parallel: dispatch and combine all-to-all, forward and backward, of
  // the routed copies (T k h per rank), the ep - 1 of ep that leave the rank.
  if (layout.ep > 1 && st.top_k > 0) {
    const double ep = static_cast<double>(layout.ep);
    const double calls = (2 * fwd_passes + 2) * moe_stage * m;
    const double tokens_rank = tokens_mb / (layout.sequence_parallel ? tp : 1);
    const double bytes =
        calls * (ep - 1) / ep * tokens_rank * static_cast<double>(st.top_k) * hidden * e;
    AxisCommTime t = ring("ep", "all-to-all dispatch + combine", bytes, calls, 1,
                          group_inter_node(layout.ep, 1, g), hw);
    if (layout.pp > 1 && m >= 2) {
      t.exposed = std::max(0.0, t.seconds - work);
      t.overlap = "behind another micro-batch's compute (DeepSeek-V3 DualPipe, Sec. 3.2.1)";
    } else {
      t.exposed = t.seconds;
      t.overlap = "none without a pipeline (one micro-batch at a time)";
    }
    c.comm.push_back(t);
  }
  // Bytes of one stage's params on a rank before FSDP (elements x dtype).
  const double pbytes = static_cast<double>(st.param_bytes);
  const double dense_stage =
      (st.layer_dense / tp + st.layer_vector + st.outside / tp / (layout.pp > 1 ? 2 : 1)) / pp;
  const double expert_stage = st.expert / pp / static_cast<double>(layout.ep);
  // FSDP: all-gather forward and backward, reduce-scatter of the grads, every
  // micro-batch (reshard_after_forward), prefetched: hidden behind compute.
  if (layout.dp_shard > 1) {
    const double s = static_cast<double>(layout.dp_shard);
    const double calls = 3 * m;
    double bytes = 3 * m * (s - 1) / s * dense_stage * pbytes;
    if (st.expert > 0 && layout.efsdp > 1) {
      const double es = static_cast<double>(layout.efsdp);
      bytes += 3 * m * (es - 1) / es * expert_stage * pbytes;
    }
    AxisCommTime t = ring("dp_shard", "all-gather x2 + reduce-scatter", bytes, calls, s - 1,
                          group_inter_node(layout.dp_shard, layout.cp * layout.tp, g), hw);
    t.exposed = std::max(0.0, t.seconds - work);
    t.overlap = "prefetched: behind the compute (FSDP2 implicit prefetch)";
    c.comm.push_back(t);
  }
  // Data parallel replicas: one gradient all-reduce per step (ZeRO-1: reduce-scatter
  // + all-gather, the same bytes), bucketed behind the last micro-batch's backward.
  const double expert_dp = layout.dp_shard > 1 ? 1 : static_cast<double>(layout.efsdp);
  if (layout.dp_replicate > 1 || (st.expert > 0 && expert_dp > 1)) {
    const double r = static_cast<double>(layout.dp_replicate);
    const double shard = static_cast<double>(layout.dp_shard);
    double bytes = layout.dp_replicate > 1 ? 2 * (r - 1) / r * dense_stage / shard * pbytes : 0;
    if (st.expert > 0 && expert_dp > 1)
      bytes += 2 * (expert_dp - 1) / expert_dp * expert_stage * pbytes;
    const std::int64_t group = layout.dp_replicate > 1 ? layout.dp_replicate : 1;
    AxisCommTime t =
        ring("dp_replicate", layout.zero1 ? "reduce-scatter + all-gather (ZeRO-1)" : "all-reduce",
             bytes, 1, 2 * (r - 1),
             group_inter_node(group, layout.dp_shard * layout.cp * layout.tp, g) ||
                 group_inter_node(static_cast<std::int64_t>(expert_dp), layout.ep, g),
             hw);
    t.exposed = std::max(0.0, t.seconds - work / m * 2.0 / 3.0);
    t.overlap = "bucketed behind the last micro-batch's backward";
    c.comm.push_back(t);
  }
  // Pipeline: one activation send forward and one gradient back per micro-batch.
  if (layout.pp > 1) {
    const double v = static_cast<double>(layout.virtual_stages);
    const double bytes = 2 * m * v * tokens_mb * hidden * e / (layout.sequence_parallel ? tp : 1);
    AxisCommTime t = ring("pp", "send/recv", bytes, 2 * m * v, 1,
                          group_inter_node(layout.pp, req.world / layout.pp, g), hw);
    t.exposed = t.seconds;
    t.overlap = "none (on the schedule's critical path)";
    c.comm.push_back(t);
  }
  for (const AxisCommTime& t : c.comm) c.exposed_comm += t.exposed;
  // Optimizer step: read and write the local params, grads, master weights and
  // state (AdamW: 16 bytes per element with fp32 master + 2 states, plus bf16 param + grad).
  double local = dense_stage / static_cast<double>(layout.dp_shard) +
                 expert_stage / static_cast<double>(layout.dp_shard > 1 ? layout.efsdp : 1);
  const double state_bytes = req.training.optimizer == Optimizer::None  ? 0
                             : req.training.optimizer == Optimizer::Sgd ? 4
                                                                        : 8;
  const double master = req.training.master_weights ? 4 : 0;
  const double shard_state = layout.zero1 ? static_cast<double>(layout.dp_replicate) : 1;
  c.optimizer = local * (2 * pbytes + 2 * (master + state_bytes) / shard_state) /
                std::max(1.0, hw.hbm_bandwidth);
  c.step = work + c.bubble + c.exposed_comm + c.optimizer;
  c.tokens_per_second_per_gpu = tokens / world / c.step;
  c.mfu = c.flops_per_token * c.tokens_per_second_per_gpu / hw.peak_flops;
  // The dominant term.
  c.dominant = "compute";
  double best = work;
  if (c.bubble > best) {
    best = c.bubble;
    c.dominant = "bubble";
  }
  if (c.optimizer > best) {
    best = c.optimizer;
    c.dominant = "optimizer";
  }
  for (const AxisCommTime& t : c.comm) {
    if (t.exposed > best) {
      best = t.exposed;
      c.dominant = "comm " + t.axis;
    }
  }
  return c;
}

}  // namespace shardc::search
