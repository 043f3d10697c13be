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
#include <vector>

namespace shardc {

/// Layer blocks [first, end) of one model chunk.
struct ChunkBlocks {
  std::int64_t first = 0;
  std::int64_t end = 0;
  [[nodiscard]] std::int64_t size() const { return end - first; }
};

/// `blocks` layer blocks cut into `chunks` model chunks as evenly as possible,
/// the extra blocks to the earlier chunks: chunk c gets blocks / chunks + (c <
/// blocks % chunks) blocks (Megatron-Core's even split when chunks divide
/// blocks). Empty when chunks < 1; chunks > blocks gives empty chunks at the end
/// (the planner refuses that layout first: E-PIPELINE).
std::vector<ChunkBlocks> auto_chunk_blocks(std::int64_t blocks, std::int64_t chunks);

/// The model chunk holding `block` under the same rule (0 <= block < blocks).
std::int64_t auto_chunk_of_block(std::int64_t block, std::int64_t blocks, std::int64_t chunks);

}  // namespace shardc
