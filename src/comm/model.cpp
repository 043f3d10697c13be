// The communication model of one rank of one stage (src/comm/comm.hpp:
// every term, its formula and its source are listed there).
#include <algorithm>
#include <string>

#include "comm/comm.hpp"
#include "support/saturating.hpp"

namespace shardc {
namespace {

using saturating::ceil_div;
using saturating::mul;
// `add` is Builder's: the saturating sum is `plus` here.
std::int64_t plus(std::int64_t a, std::int64_t b) { return saturating::add(a, b); }

std::string n(std::int64_t v) { return std::to_string(v); }

// The ring factor of `c` as text: "(n-1)/n" with n written out.
std::string factor_text(Collective c, std::int64_t group) {
  const std::string g = n(group);
  switch (c) {
    case Collective::AllReduce:
      return "2 x " + n(group - 1) + "/" + g;
    case Collective::SendRecv:
      return "1";
    default:
      return n(group - 1) + "/" + g;
  }
}

// One kind of collective of a stage: `calls` of them, each of `buffer` bytes
// (`buffer_text`: its formula) on the group of `role`; `source` says where
// the framework issues it.
struct Call {
  CommRole role;
  Collective collective;
  std::string name;
  std::int64_t calls;
  std::int64_t buffer;
  std::string buffer_text;
  std::string source;
};

struct Builder {
  const CommGroups& groups;
  StageComm& out;
  // Adds `call.calls` collectives of `call.buffer` bytes on the group of `call.role`.
  void add(Call call) {
    const CommRole role = call.role;
    const std::int64_t calls = call.calls;
    const std::int64_t buffer = call.buffer;
    const std::string& buffer_text = call.buffer_text;
    const CommGroup& g = groups.of(role);
    if (calls <= 0 || buffer <= 0) return;
    if (call.collective != Collective::SendRecv && g.size <= 1) return;
    CommTerm t;
    t.role = role;
    t.collective = call.collective;
    t.name = std::move(call.name);
    t.calls = calls;
    t.buffer_bytes = buffer;
    t.bytes = mul(calls, ring_bytes_sent(call.collective, buffer, g.size));
    t.group_size = call.collective == Collective::SendRecv ? 2 : g.size;
    t.crosses_nodes = g.crosses_nodes;
    const std::string value = n(buffer);
    const bool shown =
        buffer_text.size() >= value.size() &&
        buffer_text.compare(buffer_text.size() - value.size(), value.size(), value) == 0;
    t.formula = n(calls) + " x " + factor_text(call.collective, g.size) +
                " x B, B = " + buffer_text + (shown ? "" : " = " + value);
    t.source = std::move(call.source);
    out.bytes = plus(out.bytes, t.bytes);
    out.terms.push_back(std::move(t));
  }
};

}  // namespace

const char* collective_name(Collective c) {
  switch (c) {
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

const char* comm_role_name(CommRole r) {
  static constexpr const char* kNames[kCommRoles] = {
      "fsdp", "expert_fsdp", "replicate", "expert_replicate",
      "dp",   "expert_dp",   "zero",      "expert_zero",
      "tp",   "cp",          "ep",        "pp",
      "tied"};
  return kNames[static_cast<std::size_t>(r)];
}

std::int64_t ring_bytes_sent(Collective c, std::int64_t buffer_bytes, std::int64_t group_size) {
  if (buffer_bytes <= 0) return 0;
  if (c == Collective::SendRecv) return buffer_bytes;
  if (group_size <= 1) return 0;
  const std::int64_t chunk = ceil_div(buffer_bytes, group_size);
  const std::int64_t once = mul(chunk, group_size - 1);
  return c == Collective::AllReduce ? mul(once, 2) : once;
}

StageComm stage_communication(const ActivationArch& arch, const TrainingShape& shape,
                              std::int64_t element_bytes, const CommLayout& layout,
                              const CommGroups& groups, const StageCommBytes& bytes) {
  StageComm out;
  out.stage = bytes.stage;
  Builder b{groups, out};
  const std::int64_t m = std::max<std::int64_t>(1, layout.microbatches);
  const bool pipeline = layout.pp > 1;
  const bool reshard = layout.reshards();
  const ActivationLayout& deg = layout.degrees;
  const std::int64_t tp = std::max<std::int64_t>(1, deg.tp);
  const std::int64_t cp = std::max<std::int64_t>(1, deg.cp);
  const std::int64_t seq = shape.seq_len.value_or(0) / cp;
  const std::int64_t tokens = mul(seq, shape.micro_batch_size);
  const std::int64_t e = element_bytes;
  const std::int64_t hidden_bytes = mul({e, tokens, arch.hidden});  // e T h
  const std::string eth = "e T h = " + n(e) + " x " + n(tokens) + " x " + n(arch.hidden);

  // FSDP2 (dense, then the experts' own groups).
  const std::int64_t gathers_fwd = pipeline && !reshard ? 1 : m;
  const std::int64_t syncs = pipeline ? 1 : m;
  const char* fsdp_src =
      "torch FSDP2 FSDPParamGroup.unshard / post_backward (reduce_scatter_tensor); "
      "torchtitan gradient accumulation syncs per micro-batch, torch pipelining on the last";
  auto fsdp = [&](CommRole role, CommRole replicate, const char* prefix, std::int64_t param,
                  std::int64_t root, std::int64_t grad) {
    const std::int64_t w = groups.of(role).size;
    if (w <= 1) return;
    const std::string shard = "shard x n = " + n(param) + " x " + n(w);
    b.add({role, Collective::AllGather, std::string(prefix) + ".forward_all_gather", gathers_fwd,
           mul(param, w), shard, fsdp_src});
    if (reshard) {
      b.add(
          {role, Collective::AllGather, std::string(prefix) + ".backward_all_gather", m,
           mul(param - root, w), "(shard - root unit's) x n = " + n(param - root) + " x " + n(w),
           "FSDP2 reshard_after_forward: backward gathers again (the root unit keeps its params)"});
    }
    b.add({role, Collective::ReduceScatter, std::string(prefix) + ".grad_reduce_scatter", syncs,
           mul(grad, w), "grad shard x n = " + n(grad) + " x " + n(w), fsdp_src});
    b.add({replicate, Collective::AllReduce, std::string(prefix) + ".hsdp_grad_all_reduce", syncs,
           grad, "grad shard = " + n(grad),
           "torch FSDP2 HSDP: the reduce-scatter output all-reduced over the replicate group"});
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
        b.add({zero, Collective::ReduceScatter, std::string(prefix) + ".grad_reduce_scatter", 1,
               grad, "local grads = " + n(grad),
               "Megatron-Core param_and_grad_buffer start_grad_sync (reduce_scatter_tensor); "
               "DeepSpeed stage_1_and_2 partitioned gradients"});
        b.add({zero, Collective::AllGather, std::string(prefix) + ".param_all_gather", 1, param,
               "local params = " + n(param),
               "Megatron-Core start_param_sync (all_gather of the updated shards)"});
        return;
      }
    }
    b.add({dp, Collective::AllReduce, std::string(prefix) + ".grad_all_reduce", 1, grad,
           "local grads = " + n(grad),
           "DDP / Megatron gradient all-reduce, once per step (no_sync until the last "
           "micro-batch)"});
  };
  replicated(CommRole::Zero, CommRole::DataParallel, "dp", bytes.replicated_grad_bytes,
             bytes.replicated_param_bytes);
  replicated(CommRole::ExpertZero, CommRole::ExpertDataParallel, "expert_dp",
             bytes.expert_replicated_grad_bytes, bytes.expert_replicated_param_bytes);
  b.add({CommRole::TiedSync, Collective::AllReduce, "tied.grad_all_reduce", 1,
         bytes.tied_grad_bytes, "tied grads = " + n(bytes.tied_grad_bytes),
         "Megatron embedding group: tied ends on different stages all-reduce their grads"});

  const StageLayers& L = bytes.layers;
  const std::int64_t dense_layers = L.count[0][0] + L.count[0][1] + L.count[0][2];
  const std::int64_t moe_layers = L.count[1][0] + L.count[1][1] + L.count[1][2];
  const std::int64_t full_layers = L.count[0][2] + L.count[1][2];
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
    const std::int64_t fwd = mul(m, fwd_blocks + mul(full_layers, 2));
    const std::int64_t bwd = mul(m, bwd_inputs);
    const char* src =
        "Korthikanti et al. 2022 Sec. 4.2.2: g / g-bar operators, 2 forward + 2 backward per "
        "layer; full recompute repeats the forward's";
    if (deg.sequence_parallel) {
      b.add({CommRole::Tp, Collective::AllGather, "tp.layer_all_gather", fwd + bwd, hidden_bytes,
             eth, src});
      b.add({CommRole::Tp, Collective::ReduceScatter, "tp.layer_reduce_scatter", fwd + bwd,
             hidden_bytes, eth, src});
    } else {
      b.add({CommRole::Tp, Collective::AllReduce, "tp.layer_forward_all_reduce", fwd, hidden_bytes,
             eth, src});
      b.add({CommRole::Tp, Collective::AllReduce, "tp.layer_backward_all_reduce", bwd, hidden_bytes,
             eth,
             layout.tp_per_linear ? "torch ColwiseParallel: each linear's input gradient "
                                    "(from_local Replicate) all-reduced on its own"
                                  : src});
    }
    if (layout.vocab_parallel && L.embedding) {
      b.add({CommRole::Tp,
             deg.sequence_parallel ? Collective::ReduceScatter : Collective::AllReduce,
             "tp.embedding_output", m, hidden_bytes, eth,
             "vocab-parallel embedding (RowwiseParallel on dim 0): Partial output reduced"});
    }
    if (layout.vocab_parallel && L.logits) {
      b.add({CommRole::Tp,
             deg.sequence_parallel ? Collective::ReduceScatter : Collective::AllReduce,
             "tp.lm_head_input_grad", m, hidden_bytes, eth,
             "ColwiseParallel lm_head: its input's gradient reduced in backward"});
      if (deg.sequence_parallel) {
        b.add({CommRole::Tp, Collective::AllGather, "tp.lm_head_input", m, hidden_bytes, eth,
               "sequence parallel: lm_head's input gathered in forward"});
      }
      if (layout.loss_parallel) {
        b.add({CommRole::Tp, Collective::AllReduce, "tp.loss_parallel_statistics", mul(m, 3),
               mul(4, tokens), "4 T = 4 x " + n(tokens),
               "torch loss_parallel / Megatron _VocabParallelCrossEntropy: max, sum of exp, "
               "target logit per token (fp32)"});
      } else {
        const std::int64_t logits = mul({e, tokens, arch.vocab});
        b.add({CommRole::Tp, Collective::AllGather, "tp.logits_all_gather", m, logits,
               "e T V = " + n(e) + " x " + n(tokens) + " x " + n(arch.vocab),
               "ColwiseParallel lm_head with Replicate output (transformers colwise_rep)"});
      }
    }
  }

