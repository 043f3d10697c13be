// Fused parameters shardc knows (contract §5.12): which tensors of the
// architectures it has read are several logical tensors in one (q|k|v,
// gate|up), on which dim, in which order and with which part extents. The
// facts come from each architecture's modeling code (cited per entry in
// src/core/fused.cpp); `explain --format json` prints the layout of a param
// so the table can be tested against the modules themselves.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/model.hpp"
#include "support/shape.hpp"

namespace shardc {

/// "blocked" (groups == 1), "interleaved" (G groups of equal blocks) or
/// "per-group" (G groups of unequal blocks).
const char* fused_order_name(const FusedLayout& layout);

/// The dim's extent of one group (sum of parts / groups), elements.
std::int64_t fused_group_extent(const FusedLayout& layout);

/// The layout of `fqn` (global `shape`) known from its module name, and
/// from `architecture` (config.json `architectures[0]` or `model_type`; ""
/// when unknown) where the name alone does not decide it (GPT-NeoX's
/// `query_key_value` is per head, ChatGLM's blocked; gpt-oss's `gate_up_proj`
/// interleaved, Llama-4's blocked). Part extents of q|k|v follow
/// `num_attention_heads`, `num_key_value_heads` and `head_dim` (or
/// hidden_size / heads) when they add up to the dim, else equal thirds.
/// nullopt for a param that is not a known fused tensor, or whose extents do
/// not fit the layout.
std::optional<FusedLayout> known_fused(std::string_view fqn, const Shape& shape,
                                       const ModelAttributes& attrs, std::string_view architecture);

/// Whether `fqn` (global `shape`) is indexed by attention head (contract
/// §5.13), from its name and the (sub-)model's head counts `attrs`:
/// `…sinks` of one dim equal to num_attention_heads (gpt-oss attention sinks,
/// transformers models/gpt_oss/modeling_gpt_oss.py GptOssAttention: one logit
/// per q head, `module.sinks.reshape(1, -1, 1, 1)`; transformers' Granite-SWA
/// base_model_tp_plan shards `self_attn.sinks` colwise with q_proj), and 2-D `…q_norm.weight` /
/// `…k_norm.weight` of [num_attention_heads | num_key_value_heads, head_dim]
/// (Cohere, models/cohere/modeling_cohere.py: CohereLayerNorm((num_heads,
/// head_dim)) normalizes each head with its own weight row). A 1-D q_norm of
/// [head_dim] (Qwen3, OLMo-style shared per-head norms) is the same for every
/// head: not head-indexed. `architecture` as for known_fused ("" when
/// unknown). nullopt when not known.
std::optional<HeadIndexed> known_head_indexed(std::string_view fqn, const Shape& shape,
                                              const ModelAttributes& attrs,
                                              std::string_view architecture);

/// The `packed:` line that splits `layout` part by part, as a rule writes it:
/// `packed: {parts: 3, dim: 1}`, `packed: {parts: [4096, 1024, 1024]}`,
/// `packed: {parts: 2, dim: -1, interleave: 1}`, `packed: {parts: [..], groups: 8}`.
std::string fused_packed_line(const FusedLayout& layout, std::size_t ndim);

/// True when every part of `layout` has the same extent.
bool fused_parts_equal(const FusedLayout& layout);
/// `layout.parts` as the model formats spell them: the count when the parts are
/// equal ("3"), else the list ("[4096, 1024, 1024]"); `list` always the list.
std::string fused_parts_text(const FusedLayout& layout, bool list = false);

/// What the rows [start, end) of the fused dim hold, part by part:
/// "q 576..767 and k 0..383" (inclusive element ranges of each part), or
/// "gate and up rows of groups 0..3" for grouped layouts. Bounded length.
std::string fused_range_text(const FusedLayout& layout, std::int64_t start, std::int64_t end);

}  // namespace shardc
