// Buffer-packing layouts of one rank file (internal to src/backend).
#pragma once

#include <cstdint>
#include <vector>

#include "backend/json_writer.hpp"
#include "shardc/buffers.hpp"

namespace shardc::backend {

/// Writes the rank file's `buffers` array: one object per planned buffer,
/// in recipe order (contract §6.3; fields documented in rank.schema.json).
/// Position of each plan param in the rank file's `params` array (-1 when the
/// rank does not hold it): buffers reference params by this index.
class FileIndex {
 public:
  explicit FileIndex(std::vector<std::int64_t> index) : index_(std::move(index)) {}
  [[nodiscard]] std::int64_t at(std::size_t param) const { return index_.at(param); }

 private:
  std::vector<std::int64_t> index_;
};

/// Writes the `buffers` array of `rank`'s file (lean form, see README).
void write_rank_buffers(json::Writer& w, const Plan& plan,
                        const std::vector<PlannedBuffer>& buffers, std::int64_t rank,
                        const FileIndex& fi);

}  // namespace shardc::backend
