// The compile the verify tests tamper with: a model and a recipe with a
// muon and an FSDP2 buffer (tests/unit/driver/verify_test.cpp,
// tests/unit/verify/tamper_test.cpp).
#pragma once

namespace shardc::test {

// Uneven FSDP-over-TP pieces of emb (10 rows over tp 2 x dp_shard 2), two
// replicated params in one muon batch (w, v), a tied alias and a 1-d param.
inline const char* const kBufferModel = R"(format: shardc.model/v1
name: buffers
dtype: bfloat16
params:
  - {name: emb.weight, shape: [10, 7]}
  - {name: w.weight, shape: [3, 8]}
  - {name: v.weight, shape: [6, 8]}
  - {name: n.weight, shape: [4], dtype: float32}
  - {name: head.weight, shape: [10, 7]}
tied: [[emb.weight, head.weight]]
)";

inline const char* const kBufferRecipe = R"(format: shardc.recipe/v1
mesh:
  - {name: dp_shard, size: 2}
  - {name: tp, size: 2}
rules:
  - match: ["emb.weight", "head.weight"]
    placements: {tp: Shard(0)}
  - match: "**"
    placements: {}
fsdp: {shard: dp_shard}
buffers:
  - {kind: muon_allgather, alignment_bytes: 64}
  - {kind: fsdp2_allgather, units: ["**"]}
)";

}  // namespace shardc::test
