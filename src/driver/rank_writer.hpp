// Writes rank files with a pool of worker threads (internal to src/driver).
// Each file is rendered and written by one worker and then dropped, so
// memory stays O(jobs x one rank file); every file's bytes depend only on
// the plan and its rank, never on scheduling.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

#include "backend/backend.hpp"
#include "core/plan.hpp"
#include "memory/memory.hpp"
#include "planner/buffers.hpp"
#include "shardc/driver.hpp"

namespace shardc::driver {

struct RankWriteJob {
  const Plan* plan = nullptr;
  const std::vector<PlannedBuffer>* buffers = nullptr;  ///< planned once, shared read-only
  const MemoryReport* memory = nullptr;                 ///< computed once, shared read-only
  std::vector<std::int64_t> ranks;                      ///< ascending
  std::string ranks_dir;
  int jobs = 0;           ///< worker threads; 0 = one per core
  bool progress = false;  ///< show `[ranks i/N]` on `err`
  /// Filled with each file's size and sha256 (index i = ranks[i]), computed
  /// from the rendered bytes before they are written; `path` is
  /// "ranks/<file name>". Sized by write_rank_files.
  std::vector<FileDigest>* digests = nullptr;
};

/// Writes every rank file of the job. Prints the first failure to `err` and
/// returns false when any file could not be written.
bool write_rank_files(const RankWriteJob& job, FileSystem& fs, std::ostream& err);

}  // namespace shardc::driver
