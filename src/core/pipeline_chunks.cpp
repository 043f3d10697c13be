// `stages: auto`'s cut of layer blocks into model chunks (src/core/pipeline_chunks.hpp).
#include "core/pipeline_chunks.hpp"

namespace shardc {

std::vector<ChunkBlocks> auto_chunk_blocks(std::int64_t blocks, std::int64_t chunks) {
  std::vector<ChunkBlocks> out;
  if (chunks < 1) return out;
  const std::int64_t per_chunk = blocks / chunks;
  const std::int64_t larger = blocks % chunks;  // the first `larger` chunks hold one more
  out.reserve(static_cast<std::size_t>(chunks));
  std::int64_t first = 0;
  for (std::int64_t chunk = 0; chunk < chunks; ++chunk) {
    const std::int64_t size = per_chunk + (chunk < larger ? 1 : 0);
    out.push_back({first, first + size});
    first += size;
  }
  return out;
}

std::int64_t auto_chunk_of_block(std::int64_t block, std::int64_t blocks, std::int64_t chunks) {
  const std::int64_t per_chunk = blocks / chunks;
  const std::int64_t larger = blocks % chunks;
  const std::int64_t in_larger = larger * (per_chunk + 1);
  return block < in_larger ? block / (per_chunk + 1) : larger + (block - in_larger) / per_chunk;
}

}  // namespace shardc
