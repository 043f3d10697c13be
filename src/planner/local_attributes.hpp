// The local attributes a runtime sets on a sharded module (contract §6.7,
// issue 28 item 5): what an attention module, a layer of experts and a
// vocab-parallel embedding or head hold on one rank after tensor / expert
// parallelism, so the module can be told (hyper-parallel updates each
// attention module's head counts after TP; transformers 5.24's
// distributed/expert_parallel.py MoEParamShard sets `experts.num_experts` to
// the local count; Megatron-Core's VocabParallelEmbedding keeps
// vocab_start_index / vocab_end_index).
//
// Two steps, so the cost stays per shard class:
//  * `find_local_attributes` (a planner pass, pure): which params carry
//    the attributes, once per plan, O(params);
//  * `local_attributes_at`: the values at one rank's mesh coordinates,
//    O(modules) (ranks of one shard class get the same values).
//
// Every value is what the forward sees after FSDP2's all-gather: the rule
// (TP / EP) splits of the param's dim, never the FSDP split (FSDP2 rebuilds
// the TP-local tensor before the module runs: torch/distributed/fsdp/
// _fully_shard/_fsdp_param.py, the unsharded param is the DTensor's local
// tensor). Ranges are half-open [start, end), in heads, expert ids or token
// ids of the global (checkpoint) tensor.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/local_attribute_spec.hpp"
#include "core/plan.hpp"

namespace shardc {

/// A half-open range [start, end).
struct IdRange {
  std::int64_t start = 0;
  std::int64_t end = 0;
  [[nodiscard]] std::int64_t size() const { return end - start; }
  bool operator==(const IdRange&) const = default;
};

/// One attention module on one rank. `query` / `key_value`: the global heads
/// whose rows its TP-local projections hold. `kv_used`: the KV heads its
/// query heads attend (GQA: query head h uses KV head h / (num_heads /
/// num_kv_heads), transformers' repeat_kv); equal to `key_value` when the KV
/// projections are split like the query's, wider when they are replicated
/// over ranks that split the query (kv < tp): the runtime then uses only
/// `kv_used` of what it holds. nullopt (rendered null) when a split cuts a
/// head or the query heads do not group evenly (diagnosed elsewhere:
/// E-HEADS, W-FUSED-SPLIT): no value is invented.
struct AttentionLocal {
  IdRange query;
  IdRange key_value;
  IdRange kv_used;
};

/// A vocab tensor on one rank: real token ids [ids.start, ids.end) at local
/// rows [0, ids.size()), then `padding_rows` rows of padding (`uneven:
/// {pad: M}`, Megatron's padded vocab: rows that hold no token id).
struct VocabLocal {
  IdRange ids;
  std::int64_t padding_rows = 0;
};

/// The values at one rank, parallel to the spec's lists; a module (or
/// tensor) whose params sit on another pipeline stage is not held
/// (`held` false), an expert layer whose params disagree on dim 0 is
/// nullopt.
struct LocalAttributes {
  std::vector<std::optional<AttentionLocal>> attention;
  std::vector<bool> attention_held;
  std::vector<std::optional<IdRange>> experts;
  std::vector<bool> experts_held;
  std::vector<VocabLocal> vocab;
  std::vector<bool> vocab_held;
};

/// The rows [start, start + real) of dim `dim` of `param` that the rank at
/// `coords` (on the param's mesh) holds after FSDP2's all-gather: the rule
/// splits of that dim applied to its global extent (the FSDP split left
/// out); `alloc` rows are allocated (the extra ones are `pad` padding).
/// For a packed param's packed dim, `part` (>= 0) selects one part: its
/// rows are then offsets into the global dim. Precondition (asserted): dim
/// in [0, ndim), part < number of parts when given.
DimPiece tp_local_rows(const PlannedParam& param, int dim, int part,
                       std::span<const std::int64_t> coords);

/// The attributes of `plan` at `rank`. Cost O(modules x chain length).
LocalAttributes local_attributes_at(const Plan& plan, std::int64_t rank);

/// The same at given mesh coordinates and pipeline stage (the renderer has
/// them already).
LocalAttributes local_attributes_at(const Plan& plan, std::span<const std::int64_t> dense_coords,
                                    std::span<const std::int64_t> expert_coords, int stage);

}  // namespace shardc
