// The fused-parameter table (src/core/fused.hpp, contract §5.12). Every
// entry cites the modeling code whose forward pass decides the layout
// (transformers 5.x unless noted).
#include "core/fused.hpp"

#include <algorithm>
#include <array>
#include <numeric>

namespace shardc {
namespace {

// Module name and leaf of an FQN: `a.b.c_attn.weight` -> ("c_attn", "weight");
// `a.experts.gate_up_proj` (an nn.Parameter of the module) -> ("gate_up_proj", "").
struct NameParts {
  std::string_view module;
  std::string_view leaf;
};

NameParts split_name(std::string_view fqn) {
  const auto dot = fqn.rfind('.');
  const std::string_view last = dot == std::string_view::npos ? fqn : fqn.substr(dot + 1);
  if (last == "weight" || last == "bias") {
    const std::string_view mod =
        dot == std::string_view::npos ? std::string_view{} : fqn.substr(0, dot);
    const auto dot2 = mod.rfind('.');
    return {dot2 == std::string_view::npos ? mod : mod.substr(dot2 + 1), last};
  }
  return {last, ""};
}

bool is_arch(std::string_view architecture, std::initializer_list<std::string_view> names) {
  for (std::string_view name : names)
    if (architecture == name) return true;
  return false;
}

// Head counts of q|k|v: (heads, kv heads, head_dim) when the attributes give
// them and 3-part extents add up to `extent`.
struct Heads {
  std::int64_t heads = 0;
  std::int64_t kv_heads = 0;
  std::int64_t head_dim = 0;
};

std::optional<Heads> heads_of(const ModelAttributes& attrs, std::int64_t extent) {
  if (!attrs.num_attention_heads || *attrs.num_attention_heads < 1) return std::nullopt;
  const std::int64_t heads = *attrs.num_attention_heads;
  const std::int64_t kv = attrs.num_key_value_heads.value_or(heads);
  // A derived head_dim only where the heads divide hidden_size (no fused layout otherwise).
  const bool divides = attrs.hidden_size && *attrs.hidden_size % heads == 0;
  const std::int64_t hd = attrs.head_dim || divides ? attrs.head_dim_or_derived().value_or(0) : 0;
  if (hd < 1 || kv < 1 || kv > heads || heads > extent || hd > extent) return std::nullopt;
  if ((heads + 2 * kv) * hd != extent) return std::nullopt;
  return Heads{heads, kv, hd};
}

FusedLayout make(int dim, std::vector<std::int64_t> parts, std::vector<std::string> names,
                 std::int64_t groups, std::string source) {
  FusedLayout layout;
  layout.dim = dim;
  layout.parts = std::move(parts);
  layout.part_names = std::move(names);
  layout.groups = groups;
  layout.source = std::move(source);
  return layout;
}

// Blocked q|k|v on `dim`: GQA extents from the attributes, else equal thirds.
std::optional<FusedLayout> blocked_qkv(const Shape& shape, int dim, const ModelAttributes& attrs,
                                       std::string source) {
  const std::int64_t extent = shape[static_cast<std::size_t>(dim)];
  if (const auto heads = heads_of(attrs, extent))
    return make(dim,
                {heads->heads * heads->head_dim, heads->kv_heads * heads->head_dim,
                 heads->kv_heads * heads->head_dim},
                {"q", "k", "v"}, 1, std::move(source));
  if (extent < 3 || extent % 3 != 0) return std::nullopt;
  return make(dim, {extent / 3, extent / 3, extent / 3}, {"q", "k", "v"}, 1, std::move(source));
}

// Per-group q|k|v (for each KV group: its q heads, its k head, its v head).
std::optional<FusedLayout> grouped_qkv(const Shape& shape, int dim, const ModelAttributes& attrs,
                                       std::string source) {
  const std::int64_t extent = shape[static_cast<std::size_t>(dim)];
  const auto heads = heads_of(attrs, extent);
  if (!heads || heads->heads % heads->kv_heads != 0) return std::nullopt;
  return make(dim,
              {heads->heads * heads->head_dim, heads->kv_heads * heads->head_dim,
               heads->kv_heads * heads->head_dim},
              {"q", "k", "v"}, heads->kv_heads, std::move(source));
}

// Per-head q|k|v (for each head: its q, k and v rows), equal parts.
std::optional<FusedLayout> per_head_qkv(const Shape& shape, int dim, const ModelAttributes& attrs,
                                        std::string source) {
  const std::int64_t extent = shape[static_cast<std::size_t>(dim)];
  if (!attrs.num_attention_heads || extent % 3 != 0) return std::nullopt;
  const std::int64_t heads = *attrs.num_attention_heads;
  if (heads < 1 || (extent / 3) % heads != 0) return std::nullopt;
  return make(dim, {extent / 3, extent / 3, extent / 3}, {"q", "k", "v"}, heads, std::move(source));
}

std::optional<FusedLayout> gate_up(const Shape& shape, int dim, std::int64_t groups,
                                   std::vector<std::string> names, std::string source) {
  const std::int64_t extent = shape[static_cast<std::size_t>(dim)];
  if (extent < 2 || extent % 2 != 0) return std::nullopt;
  if (groups > 1 && (extent / 2) % groups != 0) return std::nullopt;
  return make(dim, {extent / 2, extent / 2}, std::move(names), groups, std::move(source));
}

std::optional<FusedLayout> lookup(std::string_view fqn, const Shape& shape,
                                  const ModelAttributes& attrs, std::string_view arch) {
  const NameParts name_parts = split_name(fqn);
  const std::size_t ndim = shape.size();
  const bool bias = name_parts.leaf == "bias";
  if (ndim == 0) return std::nullopt;
  // q|k|v. Linear weights [out, in] fuse dim 0 (biases: their only dim);
  // GPT-2's Conv1D weight is [in, out] and fuses dim 1.
  if (name_parts.module == "c_attn" && (ndim == 2 || bias)) {
    return blocked_qkv(
        shape, bias ? 0 : 1, attrs,
        "GPT-2 (GPT2Attention: c_attn(x).split(split_size, dim=2), Conv1D [in, out])");
  }
  if (ndim > 2 || (ndim == 2 && bias)) return std::nullopt;
  if (name_parts.module == "qkv_proj")
    return blocked_qkv(shape, 0, attrs,
                       "Phi-3 (Phi3Attention: qkv[..., :query_pos], then k, then v)");
  if (name_parts.module == "W_pack")
    return blocked_qkv(shape, 0, attrs, "Baichuan (W_pack(x).unflatten(-1, (3, hidden_size)))");
  if (name_parts.module == "Wqkv")
    return blocked_qkv(shape, 0, attrs, "MPT (Wqkv(x).split([d_model, kv, kv], dim=2))");
  if (name_parts.module == "qkv")
    return blocked_qkv(
        shape, 0, attrs,
        "vision towers (Qwen2-VL VisionAttention: qkv(x).reshape(seq, 3, heads, -1))");
  if (name_parts.module == "linear_qkv")
    return grouped_qkv(shape, 0, attrs,
                       "Megatron-LM (SelfAttention.get_query_key_value_tensors: per query group, "
                       "its q heads, then k, then v)");
  if (name_parts.module == "wqkv")
    return grouped_qkv(
        shape, 0, attrs,
        "InternLM2 (wqkv(x).view(b, q_len, -1, 2 + num_key_value_groups, head_dim))");
  if (name_parts.module == "query_key_value") {
    if (is_arch(arch, {"GPTNeoXForCausalLM", "gpt_neox", "GPTNeoXModel", "BloomForCausalLM",
                       "bloom", "BloomModel"}))
      return per_head_qkv(shape, 0, attrs,
                          "GPT-NeoX / BLOOM (query_key_value(x).view(..., heads, 3 * head_dim))");
    if (is_arch(arch, {"ChatGLMModel", "ChatGLMForConditionalGeneration", "chatglm"}))
      return blocked_qkv(shape, 0, attrs, "ChatGLM (mixed_x_layer.split([q, kv, kv], dim=-1))");
    return std::nullopt;  // Falcon and others: the layout depends on config flags
  }
  if (name_parts.module == "gate_up_proj" && ndim <= 2)
    return gate_up(shape, 0, 1, {"gate", "up"},
                   "Phi-3 (Phi3MLP: gate, up = gate_up_proj(x).chunk(2, dim=-1))");
  if (name_parts.module == "ff_proj")
    return gate_up(shape, 0, 1, {"up", "gate"}, "OLMo (x, x_gate = ff_proj(x).chunk(2, dim=-1))");
  return std::nullopt;
}

// Pre-stacked 3-D experts (`experts.gate_up_proj [E, ., .]` and gpt-oss's
// `gate_up_proj_bias [E, 2I]`).
std::optional<FusedLayout> lookup_experts(std::string_view fqn, const Shape& shape,
                                          const ModelAttributes& attrs, std::string_view arch) {
  const NameParts name_parts = split_name(fqn);
  const bool gpt_oss = is_arch(arch, {"GptOssForCausalLM", "gpt_oss", "GptOssModel"});
  if (name_parts.module == "gate_up_proj_bias" && shape.size() == 2 && gpt_oss)
    return gate_up(shape, 1, shape[1] / 2, {"gate", "up"},
                   "gpt-oss (GptOssExperts._apply_gate: gate_up[..., ::2], gate_up[..., 1::2])");
  if (name_parts.module != "gate_up_proj" || shape.size() != 3) return std::nullopt;
  if (gpt_oss)
    return gate_up(shape, 2, shape[2] / 2, {"gate", "up"},
                   "gpt-oss (GptOssExperts [E, hidden, 2 x inter]: gate_up[..., ::2], "
                   "gate_up[..., 1::2])");
  if (!attrs.hidden_size) return std::nullopt;
  if (shape[1] == *attrs.hidden_size && shape[2] != *attrs.hidden_size)
    return gate_up(shape, 2, 1, {"gate", "up"},
                   "Llama-4 (Llama4TextExperts [E, hidden, 2 x inter]: "
                   "gate, up = bmm(x, gate_up_proj).chunk(2, dim=-1))");
  if (shape[2] == *attrs.hidden_size && shape[1] != *attrs.hidden_size)
    return gate_up(shape, 1, 1, {"gate", "up"},
                   "fused MoE experts (Mixtral / Qwen3-MoE / DeepSeek-V3 [E, 2 x inter, hidden]: "
                   "linear(x, gate_up_proj[e]).chunk(2, dim=-1))");
  return std::nullopt;
}

}  // namespace

const char* fused_order_name(const FusedLayout& layout) {
  if (layout.groups <= 1) return "blocked";
  for (std::int64_t part : layout.parts)
    if (part != layout.parts.front()) return "per-group";
  return "interleaved";
}

std::int64_t fused_group_extent(const FusedLayout& layout) {
  const std::int64_t total =
      std::accumulate(layout.parts.begin(), layout.parts.end(), std::int64_t{0});
  return layout.groups > 0 ? total / layout.groups : total;
}

std::optional<FusedLayout> known_fused(std::string_view fqn, const Shape& shape,
                                       const ModelAttributes& attrs,
                                       std::string_view architecture) {
  for (std::int64_t extent : shape)
    if (extent < 1) return std::nullopt;
  if (auto layout = lookup_experts(fqn, shape, attrs, architecture)) return layout;
  return lookup(fqn, shape, attrs, architecture);
}

std::optional<HeadIndexed> known_head_indexed(std::string_view fqn, const Shape& shape,
                                              const ModelAttributes& attrs,
                                              std::string_view architecture) {
  (void)architecture;  // the names and shapes below decide it for every architecture read
  if (!attrs.num_attention_heads || shape.empty()) return std::nullopt;
  const std::int64_t heads = *attrs.num_attention_heads;
  const std::int64_t kv = attrs.num_key_value_heads.value_or(heads);
  const NameParts name_parts = split_name(fqn);
  if (name_parts.module == "sinks" && name_parts.leaf.empty() && shape.size() == 1 &&
      shape[0] == heads)
    return HeadIndexed{0, false,
                       "gpt-oss (GptOssAttention.sinks [num_attention_heads]: one logit per q "
                       "head, modeling_gpt_oss.py eager_attention_forward)"};
  if ((name_parts.module == "q_norm" || name_parts.module == "k_norm") &&
      name_parts.leaf == "weight" && shape.size() == 2) {
    const bool is_key = name_parts.module == "k_norm";
    if (shape[0] != (is_key ? kv : heads) || shape[0] < 2) return std::nullopt;
    return HeadIndexed{0, is_key,
                       std::string("Cohere (CohereAttention.") + std::string(name_parts.module) +
                           " = CohereLayerNorm((" + (is_key ? "num_key_value_heads" : "num_heads") +
                           ", head_dim)): one weight row per head)"};
  }
  return std::nullopt;
}

bool fused_parts_equal(const FusedLayout& layout) {
  return std::all_of(layout.parts.begin(), layout.parts.end(),
                     [&layout](std::int64_t part) { return part == layout.parts.front(); });
}

std::string fused_parts_text(const FusedLayout& layout, bool list) {
  if (!list && fused_parts_equal(layout)) return std::to_string(layout.parts.size());
  std::string text = "[";
  for (std::size_t i = 0; i < layout.parts.size(); ++i)
    text += (i ? ", " : "") + std::to_string(layout.parts[i]);
  return text + "]";
}

std::string fused_packed_line(const FusedLayout& layout, std::size_t ndim) {
  const bool equal = fused_parts_equal(layout);
  std::string text = "packed: {parts: " + fused_parts_text(layout);
  if (layout.dim != 0) {
    const bool last = static_cast<std::size_t>(layout.dim) + 1 == ndim;
    text += ", dim: " + (last && ndim > 2 ? std::string("-1") : std::to_string(layout.dim));
  }
  if (layout.groups > 1) {
    if (equal)
      text += ", interleave: " + std::to_string(layout.parts.front() / layout.groups);
    else
      text += ", groups: " + std::to_string(layout.groups);
  }
  return text + "}";
}

std::string fused_range_text(const FusedLayout& layout, std::int64_t start, std::int64_t end) {
  if (end <= start) return "nothing";
  if (layout.groups > 1) {
    const std::int64_t group_extent = fused_group_extent(layout);
    const std::int64_t first = start / group_extent;
    const std::int64_t last = (end - 1) / group_extent;
    std::string text = "elements " + std::to_string(start) + ".." + std::to_string(end - 1) +
                       " (groups " + std::to_string(first) + ".." + std::to_string(last);
    if (start % group_extent != 0 || end % group_extent != 0)
      text += ", cutting a group of " + std::to_string(group_extent);
    return text + ")";
  }
  std::string text;
  std::int64_t base = 0;
  int listed = 0;
  for (std::size_t i = 0; i < layout.parts.size(); ++i) {
    const std::int64_t lo = std::max(start, base);
    const std::int64_t hi = std::min(end, base + layout.parts[i]);
    if (lo < hi) {
      if (listed > 0) text += " and ";
      text += layout.part_names[i] + " " + std::to_string(lo - base) + ".." +
              std::to_string(hi - base - 1);
      ++listed;
    }
    base += layout.parts[i];
  }
  return listed == 1 ? "only " + text : text;
}

}  // namespace shardc
