// How `pipeline: {stages: auto}` cuts the model's layer blocks into model
// chunks (contract §5.6): the one rule the planner's stage pass
// (src/planner/stages.cpp) and the layout search (src/search/) share, so that a
// recompute range the search writes for a chunk names the blocks the planner
// puts in it.
//
// Units: layer blocks (decoder layers `...layers.N`, in model order) and model
// chunks (stages x virtual stages of them, in model order; chunk c runs on
// stage c % stages as its virtual stage c / stages, Megatron's interleaved
// order).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace shardc {

/// Layer blocks [first, end) of one model chunk.
struct ChunkBlocks {
  std::int64_t first = 0;
  std::int64_t end = 0;
  [[nodiscard]] std::int64_t size() const { return end - first; }
  bool operator==(const ChunkBlocks&) const = default;
};

/// `blocks` layer blocks cut into `chunks` model chunks as evenly as possible,
/// the extra blocks to the earlier chunks: chunk c gets blocks / chunks + (c <
/// blocks % chunks) blocks (Megatron-Core's even split when chunks divide
/// blocks). Empty when chunks < 1; chunks > blocks gives empty chunks at the end
/// (the planner refuses that layout first: E-PIPELINE).
///
/// With `first_less` / `last_less` > 0 (the recipe's `first_stage_less_layers` /
/// `last_stage_less_layers`), torchtitan's `generate_llm_fqn_per_model_part`
/// (torchtitan/distributed/pipeline_parallel.py, its
/// pipeline_parallel_first/last_stage_less_layers): the input modules count as
/// `first_less` blocks of chunk 0 and the output modules as `last_less` blocks of
/// the last chunk; the blocks + first_less + last_less effective blocks are cut
/// as above, and chunks 0 and chunks - 1 hold that many fewer layer blocks. One
/// chunk holds every block. Empty (refused, see `weighted_cut_error`) when a
/// chunk would hold no effective block or fewer than its weight.
std::vector<ChunkBlocks> auto_chunk_blocks(std::int64_t blocks, std::int64_t chunks,
                                           std::int64_t first_less = 0, std::int64_t last_less = 0);

/// Why torchtitan refuses the weighted cut of `blocks` into `chunks` ("" when it
/// does not): more chunks than effective blocks, or a weight above the
/// effective blocks per chunk (its ValueErrors).
std::string weighted_cut_error(std::int64_t blocks, std::int64_t chunks, std::int64_t first_less,
                               std::int64_t last_less);

/// The model chunk of each layer block under `cut` (auto_chunk_blocks' result over
/// `blocks` blocks): element b is the chunk holding block b; blocks no chunk holds (an
/// empty cut) go to the last chunk.
std::vector<std::int64_t> chunk_of_each_block(const std::vector<ChunkBlocks>& cut,
                                              std::int64_t blocks);

/// Where model chunk `chunk` (model order, of stages x virtual stages) runs: its
/// stage (pipeline rank) and its virtual stage there (the chunk's position among the
/// rank's chunks, in model order).
struct ChunkPlace {
  int stage = 0;
  int virtual_stage = 0;
  bool operator==(const ChunkPlace&) const = default;
};

/// Looped (`v_shape` false; Megatron-Core get_transformer_layer_offset, torch
/// generate_stage_to_rank_mapping(style="loop")): chunk c on stage c % stages as
/// virtual stage c / stages. V (`v_shape` true, the zbv and dualpipev schedules; torch
/// generate_stage_to_rank_mapping(style="v")): the chunks go down the ranks and back
/// up, chunk c on stage c when c / stages is even and on stage stages - 1 - c % stages
/// when it is odd, its virtual stage c / stages (with two chunks per rank, rank r runs
/// chunks r and 2 stages - 1 - r: rank 0 holds the first and the last chunk).
ChunkPlace chunk_place(std::int64_t chunk, std::int64_t stages, bool v_shape);

/// The model chunk at `place` (chunk_place's inverse).
std::int64_t chunk_at(const ChunkPlace& place, std::int64_t stages, bool v_shape);

}  // namespace shardc
