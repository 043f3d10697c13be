// The communication model of one rank of one stage (src/comm/comm.hpp:
// every term, its formula and its source are listed there).
#include <algorithm>
#include <string>
#include <string_view>

#include "comm/comm.hpp"
#include "support/saturating.hpp"

namespace shardc {
namespace {

using saturating::ceil_div;
using saturating::mul;
// `add` is Builder's: the saturating sum is `plus` here.
std::int64_t plus(std::int64_t lhs, std::int64_t rhs) { return saturating::add(lhs, rhs); }

std::string n(std::int64_t value) { return std::to_string(value); }

// The ring factor of `collective` as text: "(n-1)/n" with n written out.
std::string factor_text(Collective collective, std::int64_t group) {
  const std::string group_text = n(group);
  switch (collective) {
    case Collective::AllReduce:
      return "2 x " + n(group - 1) + "/" + group_text;
    case Collective::SendRecv:
      return "1";
    default:
      return n(group - 1) + "/" + group_text;
  }
}

// One kind of collective of a stage: `calls` of them, each of `buffer` bytes on the group
// of `role`, named `prefix` + `suffix`; `source` says where the framework issues it.
struct Call {
  CommRole role;
  Collective collective;
  std::string_view prefix;
  std::string_view suffix;
  std::int64_t calls;
  std::int64_t buffer;
  std::string_view source;
};

struct Builder {
  const CommGroups& groups;
  StageComm& out;
  bool texts = true;  // CommLayout::texts
  // Adds `call.calls` collectives of `call.buffer` bytes on the group of `call.role`;
  // `buffer_text()` is the buffer's formula (called only when the terms carry texts).
  template <class BufferText>
  void add(const Call& call, BufferText&& buffer_text) {
    const CommRole role = call.role;
    const std::int64_t calls = call.calls;
    const std::int64_t buffer = call.buffer;
    const CommGroup& group = groups.of(role);
    if (calls <= 0 || buffer <= 0) return;
    if (call.collective != Collective::SendRecv && group.size <= 1) return;
    CommTerm term;
    term.role = role;
    term.collective = call.collective;
    term.calls = calls;
    term.buffer_bytes = buffer;
    term.bytes = mul(calls, ring_bytes_sent(call.collective, buffer, group.size));
    term.group_size = call.collective == Collective::SendRecv ? 2 : group.size;
    term.crosses_nodes = group.crosses_nodes;
    if (texts) {
      term.name = std::string(call.prefix) + std::string(call.suffix);
      const std::string text = buffer_text();
      const std::string value = n(buffer);
      const bool shown = text.size() >= value.size() &&
                         text.compare(text.size() - value.size(), value.size(), value) == 0;
      term.formula = n(calls) + " x " + factor_text(call.collective, group.size) +
                     " x B, B = " + text + (shown ? "" : " = " + value);
      term.source = std::string(call.source);
    }
    out.bytes = plus(out.bytes, term.bytes);
    out.terms.push_back(std::move(term));
  }
};

}  // namespace

const char* collective_name(Collective collective) {
  switch (collective) {
    case Collective::AllGather:
      return "all_gather";
    case Collective::ReduceScatter:
      return "reduce_scatter";
    case Collective::AllReduce:
      return "all_reduce";
    case Collective::AllToAll:
      return "all_to_all";
    case Collective::SendRecv:
      return "send_recv";
  }
  return "all_gather";
}

const char* comm_role_name(CommRole role) {
  static constexpr const char* kNames[kCommRoles] = {
      "fsdp", "expert_fsdp", "replicate", "expert_replicate",
      "dp",   "expert_dp",   "zero",      "expert_zero",
      "tp",   "cp",          "ep",        "pp",
      "tied"};
  return kNames[static_cast<std::size_t>(role)];
}

std::int64_t ring_bytes_sent(Collective collective, std::int64_t buffer_bytes,
                             std::int64_t group_size) {
  if (buffer_bytes <= 0) return 0;
  if (collective == Collective::SendRecv) return buffer_bytes;
  if (group_size <= 1) return 0;
  const std::int64_t chunk = ceil_div(buffer_bytes, group_size);
  const std::int64_t once = mul(chunk, group_size - 1);
  return collective == Collective::AllReduce ? mul(once, 2) : once;
}

StageComm stage_communication(const ActivationArch& arch, const TrainingShape& shape,
                              std::int64_t element_bytes, const CommLayout& layout,
                              const CommGroups& groups, const StageCommBytes& bytes) {
  StageComm out;
  out.stage = bytes.stage;
  Builder builder{groups, out, layout.texts};
  const std::int64_t microbatches = std::max<std::int64_t>(1, layout.microbatches);
  const bool pipeline = layout.pp > 1;
  const bool reshard = layout.reshards();
  const ActivationLayout& deg = layout.degrees;
  const std::int64_t tp = std::max<std::int64_t>(1, deg.tp);
  const std::int64_t cp = std::max<std::int64_t>(1, deg.cp);
  const std::int64_t seq = shape.seq_len.value_or(0) / cp;
  const std::int64_t tokens = mul(seq, shape.micro_batch_size);
  const std::int64_t hidden_bytes = mul({element_bytes, tokens, arch.hidden});  // e T h
  const auto eth = [&] {
    return "e T h = " + n(element_bytes) + " x " + n(tokens) + " x " + n(arch.hidden);
  };

  // FSDP2 (dense, then the experts' own groups).
  const std::int64_t gathers_fwd = pipeline && !reshard ? 1 : microbatches;
  const std::int64_t syncs = pipeline ? 1 : microbatches;
  const char* fsdp_src =
      "torch FSDP2 FSDPParamGroup.unshard / post_backward (reduce_scatter_tensor); "
      "torchtitan gradient accumulation syncs per micro-batch, torch pipelining on the last";
  auto fsdp = [&](CommRole role, CommRole replicate, const char* prefix, std::int64_t param,
                  std::int64_t root, std::int64_t grad) {
    const std::int64_t group_size = groups.of(role).size;
    if (group_size <= 1) return;
    builder.add({role, Collective::AllGather, prefix, ".forward_all_gather", gathers_fwd,
                 mul(param, group_size), fsdp_src},
                [&] { return "shard x n = " + n(param) + " x " + n(group_size); });
    if (reshard) {
      builder.add(
          {role, Collective::AllGather, prefix, ".backward_all_gather", microbatches,
           mul(param - root, group_size),
           "FSDP2 reshard_after_forward: backward gathers again (the root unit keeps its params)"},
          [&] { return "(shard - root unit's) x n = " + n(param - root) + " x " + n(group_size); });
    }
    builder.add({role, Collective::ReduceScatter, prefix, ".grad_reduce_scatter", syncs,
                 mul(grad, group_size), fsdp_src},
                [&] { return "grad shard x n = " + n(grad) + " x " + n(group_size); });
    builder.add(
        {replicate, Collective::AllReduce, prefix, ".hsdp_grad_all_reduce", syncs, grad,
         "torch FSDP2 HSDP: the reduce-scatter output all-reduced over the replicate group"},
        [&] { return "grad shard = " + n(grad); });
  };
  fsdp(CommRole::Fsdp, CommRole::Replicate, "fsdp", bytes.fsdp_param_bytes,
       bytes.fsdp_root_param_bytes, bytes.fsdp_grad_bytes);
  fsdp(CommRole::ExpertFsdp, CommRole::ExpertReplicate, "expert_fsdp",
       bytes.expert_fsdp_param_bytes, 0, bytes.expert_fsdp_grad_bytes);

  // Params no FSDP split shards: ZeRO-1/2 (reduce-scatter + all-gather) or DDP.
  auto replicated = [&](CommRole zero, CommRole dp, const char* prefix, std::int64_t grad,
                        std::int64_t param) {
    if (layout.zero_stage == 1 || layout.zero_stage == 2) {
      if (groups.of(zero).size > 1) {
        // ZeRO-1 reduces once, at the accumulation boundary; ZeRO-2 keeps only its grad
        // shard, so it reduces every micro-batch's grads (DeepSpeed engine
        // allreduce_gradients: "ZeRO stage >= 2 communicates during non gradient
        // accumulation boundaries as well").
        const bool stage2 = layout.zero_stage == 2;
        builder.add({zero, Collective::ReduceScatter, prefix, ".grad_reduce_scatter",
                     stage2 ? microbatches : 1, grad,
                     stage2 ? "DeepSpeed stage_1_and_2: ZeRO-2 reduces each micro-batch's "
                              "gradients into the owner's partition (engine allreduce_gradients)"
                            : "Megatron-Core param_and_grad_buffer start_grad_sync "
                              "(reduce_scatter_tensor); DeepSpeed stage_1_and_2 partitioned "
                              "gradients, at the accumulation boundary"},
                    [&] { return "local grads = " + n(grad); });
        builder.add({zero, Collective::AllGather, prefix, ".param_all_gather", 1, param,
                     "Megatron-Core start_param_sync (all_gather of the updated shards)"},
                    [&] { return "local params = " + n(param); });
        return;
      }
    }
    builder.add({dp, Collective::AllReduce, prefix, ".grad_all_reduce", 1, grad,
                 "DDP / Megatron gradient all-reduce, once per step (no_sync until the last "
                 "micro-batch)"},
                [&] { return "local grads = " + n(grad); });
  };
  replicated(CommRole::Zero, CommRole::DataParallel, "dp", bytes.replicated_grad_bytes,
             bytes.replicated_param_bytes);
  replicated(CommRole::ExpertZero, CommRole::ExpertDataParallel, "expert_dp",
             bytes.expert_replicated_grad_bytes, bytes.expert_replicated_param_bytes);
  builder.add({CommRole::TiedSync, Collective::AllReduce, "tied.grad_all_reduce", "", 1,
               bytes.tied_grad_bytes,
               "Megatron embedding group: tied ends on different stages all-reduce their grads"},
              [&] { return "tied grads = " + n(bytes.tied_grad_bytes); });

  const StageLayers& stage_layers = bytes.layers;
  const std::int64_t dense_layers =
      stage_layers.count[0][0] + stage_layers.count[0][1] + stage_layers.count[0][2];
  const std::int64_t moe_layers =
      stage_layers.count[1][0] + stage_layers.count[1][1] + stage_layers.count[1][2];
  const std::int64_t full_layers = stage_layers.count[0][2] + stage_layers.count[1][2];
  const std::int64_t layers = dense_layers + moe_layers;

  // TP: Korthikanti Sec. 4.2.2 (2 forward + 2 backward per layer), or per linear.
  if (groups.of(CommRole::Tp).size > 1 && layers > 0) {
    // Blocks per layer whose output is reduced: attention, and the MLP
    // (a MoE layer's experts reduce over expert tp only with shared experts
    // or expert tp on the same group; counted when it has shared experts).
    const std::int64_t moe_blocks = arch.shared_experts > 0 ? 2 : 1;
    const std::int64_t fwd_blocks = mul(dense_layers, 2) + mul(moe_layers, moe_blocks);
    std::int64_t bwd_inputs = fwd_blocks;
    if (layout.tp_per_linear && !arch.mla()) {
      const std::int64_t attn = 3;  // q, k, v
      const std::int64_t mlp = arch.gated_mlp ? 2 : 1;
      bwd_inputs = mul(dense_layers, attn + mlp) +
                   mul(moe_layers, attn + (arch.shared_experts > 0 ? mlp : 0));
    }
    const std::int64_t fwd = mul(microbatches, fwd_blocks + mul(full_layers, 2));
    const std::int64_t bwd = mul(microbatches, bwd_inputs);
    const char* src =
        "Korthikanti et al. 2022 Sec. 4.2.2: g / g-bar operators, 2 forward + 2 backward per "
        "layer; full recompute repeats the forward's";
    if (deg.sequence_parallel) {
      builder.add({CommRole::Tp, Collective::AllGather, "tp.layer_all_gather", "", fwd + bwd,
                   hidden_bytes, src},
                  eth);
      builder.add({CommRole::Tp, Collective::ReduceScatter, "tp.layer_reduce_scatter", "",
                   fwd + bwd, hidden_bytes, src},
                  eth);
    } else {
      builder.add({CommRole::Tp, Collective::AllReduce, "tp.layer_forward_all_reduce", "", fwd,
                   hidden_bytes, src},
                  eth);
      builder.add({CommRole::Tp, Collective::AllReduce, "tp.layer_backward_all_reduce", "", bwd,
                   hidden_bytes,
                   layout.tp_per_linear ? "torch ColwiseParallel: each linear's input gradient "
                                          "(from_local Replicate) all-reduced on its own"
                                        : src},
                  eth);
    }
    if (layout.vocab_parallel && stage_layers.embedding) {
      builder.add(
          {CommRole::Tp, deg.sequence_parallel ? Collective::ReduceScatter : Collective::AllReduce,
           "tp.embedding_output", "", microbatches, hidden_bytes,
           "vocab-parallel embedding (RowwiseParallel on dim 0): Partial output reduced"},
          eth);
    }
    if (layout.vocab_parallel && stage_layers.logits) {
      builder.add(
          {CommRole::Tp, deg.sequence_parallel ? Collective::ReduceScatter : Collective::AllReduce,
           "tp.lm_head_input_grad", "", microbatches, hidden_bytes,
           "ColwiseParallel lm_head: its input's gradient reduced in backward"},
          eth);
      if (deg.sequence_parallel) {
        builder.add({CommRole::Tp, Collective::AllGather, "tp.lm_head_input", "", microbatches,
                     hidden_bytes, "sequence parallel: lm_head's input gathered in forward"},
                    eth);
      }
      if (layout.loss_parallel) {
        builder.add({CommRole::Tp, Collective::AllReduce, "tp.loss_parallel_statistics", "",
                     mul(microbatches, 3), mul(4, tokens),
                     "torch loss_parallel / Megatron _VocabParallelCrossEntropy: max, sum of exp, "
                     "target logit per token (fp32)"},
                    [&] { return "4 T = 4 x " + n(tokens); });
      } else {
        const std::int64_t logits = mul({element_bytes, tokens, arch.vocab});
        builder.add(
            {CommRole::Tp, Collective::AllGather, "tp.logits_all_gather", "", microbatches, logits,
             "ColwiseParallel lm_head with Replicate output (transformers colwise_rep)"},
            [&] {
              return "e T V = " + n(element_bytes) + " x " + n(tokens) + " x " + n(arch.vocab);
            });
      }
    }
  }

  // CP: torch context_parallel, rotate method allgather (K and V of every cp rank).
  if (groups.of(CommRole::Cp).size > 1 && layers > 0) {
    const std::int64_t kv_width =
        arch.mla() ? mul(arch.heads, arch.qk_nope_head_dim + arch.qk_rope_head_dim) +
                         mul(arch.heads, arch.v_head_dim)
                   : mul({2, arch.kv_heads, arch.head_dim});
    const std::int64_t kv = ceil_div(mul({element_bytes, tokens, cp, kv_width}), tp);
    const auto kv_text = [&] {
      return "e (cp T) kv_width / t = " + n(element_bytes) + " x " + n(tokens * cp) + " x " +
             n(kv_width) + " / " + n(tp);
    };
    const char* src =
        "torch.distributed.tensor.experimental context_parallel, rotate_method allgather: "
        "K and V gathered per layer in forward and backward, their grads returned";
    builder.add({CommRole::Cp, Collective::AllGather, "cp.kv_all_gather", "",
                 mul(microbatches, mul(layers, 2) + full_layers), kv, src},
                kv_text);
    builder.add({CommRole::Cp, Collective::ReduceScatter, "cp.kv_grad_reduce_scatter", "",
                 mul(microbatches, layers), kv, src},
                kv_text);
  }

  // EP: dispatch and combine, forward and backward.
  if (groups.of(CommRole::Ep).size > 1 && moe_layers > 0) {
    const std::int64_t ep_tokens = deg.sequence_parallel ? ceil_div(tokens, tp) : tokens;
    std::int64_t routed = mul(ep_tokens, arch.top_k);
    if (shape.moe.capacity_factor)
      routed = static_cast<std::int64_t>(static_cast<double>(routed) * *shape.moe.capacity_factor);
    const std::int64_t buffer = mul({routed, arch.hidden, element_bytes});
    const std::int64_t calls =
        mul(microbatches, mul(moe_layers, 4) + mul(stage_layers.count[1][2], 2));
    builder.add(
        {CommRole::Ep, Collective::AllToAll, "ep.dispatch_combine", "", calls, buffer,
         "Megatron MoEAlltoAllTokenDispatcher / torchtitan ExpertParallel token dispatch and "
         "combine: 2 forward, 2 backward per MoE layer"},
        [&] {
          const std::string routed_text = shape.moe.capacity_factor
                                              ? std::string("c T k")
                                              : "T k = " + n(ep_tokens) + " x " + n(arch.top_k);
          return routed_text + " x h x e = " + n(routed) + " x " + n(arch.hidden) + " x " +
                 n(element_bytes);
        });
  }

  // PP: activations forward, their gradients backward, per micro-batch and chunk.
  if (layout.pp > 1) {
    const std::int64_t virtual_stages = std::max<std::int64_t>(1, layout.virtual_stages);
    // Looped chunks: the last stage sends no activation on (its last chunk ends the
    // model), the first no gradient back. In a V (zbv, dualpipev) stage 0 holds the
    // first and the last chunk, and the last stage passes between its two chunks
    // locally: both ends send one fewer each way.
    const bool v_shape = v_shaped(layout.schedule);
    const bool last = bytes.stage == layout.pp - 1 || (v_shape && bytes.stage == 0);
    const bool first = bytes.stage == 0 || (v_shape && bytes.stage == layout.pp - 1);
    const std::int64_t boundary = deg.sequence_parallel ? ceil_div(hidden_bytes, tp) : hidden_bytes;
    const auto text = [&] { return deg.sequence_parallel ? eth() + " / t" : eth(); };
    const char* src =
        "Megatron p2p_communication send_forward / send_backward, torch pipelining "
        "_PipelineStage: one activation per micro-batch and model chunk";
    builder.add({CommRole::Pp, Collective::SendRecv, "pp.send_activation", "",
                 mul(microbatches, virtual_stages - (last ? 1 : 0)), boundary, src},
                text);
    builder.add({CommRole::Pp, Collective::SendRecv, "pp.send_grad", "",
                 mul(microbatches, virtual_stages - (first ? 1 : 0)), boundary, src},
                text);
  }
  return out;
}

}  // namespace shardc
