// Buffer-packing layouts of one rank file (internal to src/backend).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "backend/class_memo.hpp"
#include "backend/json_writer.hpp"
#include "planner/buffers.hpp"

namespace shardc::backend {

/// Position of each plan param in the rank file's `params` array (-1 when the
/// rank does not hold it): buffers reference params by this index.
class FileIndex {
 public:
  explicit FileIndex(std::vector<std::int64_t> index) : index_(std::move(index)) {}
  [[nodiscard]] std::int64_t at(std::size_t param) const { return index_.at(param); }

 private:
  std::vector<std::int64_t> index_;
};

/// Where a muon group's param sits: its batch and its position in it.
struct MuonSlot {
  std::size_t batch = 0;
  std::size_t pos = 0;
};

/// Writes the rank files' `buffers` arrays of one plan: one object per
/// planned buffer, in recipe order (contract §6.3, lean form; fields
/// documented in rank.schema.json). Built once per compile and shared
/// read-only by the writer threads: the rank-independent JSON of each muon
/// group is rendered once, and a group's sizes (`params`, `batches`) once per
/// shard class (`muon_split_axes`) when ranks share classes.
class RankBuffersWriter {
 public:
  /// `memo_budget_bytes` bounds the memoized text; 0 renders every rank's
  /// groups in full (the unmemoized reference).
  RankBuffersWriter(const Plan& plan, const std::vector<PlannedBuffer>& buffers,
                    std::size_t memo_budget_bytes);

  /// Writes the `buffers` array of `rank`'s file; `fi` is its file index.
  void write(json::Writer& writer, std::int64_t rank, const FileIndex& fi) const;

 private:
  // Rank-independent text of one muon group.
  struct GroupText {
    std::string head;                      // "key", "mesh", "replicate_axes" members
    std::vector<std::string> stage_heads;  // per stage: "axes", "tensor_dim" members
    std::vector<MuonSlot> slots;           // per param of the group
    std::vector<int> split_axes;           // muon_split_axes
    bool memo = false;                     // ranks share its classes
  };
  struct Body {
    std::string text;  // the "params" and "batches" members
  };

  void write_muon(json::Writer& writer, std::size_t buffer_index, const MuonPlan& muon,
                  std::int64_t rank, const FileIndex& fi) const;
  void write_muon_group(json::Writer& writer, std::size_t buffer_index, std::size_t gi,
                        std::int64_t rank, const FileIndex& fi) const;

  const Plan& plan_;
  const std::vector<PlannedBuffer>& buffers_;
  std::vector<std::vector<GroupText>> groups_;  // per buffer, per muon group
  ClassMemo<Body> memo_;
};

}  // namespace shardc::backend
