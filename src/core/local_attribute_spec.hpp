// Which params carry the local attributes a runtime sets on a sharded module
// (contract §6.7): found once per plan by the planner pass
// find_local_attributes (src/planner/local_attributes.cpp), kept in
// Plan::local_attributes; the per-rank values are shardc/local_attributes.hpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace shardc {

/// Where one head count comes from: a head-major projection weight (rows of
/// its output dim), or one part of a fused q|k|v weight.
struct HeadSource {
  std::size_t param = 0;  ///< index into the plan's params
  int dim = 0;            ///< the head-major dim (0 for nn.Linear; a fused layout's dim)
  /// The part of a fused weight (0 = q, 1 = k), or -1 when the param is one
  /// projection (q_proj, k_proj, q_b_proj, kv_b_proj, wq, wk).
  int part = -1;
  std::int64_t heads = 0;  ///< the model's head count this source carries (>= 1)
};

/// One attention module: the parent module of its q and KV projections
/// (`model.layers.0.self_attn`). Recognized by the projection names of
/// E-HEADS (src/planner/checks.cpp: Hugging Face q_proj / k_proj, DeepSeek MLA
/// q_b_proj (or q_proj) / kv_b_proj, Meta wq / wk, torchtitan MLA wq or wq_b /
/// wkv_b) and the fused q|k|v
/// weights of shardc/fused.hpp, with the model's `num_attention_heads`
/// (`num_key_value_heads`, default: the same).
struct AttentionAttributes {
  std::string module;
  HeadSource query;
  HeadSource key_value;
  std::int64_t num_heads = 0;     ///< the model's num_attention_heads
  std::int64_t num_kv_heads = 0;  ///< the model's num_key_value_heads (or num_heads)
};

/// One layer of experts: the parent module of stacked expert params (the
/// `experts` entries' stacks, `model.layers.3.mlp.experts.gate_proj` gives
/// `model.layers.3.mlp.experts`), or of a model param already stacked
/// (a 3-D `...experts.gate_up_proj` whose dim 0 is the model's
/// `num_experts`). Dim 0 of every param is the expert index.
struct ExpertAttributes {
  std::string module;
  std::vector<std::size_t> params;  ///< indices into the plan's params, model order
  std::int64_t num_experts = 0;     ///< dim 0 of the params
};

/// One vocab tensor (an embedding or output head, `lints.cpp`'s rule: a 2-D
/// param whose dim 0 is the model's `vocab_size`, or by name without it).
struct VocabAttributes {
  std::size_t param = 0;
  std::int64_t vocab_size = 0;  ///< dim 0 of the param (the real token ids)
};

/// What a plan carries (Plan::local_attributes), in model order.
struct LocalAttributeSpec {
  std::vector<AttentionAttributes> attention;
  std::vector<ExpertAttributes> experts;
  std::vector<VocabAttributes> vocab;
};

}  // namespace shardc
