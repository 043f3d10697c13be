// `stages: auto`'s cut of layer blocks into model chunks (src/core/pipeline_chunks.hpp).
#include "core/pipeline_chunks.hpp"

#include <algorithm>

namespace shardc {

std::vector<ChunkBlocks> auto_chunk_blocks(std::int64_t blocks, std::int64_t chunks,
                                           std::int64_t first_less, std::int64_t last_less) {
  std::vector<ChunkBlocks> out;
  if (chunks < 1) return out;
  if (chunks == 1) {  // torchtitan: a single stage gets everything, weights aside
    out.push_back({0, blocks});
    return out;
  }
  if (!weighted_cut_error(blocks, chunks, first_less, last_less).empty()) return out;
  const std::int64_t effective = blocks + first_less + last_less;
  const std::int64_t per_chunk = effective / chunks;
  const std::int64_t larger = effective % chunks;  // the first `larger` chunks hold one more
  out.reserve(static_cast<std::size_t>(chunks));
  std::int64_t first = 0;
  for (std::int64_t chunk = 0; chunk < chunks; ++chunk) {
    std::int64_t size = per_chunk + (chunk < larger ? 1 : 0);
    if (chunk == 0) size -= first_less;
    if (chunk == chunks - 1) size -= last_less;
    size = std::min(std::max<std::int64_t>(size, 0), blocks - first);
    out.push_back({first, first + size});
    first += size;
  }
  return out;
}

std::string weighted_cut_error(std::int64_t blocks, std::int64_t chunks, std::int64_t first_less,
                               std::int64_t last_less) {
  if (chunks <= 1 || (first_less == 0 && last_less == 0)) return "";
  const std::int64_t effective = blocks + first_less + last_less;
  if (chunks > effective)
    return std::to_string(chunks) + " model chunks exceed the " + std::to_string(effective) +
           " effective layers (" + std::to_string(blocks) + " layer blocks + " +
           std::to_string(first_less) + " + " + std::to_string(last_less) + ")";
  const std::int64_t per_chunk = effective / chunks;
  if (first_less > per_chunk || last_less > per_chunk)
    return "a stage-less-layers weight (" + std::to_string(std::max(first_less, last_less)) +
           ") exceeds the " + std::to_string(per_chunk) + " effective layers per model chunk";
  return "";
}

std::vector<std::int64_t> chunk_of_each_block(const std::vector<ChunkBlocks>& cut,
                                              std::int64_t blocks) {
  std::vector<std::int64_t> chunk_of(
      static_cast<std::size_t>(std::max<std::int64_t>(blocks, 0)),
      std::max<std::int64_t>(0, static_cast<std::int64_t>(cut.size()) - 1));
  for (std::size_t chunk = 0; chunk < cut.size(); ++chunk)
    for (std::int64_t block = cut[chunk].first; block < cut[chunk].end && block < blocks; ++block)
      chunk_of[static_cast<std::size_t>(block)] = static_cast<std::int64_t>(chunk);
  return chunk_of;
}

ChunkPlace chunk_place(std::int64_t chunk, std::int64_t stages, bool v_shape) {
  const std::int64_t pp = std::max<std::int64_t>(1, stages);
  const std::int64_t round = chunk / pp;
  const std::int64_t offset = chunk % pp;
  const std::int64_t stage = v_shape && round % 2 == 1 ? pp - 1 - offset : offset;
  return {static_cast<int>(stage), static_cast<int>(round)};
}

std::int64_t chunk_at(const ChunkPlace& place, std::int64_t stages, bool v_shape) {
  const std::int64_t pp = std::max<std::int64_t>(1, stages);
  const std::int64_t offset =
      v_shape && place.virtual_stage % 2 == 1 ? pp - 1 - place.stage : place.stage;
  return static_cast<std::int64_t>(place.virtual_stage) * pp + offset;
}

}  // namespace shardc
