// Every bound shardc puts on untrusted input, in one place (docs/limits.md
// lists them; tests/unit/support/limits_test.cpp checks that table
// against these values). Each limit is enforced by exactly one layer: the
// front end for the shape of the input (sizes, nesting, integers), the
// planner for meaning (world size, mesh products).
#pragma once

#include <cstddef>
#include <cstdint>

namespace shardc::limits {

/// Largest model or recipe file read, in bytes (checked before reading).
inline constexpr std::int64_t kMaxInputBytes = std::int64_t{256} << 20;

/// Document nodes after YAML alias expansion (and of a JSON document).
inline constexpr std::size_t kMaxDocNodes = 8'000'000;
/// YAML node budget per input byte, plus a fixed allowance: an alias bomb
/// stops after a few MB of work (min(kMaxDocNodes, 4 x bytes + 100,000)).
inline constexpr std::size_t kYamlNodesPerByte = 4;
inline constexpr std::size_t kYamlNodesExtra = 100'000;
/// Nesting of lists and maps, levels.
inline constexpr int kMaxDocDepth = 512;

/// Params after `repeat` expansion (counted, saturating, before expanding).
inline constexpr std::size_t kMaxExpandedParams = 10'000'000;
/// Nesting of `repeat` groups, levels.
inline constexpr int kMaxRepeatDepth = 64;
/// Exclusive bound on a shape's numel (zeros count as 1 in the check), so
/// every later product of local extents fits int64.
inline constexpr std::int64_t kMaxNumel = std::int64_t{1} << 62;

/// Largest world size (product of a mesh's axis sizes), ranks. A planner
/// check (E-MESH), computed with overflow-safe multiplication.
inline constexpr std::int64_t kMaxWorld = 2'147'483'647;  // 2^31 - 1
/// `pipeline.virtual_stages` lies in [1, kMaxVirtualStages] (stages x
/// virtual stages model chunks; Megatron runs a handful per stage).
inline constexpr std::int64_t kMaxVirtualStages = 1024;
/// `training.seq_len` lies in [1, kMaxSeqLen] tokens (16 Mi: past the longest published
/// context, Llama 4 Scout's 10M; 2^40 is refused, E-TRAINING).
inline constexpr std::int64_t kMaxSeqLen = std::int64_t{1} << 24;
/// `training.micro_batch_size`, `global_batch_size`, `gradient_accumulation_steps`,
/// `pipeline_schedule.microbatches` and `ranks_per_node` lie in [1, kMaxBatch].
inline constexpr std::int64_t kMaxBatch = std::int64_t{1} << 24;
/// `fsdp.dim` must lie in [-kMaxFsdpDim, kMaxFsdpDim].
inline constexpr int kMaxFsdpDim = 64;
/// A rule's `uneven: {pad: M}` multiple and `unit` lie in [1, kMaxPadOrUnit] rows.
inline constexpr std::int64_t kMaxPadOrUnit = std::int64_t{1} << 20;
/// A muon_allgather buffer's `alignment_bytes` lies in [1, kMaxAlignmentBytes] (NCCL wants
/// 16 to 512; the bound keeps round_up(numel < 2^62, alignment) below 2^63). The recipe
/// front end and the rank-file reader both enforce it.
inline constexpr std::int64_t kMaxAlignmentBytes = std::int64_t{1} << 40;
/// A rule's `packed` part count (or `parts` list length) lies in [1, kMaxParts].
inline constexpr std::int64_t kMaxParts = 4096;

/// Glob patterns (`match`, `experts`, `pipeline.stages`, `--match`): bytes,
/// `.`-separated segments and distinct `{name}` captures per pattern.
inline constexpr std::size_t kMaxPatternBytes = 4096;
inline constexpr std::size_t kMaxPatternSegments = 256;
inline constexpr std::size_t kMaxCaptureNames = 16;

/// Checkpoint import: the largest safetensors JSON header (the bound the
/// reference `safetensors` library uses), checked before it is read.
inline constexpr std::int64_t kMaxSafetensorsHeaderBytes = 100'000'000;
/// Dims of one safetensors tensor.
inline constexpr std::size_t kMaxTensorRank = 64;
/// Errors listed per safetensors file (the rest are counted).
inline constexpr int kMaxHeaderErrorsPerFile = 20;
/// config.json and model.safetensors.index.json, bytes each.
inline constexpr std::int64_t kMaxCheckpointJsonBytes = std::int64_t{256} << 20;
/// config.json counts (heads, KV heads, vocab, widths, experts) are at most this.
inline constexpr std::int64_t kMaxConfigCount = 2'147'483'647;  // 2^31 - 1

/// Outputs read back (`verify`, `reshard`): plan.json and rank files up to
/// 4 GiB, manifest.json up to 1 GiB.
inline constexpr std::int64_t kMaxPlanBytes = std::int64_t{1} << 32;
inline constexpr std::int64_t kMaxManifestBytes = std::int64_t{1} << 30;

/// Byte sizes (`--budget`, `training.budget`) are below this many bytes.
inline constexpr std::int64_t kMaxByteSize = std::int64_t{1} << 62;

/// Largest world with a per-rank memory table (compile's plan.json and rank files, verify
/// --against): a row per rank (~100 bytes each, ~110 MB at 2^20). Larger worlds (up to
/// kMaxWorld) plan and validate; `memory`, budgets and `inspect` compute them per class of ranks
/// (memory_classes_by_runs, dense meshes); the rest fail with E-MEMORY-WORLD instead of
/// allocating O(world) per kind. Also the bound on the number of memory classes.
inline constexpr std::int64_t kMaxMemoryReportWorld = std::int64_t{1} << 20;

/// Items a rank-set text (`--ranks`) may expand to.
inline constexpr std::int64_t kMaxRankSetItems = std::int64_t{1} << 24;

/// Diagnostics stored per run (counts stay exact beyond it).
inline constexpr std::size_t kMaxStoredDiagnostics = 200;

}  // namespace shardc::limits