  // CP: torch context_parallel, rotate method allgather (K and V of every cp rank).
  if (groups.of(CommRole::Cp).size > 1 && layers > 0) {
    const std::int64_t kv_width =
        arch.mla() ? mul(arch.heads, arch.qk_nope_head_dim + arch.qk_rope_head_dim) +
                         mul(arch.heads, arch.v_head_dim)
                   : mul({2, arch.kv_heads, arch.head_dim});
    const std::int64_t kv = ceil_div(mul({e, tokens, cp, kv_width}), tp);
    const std::string kv_text = "e (cp T) kv_width / t = " + n(e) + " x " + n(tokens * cp) + " x " +
                                n(kv_width) + " / " + n(tp);
    const char* src =
        "torch.distributed.tensor.experimental context_parallel, rotate_method allgather: "
        "K and V gathered per layer in forward and backward, their grads returned";
    b.add({CommRole::Cp, Collective::AllGather, "cp.kv_all_gather",
           mul(m, mul(layers, 2) + full_layers), kv, kv_text, src});
    b.add({CommRole::Cp, Collective::ReduceScatter, "cp.kv_grad_reduce_scatter", mul(m, layers), kv,
           kv_text, src});
  }

  // EP: dispatch and combine, forward and backward.
  if (groups.of(CommRole::Ep).size > 1 && moe_layers > 0) {
    const std::int64_t ep_tokens = deg.sequence_parallel ? ceil_div(tokens, tp) : tokens;
    std::int64_t routed = mul(ep_tokens, arch.top_k);
    std::string routed_text = "T k = " + n(ep_tokens) + " x " + n(arch.top_k);
    if (shape.moe.capacity_factor) {
      routed = static_cast<std::int64_t>(static_cast<double>(routed) * *shape.moe.capacity_factor);
      routed_text = "c T k";
    }
    const std::int64_t buffer = mul({routed, arch.hidden, e});
    const std::int64_t calls = mul(m, mul(moe_layers, 4) + mul(L.count[1][2], 2));
    b.add({CommRole::Ep, Collective::AllToAll, "ep.dispatch_combine", calls, buffer,
           routed_text + " x h x e = " + n(routed) + " x " + n(arch.hidden) + " x " + n(e),
           "Megatron MoEAlltoAllTokenDispatcher / torchtitan ExpertParallel token dispatch and "
           "combine: 2 forward, 2 backward per MoE layer"});
  }

  // PP: activations forward, their gradients backward, per micro-batch and chunk.
  if (layout.pp > 1) {
    const std::int64_t v = std::max<std::int64_t>(1, layout.virtual_stages);
    const bool last = bytes.stage == layout.pp - 1;
    const bool first = bytes.stage == 0;
    const std::int64_t boundary = deg.sequence_parallel ? ceil_div(hidden_bytes, tp) : hidden_bytes;
    const std::string text = deg.sequence_parallel ? eth + " / t" : eth;
    const char* src =
        "Megatron p2p_communication send_forward / send_backward, torch pipelining "
        "_PipelineStage: one activation per micro-batch and model chunk";
    b.add({CommRole::Pp, Collective::SendRecv, "pp.send_activation", mul(m, v - (last ? 1 : 0)),
           boundary, text, src});
    b.add({CommRole::Pp, Collective::SendRecv, "pp.send_grad", mul(m, v - (first ? 1 : 0)),
           boundary, text, src});
  }
  return out;
}

}  // namespace shardc
