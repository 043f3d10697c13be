// The step-time model of `shardc search` (docs/search.md has every term and
// its source). Seconds per optimizer step on one rank; bytes per rank.
//
// Communication BYTES come from src/comm/ (`stage_communication`, the model
// `shardc cost` prints and the gloo test witnesses): search only builds its
// inputs (the layout's degrees, its process groups read off the rank order,
// one stage's per-rank parameter bytes from the model's sizes) and turns the
// bytes into seconds: the link each group uses, a latency per ring step, and
// an overlap rule per axis.
#include "search/cost.hpp"

#include <algorithm>
#include <array>
#include <cmath>

#include "comm/comm.hpp"
#include "core/pipeline_chunks.hpp"

namespace shardc::search {
namespace {

// Ring steps of one call of `collective` over `group` ranks (each step pays one latency):
// a ring all-gather or reduce-scatter takes n - 1 steps, an all-reduce 2 (n - 1)
// (NCCL's ring); an all-to-all and a send/recv one (every peer at once).
double ring_steps(Collective collective, std::int64_t group) {
  const double ranks = static_cast<double>(std::max<std::int64_t>(1, group));
  switch (collective) {
    case Collective::AllGather:
    case Collective::ReduceScatter:
      return ranks - 1;
    case Collective::AllReduce:
      return 2 * (ranks - 1);
    case Collective::AllToAll:
    case Collective::SendRecv:
      return 1;
  }
  return 1;
}

// The axis a comm/ role's group runs on, as search names the mesh axes.
enum Axis : std::size_t { kTp, kCp, kEp, kDpShard, kDpReplicate, kPp, kAxes };
constexpr std::array<const char*, kAxes> kAxisNames = {"tp",       "cp",           "ep",
                                                       "dp_shard", "dp_replicate", "pp"};

Axis axis_of(CommRole role) {
  switch (role) {
    case CommRole::Fsdp:
    case CommRole::ExpertFsdp:
      return kDpShard;
    case CommRole::Replicate:
    case CommRole::ExpertReplicate:
    case CommRole::DataParallel:
    case CommRole::ExpertDataParallel:
    case CommRole::Zero:
    case CommRole::ExpertZero:
      return kDpReplicate;
    case CommRole::Tp:
      return kTp;
    case CommRole::Cp:
      return kCp;
    case CommRole::Ep:
      return kEp;
    case CommRole::Pp:
    case CommRole::TiedSync:
      return kPp;
  }
  return kPp;
}

// A group of a mesh axis (or axes) in row-major rank order: `size` ranks,
// `stride` apart (the product of the faster axes).
struct AxisSpan {
  std::int64_t size = 1;
  std::int64_t stride = 1;
};

CommGroup group_of(std::initializer_list<AxisSpan> axes, std::int64_t gpus_per_node) {
  CommGroup group;
  for (const AxisSpan& axis : axes) {
    group.size *= axis.size;
    group.crosses_nodes =
        group.crosses_nodes || group_inter_node(axis.size, axis.stride, gpus_per_node);
  }
  return group;
}

double sum_moe_layers(const ModelStats& st) {
  double moe_layers = 0;
  for (const bool moe : st.moe_layer) moe_layers += moe ? 1 : 0;
  return moe_layers;
}

}  // namespace

std::vector<ChunkBlocks> layout_chunks(const ModelStats& st, const Layout& layout) {
  const std::int64_t less = layout.pp > 1 ? kStageLessLayers : 0;
  return auto_chunk_blocks(st.layers, layout.pp * layout.virtual_stages, less, less);
}

double stage_imbalance(const ModelStats& st, const Layout& layout, std::int64_t seq_len) {
  if (layout.pp <= 1 || st.layers == 0 ||
      st.block_active.size() != static_cast<std::size_t>(st.layers))
    return 1.0;
  const double attention_per_block =
      attention_flops_per_token(st, seq_len) / static_cast<double>(st.layers);
  std::vector<double> stage_flops(static_cast<std::size_t>(layout.pp), 0.0);
  const std::vector<ChunkBlocks> chunks = layout_chunks(st, layout);
  const bool v_shape = v_shaped(layout.schedule);
  for (std::size_t chunk = 0; chunk < chunks.size(); ++chunk) {
    double& flops = stage_flops[static_cast<std::size_t>(
        chunk_place(static_cast<std::int64_t>(chunk), layout.pp, v_shape).stage)];
    for (std::int64_t block = chunks[chunk].first; block < chunks[chunk].end; ++block)
      flops += 6.0 * st.block_active[static_cast<std::size_t>(block)] + attention_per_block;
  }
  // The output head sits with the model's last chunk.
  stage_flops[static_cast<std::size_t>(
      chunk_place(layout.pp * layout.virtual_stages - 1, layout.pp, v_shape).stage)] +=
      6.0 * st.head_active;
  double total = 0;
  double slowest = 0;
  for (const double flops : stage_flops) {
    total += flops;
    slowest = std::max(slowest, flops);
  }
  const double mean = total / static_cast<double>(layout.pp);
  return mean > 0 ? std::max(1.0, slowest / mean) : 1.0;
}

StageLayers stage_layers(const ModelStats& st, const Layout& layout, std::int64_t stage) {
  StageLayers counts;
  const std::vector<ChunkBlocks> chunks = layout_chunks(st, layout);
  const bool block = layout.recompute == Recompute::Full && layout.recompute_block > 0;
  const bool v_shape = v_shaped(layout.schedule);
  for (std::size_t chunk = 0; chunk < chunks.size(); ++chunk) {
    if (chunk_place(static_cast<std::int64_t>(chunk), layout.pp, v_shape).stage != stage) continue;
    const ChunkBlocks& blocks = chunks[chunk];
    for (std::int64_t layer = blocks.first; layer < blocks.end; ++layer) {
      const Recompute mode = block && layer - blocks.first >= layout.recompute_block
                                 ? Recompute::None
                                 : layout.recompute;
      counts.add_layer(
          st.moe_layer[static_cast<std::size_t>(layer)] ? LayerKind::Moe : LayerKind::Dense, mode,
          layer == blocks.first);
    }
  }
  counts.embedding = stage == 0;
  counts.logits =
      stage == chunk_place(layout.pp * layout.virtual_stages - 1, layout.pp, v_shape).stage;
  return counts;
}

double recomputed_fraction(const ModelStats& st, const Layout& layout) {
  if (layout.recompute != Recompute::Full || st.layers == 0) return 0;
  if (layout.recompute_block == 0) return 1;
  std::int64_t recomputed = 0;
  for (const ChunkBlocks& blocks : layout_chunks(st, layout))
    recomputed += std::min(blocks.size(), layout.recompute_block);
  return static_cast<double>(recomputed) / static_cast<double>(st.layers);
}

bool group_inter_node(std::int64_t size, std::int64_t stride, std::int64_t gpus_per_node) {
  // Row-major rank order: the group of an axis holds ranks r, r + stride, ...,
  // r + (size - 1) stride; it stays in one node when its span does.
  return size > 1 && size * stride > gpus_per_node;
}

double flops_per_token(const ModelStats& st, std::int64_t seq_len) {
  return linear_flops_per_token(st) + attention_flops_per_token(st, seq_len);
}

double linear_flops_per_token(const ModelStats& st) {
  // 6 N (Kaplan et al. 2020; forward 2 N, backward 4 N).
  return 6.0 * st.active;
}

double attention_flops_per_token(const ModelStats& st, std::int64_t seq_len) {
  // PaLM (Chowdhery et al. 2022, App. B) counts 12 L H Q T for QK^T and AV
  // forward and backward; half of it under a causal mask.
  return 6.0 * static_cast<double>(st.layers) * static_cast<double>(st.heads) * st.attention_dim *
         static_cast<double>(seq_len);
}

CommInputs comm_inputs(const ModelStats& st, const SearchRequest& req, const Layout& layout) {
  CommInputs in;
  const TrainingShape& shape = req.training.shape;
  const std::int64_t gpus_per_node = req.hardware.gpus_per_node;
  const std::int64_t microbatches =
      shape.global_batch_size.value_or(1) /
      (layout.dp() * std::max<std::int64_t>(1, shape.micro_batch_size));
  CommLayout& cl = in.layout;
  cl.degrees = ActivationLayout{layout.tp, 1, layout.sequence_parallel && layout.tp > 1, layout.cp};
  cl.ep = layout.ep;
  cl.pp = layout.pp;
  cl.virtual_stages = layout.virtual_stages;
  cl.microbatches = std::max<std::int64_t>(1, microbatches);
  cl.schedule = layout.schedule;
  cl.reshard_after_forward = layout.reshard_after_forward;
  cl.zero_stage = layout.zero1 ? 1 : 0;
  cl.loss_parallel = true;
  // The shipped rule sets split the embedding and lm_head over tp (vocab-parallel).
  cl.vocab_parallel = layout.tp > 1;
  // The dense mesh pp x dp_replicate x dp_shard x cp x tp and the expert mesh
  // pp x [dp_replicate] x efsdp|edp x ep, row-major (the recipe's order).
  const AxisSpan tp{layout.tp, 1};
  const AxisSpan cp{layout.cp, layout.tp};
  // FSDP shards over dp_shard x cp (torchtitan's dp_shard_cp, adjacent in the rank order).
  const AxisSpan shard{layout.fsdp_degree(), layout.tp};
  const AxisSpan replicate{layout.dp_replicate, layout.dp_shard * layout.cp * layout.tp};
  const AxisSpan pp{layout.pp, req.world / std::max<std::int64_t>(1, layout.pp)};
  CommGroups& gr = in.groups;
  gr.of(CommRole::Tp) = group_of({tp}, gpus_per_node);
  gr.of(CommRole::Cp) = group_of({cp}, gpus_per_node);
  gr.of(CommRole::Pp) = group_of({pp}, gpus_per_node);
  // Gradients are summed over every axis but pp and tp (plan_communication's
  // grad_axes): dp_replicate x dp_shard x cp.
  // (`shard` already spans cp when there is FSDP; without it, it is one rank.)
  gr.of(CommRole::DataParallel) = layout.dp_shard > 1 ? group_of({replicate, shard}, gpus_per_node)
                                                      : group_of({replicate, cp}, gpus_per_node);
  if (layout.dp_shard > 1) {
    gr.of(CommRole::Fsdp) = group_of({shard}, gpus_per_node);
    gr.of(CommRole::Replicate) = group_of({replicate}, gpus_per_node);
  }
  // ZeRO's dense group: the axes that shard no dense param (planner zero.cpp).
  if (layout.zero1) gr.of(CommRole::Zero) = group_of({replicate, cp}, gpus_per_node);
  const bool moe = st.expert > 0 && st.experts > 0;
  if (moe) {
    const AxisSpan ep{layout.ep, 1};
    const AxisSpan edp{layout.efsdp, layout.ep};
    const AxisSpan ereplicate{layout.dp_shard > 1 ? layout.dp_replicate : 1,
                              layout.efsdp * layout.ep};
    gr.of(CommRole::Ep) = group_of({ep}, gpus_per_node);
    gr.of(CommRole::ExpertDataParallel) = group_of({ereplicate, edp}, gpus_per_node);
    if (layout.dp_shard > 1 && layout.efsdp > 1) {
      gr.of(CommRole::ExpertFsdp) = group_of({edp}, gpus_per_node);
      gr.of(CommRole::ExpertReplicate) = group_of({ereplicate}, gpus_per_node);
    }
    if (layout.zero1) gr.of(CommRole::ExpertZero) = group_of({edp}, gpus_per_node);
  }
  // The busiest stage: the most layers and MoE layers a stage gets, the
  // embedding's (or lm_head's) share when there is a pipeline, sending both
  // ways (a middle stage) when pp > 2. Its layers' recompute modes are those
  // of stage_layers (block recompute: the chunks' first blocks).
  const double ppd = static_cast<double>(layout.pp);
  const double layers_stage = std::ceil(static_cast<double>(st.layers) / ppd);
  const double moe_stage = std::min(layers_stage, std::ceil(sum_moe_layers(st) / ppd));
  StageCommBytes& stage_bytes = in.bytes;
  stage_bytes.stage = layout.pp > 2 ? 1 : 0;
  const double recomputed = recomputed_fraction(st, layout);
  auto add_layers = [&stage_bytes, &layout, recomputed](int kind, double count) {
    if (layout.recompute != Recompute::Full) {
      stage_bytes.layers.count[kind][static_cast<int>(layout.recompute)] =
          static_cast<std::int64_t>(count);
      return;
    }
    const auto full = static_cast<std::int64_t>(std::round(count * recomputed));
    stage_bytes.layers.count[kind][static_cast<int>(Recompute::Full)] = full;
    stage_bytes.layers.count[kind][static_cast<int>(Recompute::None)] =
        static_cast<std::int64_t>(count) - full;
  };
  add_layers(0, layers_stage - moe_stage);
  add_layers(1, moe_stage);
  stage_bytes.layers.embedding = layout.pp == 1;
  stage_bytes.layers.logits = layout.pp == 1;
  const double tpd = static_cast<double>(layout.tp);
  const double outside = st.outside / tpd / (layout.pp > 1 ? 2 : 1);
  const double dense = (st.layer_dense / tpd + st.layer_vector) / ppd + outside;
  const double expert = st.expert / ppd / static_cast<double>(layout.ep);
  const double pbytes = static_cast<double>(st.param_bytes);
  const double gbytes = req.training.grad_dtype
                            ? static_cast<double>(element_size(*req.training.grad_dtype))
                            : pbytes;
  auto whole = [](double bytes) { return static_cast<std::int64_t>(std::ceil(bytes)); };
  if (layout.dp_shard > 1) {
    const double shard_degree = static_cast<double>(layout.fsdp_degree());
    stage_bytes.fsdp_param_bytes = whole(dense / shard_degree * pbytes);
    stage_bytes.fsdp_grad_bytes = whole(dense / shard_degree * gbytes);
    stage_bytes.fsdp_root_param_bytes = layout.pp == 1 ? whole(outside / shard_degree * pbytes) : 0;
  } else {
    stage_bytes.replicated_grad_bytes = whole(dense * gbytes);
    stage_bytes.replicated_param_bytes = whole(dense * pbytes);
  }
  if (moe) {
    if (layout.dp_shard > 1 && layout.efsdp > 1) {
      const double expert_shard_degree = static_cast<double>(layout.efsdp);
      stage_bytes.expert_fsdp_param_bytes = whole(expert / expert_shard_degree * pbytes);
      stage_bytes.expert_fsdp_grad_bytes = whole(expert / expert_shard_degree * gbytes);
    } else {
      stage_bytes.expert_replicated_grad_bytes = whole(expert * gbytes);
      stage_bytes.expert_replicated_param_bytes = whole(expert * pbytes);
    }
  }
  return in;
}

namespace {

// What the overlap rules need of a layout.
struct OverlapContext {
  const Layout& layout;
  double work = 0;          // compute + recompute seconds per step
  double microbatches = 1;  // per pipeline per step
  bool describe = false;    // write each rule in words
};

// Overlap. TP, CP and PP traffic sits on the critical path (PP and EP hide under
// dualpipev: DualPipe's overlapped forward and backward chunks, DeepSeek-V3 Sec.
// 3.2.1; torch's other schedules run one chunk's work at a time, so EP's all-to-all
// is exposed there). FSDP's prefetched all-gathers / reduce-scatters, EP's dispatch and
// combine (under dualpipev) and the
// data-parallel gradient reduction can hide behind compute, but they share the links:
// the terms that cross nodes share each GPU's NIC and the others its NVLink, so each
// link hides at most `work` seconds of them in all, filled in the order FSDP, EP,
// DP (the replicate reduction only within the last micro-batch's backward).
//
// FSDP2 under a pipeline (torch.distributed.pipelining, torch 2.13 stage.py /
// schedules.py): every backward runs with gradient sync off; the REDUCE_GRAD action
// after a stage's last backward calls each unit's post_backward (the reduce-scatter,
// and HSDP's all-reduce over dp_replicate) and FSDP's root post-backward callback makes
// the compute stream wait for them (_fsdp_state.py, _root_post_backward_final_callback):
// exposed. The units are gathered once, in the first micro-batch's forward: the
// all-gathers hide at most behind that forward (a third of one micro-batch's work).
// Returns the exposed seconds of all axes; sets each used axis's `exposed` and `overlap`.
double apply_overlap(const OverlapContext& ctx, std::array<AxisCommTime, kAxes>& axes,
                     const std::array<bool, kAxes>& used,
                     const std::array<double, kAxes>& gathers) {
  const Layout& layout = ctx.layout;
  const bool fsdp_under_pipeline = layout.pp > 1 && layout.dp_shard > 1;
  // DualPipeV overlaps one micro-batch's forward chunk with another's backward chunk
  // (torch ScheduleDualPipeV's OVERLAP_F_B; DeepSeek's overlapped_forward_backward).
  const bool dualpipe =
      layout.schedule == PipelineScheduleKind::DualPipeV && layout.pp > 1 && ctx.microbatches >= 2;
  std::array<double, 2> link_window = {ctx.work, ctx.work};  // [intra, inter]
  // Hides up to `seconds` of a term in `window` (and what its link has left); returns the rest.
  auto hide = [&link_window](bool inter_node, double seconds, double window) {
    double& left = link_window[inter_node ? 1 : 0];
    const double hidden = std::min({seconds, window, left});
    left -= hidden;
    return seconds - hidden;
  };
  const char* link_note =
      " (sharing the link's window: the overlapped terms on one link hide "
      "at most the compute time in all)";
  double exposed = 0;
  for (const std::size_t axis : {kDpShard, kEp, kDpReplicate, kTp, kCp, kPp}) {
    if (axis >= kAxes || !used[axis]) continue;  // the bound quiets g++ 12 -Warray-bounds
    AxisCommTime& axis_time = axes[axis];
    axis_time.axis = kAxisNames[axis];
    std::string overlap;
    switch (axis) {
      case kTp:
        axis_time.exposed = axis_time.seconds;
        overlap = "none: between the layer's matrix multiplies";
        break;
      case kCp:
        axis_time.exposed = axis_time.seconds;
        overlap = "none (all-gather based context parallelism)";
        break;
      case kEp:
      case kPp:
        if (dualpipe) {
          // DeepSeek-V3 Sec. 3.2.1: "both all-to-all and PP communication can be fully hidden".
          axis_time.exposed = hide(axis_time.inter_node, axis_time.seconds, ctx.work);
          overlap = std::string(
                        "behind another micro-batch's compute (DualPipeV's overlapped "
                        "forward and backward chunks: DeepSeek-V3 Sec. 3.2.1)") +
                    link_note;
        } else {
          axis_time.exposed = axis_time.seconds;
          overlap = axis == kPp     ? "none (on the schedule's critical path)"
                    : layout.pp > 1 ? "none: the schedule runs one micro-batch's chunk at a time "
                                      "(only dualpipev overlaps another micro-batch's compute)"
                                    : "none without a pipeline (one micro-batch at a time)";
        }
        break;
      case kDpShard:
        if (fsdp_under_pipeline) {
          const double gather = gathers[axis];
          axis_time.exposed =
              hide(axis_time.inter_node, gather, ctx.work / ctx.microbatches / 3.0) +
              (axis_time.seconds - gather);
          overlap = std::string(
                        "all-gathers behind the first micro-batch's forward; reduce-scatters "
                        "exposed (torch pipelining reduces after the stage's last backward and "
                        "the compute stream waits for them)") +
                    link_note;
        } else {
          axis_time.exposed = hide(axis_time.inter_node, axis_time.seconds, ctx.work);
          overlap =
              std::string("prefetched: behind the compute (FSDP2 implicit prefetch)") + link_note;
        }
        break;
      case kDpReplicate:
        if (fsdp_under_pipeline) {
          axis_time.exposed = axis_time.seconds;
          overlap =
              "none: HSDP's all-reduce runs with FSDP's reduce-scatters after the stage's "
              "last backward (torch pipelining)";
        } else {
          axis_time.exposed = hide(axis_time.inter_node, axis_time.seconds,
                                   ctx.work / ctx.microbatches * 2.0 / 3.0);
          overlap = std::string("bucketed behind the last micro-batch's backward") + link_note;
        }
        break;
      default:
        axis_time.exposed = axis_time.seconds;
        overlap = "none (on the schedule's critical path)";
        break;
    }
    if (ctx.describe) axis_time.overlap = overlap;
    exposed += axis_time.exposed;
  }
  return exposed;
}

}  // namespace

StepCost step_cost(const ModelStats& st, const SearchRequest& req, const Layout& layout,
                   bool describe, const StageComm* exact_comm) {
  const Hardware& hw = req.hardware;
  const TrainingShape& shape = req.training.shape;
  const double seq = static_cast<double>(shape.seq_len.value_or(1));
  const double batch = static_cast<double>(shape.global_batch_size.value_or(1));
  const double world = static_cast<double>(req.world);
  const double microbatches = std::max(
      1.0, std::floor(batch / (static_cast<double>(layout.dp()) *
                               static_cast<double>(shape.micro_batch_size))));  // micro-batches
  const double pp = static_cast<double>(layout.pp);
  StepCost cost;
  const double linear = linear_flops_per_token(st);
  const double attention = attention_flops_per_token(st, shape.seq_len.value_or(1));
  cost.flops_per_token = linear + attention;
  const double tokens = batch * seq;
  // FP8 GEMMs (--fp8): the linear layers' matrix multiplies run at twice the
  // BF16 peak (H100/H800 dense FP8); the attention core stays BF16 (DeepSeek-V3 Sec. 3.3).
  const double linear_peak = hw.peak_flops * (req.fp8_gemm ? 2.0 : 1.0);
  const double per_rank = tokens / world;
  const double linear_s = linear * per_rank / (linear_peak * hw.gemm_efficiency);
  const double attention_s = attention * per_rank / (hw.peak_flops * hw.gemm_efficiency);
  cost.compute = linear_s + attention_s;
  // Recompute: full repeats each layer's forward (1/3 of forward + backward),
  // block only the recomputed layers' share; selective the attention core's forward.
  if (layout.recompute == Recompute::Full)
    cost.recompute = cost.compute / 3.0 * recomputed_fraction(st, layout);
  if (layout.recompute == Recompute::Selective) cost.recompute = attention_s / 3.0;
  // Stage imbalance: the pipeline runs at its slowest stage's pace, so every micro-batch
  // takes that stage's time (the output head on the last stage; torchtitan's
  // less-layers cut balances most of it).
  cost.imbalance = (stage_imbalance(st, layout, shape.seq_len.value_or(1)) - 1.0) *
                   (cost.compute + cost.recompute);
  const double work = cost.compute + cost.recompute + cost.imbalance;
  // Pipeline bubble (Narayanan et al. 2021, Sec. 2.2): (pp - 1) / m of the (slowest
  // stage's) work for 1F1B and GPipe, / v interleaved; zero bubble (Qi et al. 2023,
  // ZB-H1) a third of 1F1B's.
  if (layout.pp > 1) {
    double bubble = (pp - 1) / microbatches * work;
    if (layout.schedule == PipelineScheduleKind::Interleaved)
      bubble /= static_cast<double>(layout.virtual_stages);
    // ZB-H1, ZB-V and DualPipeV: (pp - 1)(F + B - 2W) resp. (PP/2 - 1)(F&B + B - 3W) with
    // PP = 2 pp chunk stages (deepseek-ai/DualPipe README); with B = 2F, W = F and F&B = F
    // + B per chunk (compute does not overlap compute) each is (pp - 1) F of a whole
    // stage: a third of 1F1B's (pp - 1)(F + B).
    if (layout.schedule == PipelineScheduleKind::ZeroBubble || v_shaped(layout.schedule))
      bubble /= 3.0;
    cost.bubble = bubble;
  }

  // Communication: comm/'s bytes per (role, collective), timed per axis.
  std::array<AxisCommTime, kAxes> axes{};
  std::array<bool, kAxes> used{};
  std::array<double, kAxes> gathers{};  // the all-gather part of each axis's seconds
  if (st.arch) {
    StageComm estimated;
    if (exact_comm == nullptr) {
      CommInputs in = comm_inputs(st, req, layout);
      in.layout.texts = describe;  // phase 1 reads the bytes alone
      const std::int64_t element_bytes =
          element_size(req.training.shape.activation_dtype.value_or(st.activation_dtype));
      estimated =
          stage_communication(*st.arch, shape, element_bytes, in.layout, in.groups, in.bytes);
    }
    const StageComm& comm = exact_comm != nullptr ? *exact_comm : estimated;
    const std::int64_t ep_nodes = std::max<std::int64_t>(1, layout.ep / hw.gpus_per_node);
    for (const CommTerm& term : comm.terms) {
      const Axis axis = axis_of(term.role);
      AxisCommTime& axis_time = axes[axis];
      used[axis] = true;
      const double bytes = static_cast<double>(term.bytes);
      const double calls = static_cast<double>(term.calls);
      const bool inter = term.crosses_nodes;
      double seconds = 0;
      if (term.role == CommRole::Ep && inter && req.moe_node_limit > 0) {
        // Node-limited routing (DeepSeek-V3 Sec. 2.1.2, 3.2.2): a token crosses
        // InfiniBand once per target node, to at most M nodes, and is forwarded
        // to its experts over NVLink; IB and NVLink transfers overlap.
        const double top_k = static_cast<double>(std::max<std::int64_t>(1, st.top_k));
        const double nodes = static_cast<double>(ep_nodes);
        const double reach = std::min({static_cast<double>(req.moe_node_limit), nodes, top_k});
        const double ib = bytes / top_k * reach * (nodes - 1) / nodes /
                          ((static_cast<double>(layout.ep) - 1) / static_cast<double>(layout.ep));
        seconds = std::max(ib / hw.inter_bandwidth, bytes / hw.intra_bandwidth) +
                  calls * ring_steps(term.collective, term.group_size) * hw.inter_latency;
      } else {
        const double bw = inter ? hw.inter_bandwidth : hw.intra_bandwidth;
        const double lat = inter ? hw.inter_latency : hw.intra_latency;
        seconds =
            (bw > 0 ? bytes / bw : 0) + calls * ring_steps(term.collective, term.group_size) * lat;
      }
      axis_time.bytes += bytes;
      axis_time.seconds += seconds;
      if (term.collective == Collective::AllGather) gathers[axis] += seconds;
      axis_time.inter_node = axis_time.inter_node || inter;
      if (describe) {
        // The group size too: a role's group may span more axes than the one it is
        // listed under (ZeRO over dp_replicate x cp, expert data parallel over edp).
        const std::string part =
            std::string(comm_role_name(term.role)) + " " + collective_name(term.collective) + " x" +
            std::to_string(term.calls) + " over " + std::to_string(term.group_size) + " ranks";
        axis_time.collective += (axis_time.collective.empty() ? "" : ", ") + part;
      }
    }
  }
  cost.exposed_comm = apply_overlap({layout, work, microbatches, describe}, axes, used, gathers);
  for (std::size_t axis = 0; axis < kAxes; ++axis) {
    if (used[axis]) cost.comm.push_back(std::move(axes[axis]));
  }
  // Optimizer step: read and write the local params, grads, master weights and
  // state (AdamW: 16 bytes per element with fp32 master + 2 states, plus bf16 param + grad).
  const double tpd = static_cast<double>(layout.tp);
  const double dense_stage =
      (st.layer_dense / tpd + st.layer_vector) / pp + st.outside / tpd / (layout.pp > 1 ? 2 : 1);
  const double expert_stage = st.expert / pp / static_cast<double>(layout.ep);
  const double dense_local = dense_stage / static_cast<double>(layout.fsdp_degree());
  const double expert_local =
      expert_stage / static_cast<double>(layout.dp_shard > 1 ? layout.efsdp : 1);
  const double state_bytes = req.training.optimizer == Optimizer::None  ? 0
                             : req.training.optimizer == Optimizer::Sgd ? 4
                                                                        : 8;
  const double master = req.training.master_weights ? 4 : 0;
  const double pbytes = static_cast<double>(st.param_bytes);
  // ZeRO-1 shards the state over its groups (comm_inputs: dp_replicate x cp, edp).
  const double zero_dense = layout.zero1 ? static_cast<double>(layout.dp_replicate * layout.cp) : 1;
  const double zero_expert =
      layout.zero1 && layout.dp_shard == 1 ? static_cast<double>(layout.efsdp) : 1;
  const double state = 2 * (master + state_bytes);
  cost.optimizer = (dense_local * (2 * pbytes + state / zero_dense) +
                    expert_local * (2 * pbytes + state / zero_expert)) /
                   std::max(1.0, hw.hbm_bandwidth);
  cost.step = work + cost.bubble + cost.exposed_comm + cost.optimizer;
  cost.tokens_per_second_per_gpu = tokens / world / cost.step;
  // MFU against the peak the GEMMs run at: the FP8 dense peak (twice BF16) with --fp8,
  // so it never exceeds 1.
  cost.mfu = cost.flops_per_token * cost.tokens_per_second_per_gpu / linear_peak;
  // The dominant term.
  cost.dominant = "compute";
  double best = cost.compute + cost.recompute;
  if (cost.imbalance > best) {
    best = cost.imbalance;
    cost.dominant = "imbalance";
  }
  if (cost.bubble > best) {
    best = cost.bubble;
    cost.dominant = "bubble";
  }
  if (cost.optimizer > best) {
    best = cost.optimizer;
    cost.dominant = "optimizer";
  }
  for (const AxisCommTime& axis_time : cost.comm) {
    if (axis_time.exposed > best) {
      best = axis_time.exposed;
      cost.dominant = "comm " + axis_time.axis;
    }
  }
  return cost;
}

}  // namespace shardc::search
