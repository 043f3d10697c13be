// Sets of global ranks in the compact range syntax of contract §2, extended
// with a step: `0-7,16,20-23,3-2043:8` (`a-b:s` = a, a+s, ..., b).
//
// The step form exists because a replica set on a row-major mesh is
// usually an arithmetic progression (e.g. every rank with tp = 3); without
// it plan.json would list O(ranks) numbers per shard.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace shardc {

/// start, start + stride, ..., start + (count-1)*stride. count >= 1, stride >= 1.
struct Progression {
  std::int64_t start = 0;
  std::int64_t stride = 1;
  std::int64_t count = 1;
  [[nodiscard]] std::int64_t last() const { return start + (count - 1) * stride; }
  bool operator==(const Progression&) const = default;
};

/// An ordered set of ranks as sorted, non-overlapping progressions in
/// canonical form (see `canonical`), so equal sets print equally.
class RankSet {
 public:
  RankSet() = default;
  /// Builds the canonical form of a sorted, duplicate-free list of ranks.
  static RankSet from_sorted(const std::vector<std::int64_t>& ranks);
  /// Builds a set from progressions that are already sorted by start and do
  /// not interleave (each ends before the next starts); canonicalizes.
  static RankSet from_progressions(std::vector<Progression> runs);
  /// The union of disjoint progressions in any order: the canonical form of their ranks
  /// (as `from_sorted`) up to 2^22 ranks; above, the runs sorted by start, runs continuing one
  /// another merged, never expanded (a class of 2^31 - 1 ranks stays a few runs).
  static RankSet from_disjoint(std::vector<Progression> runs);
  /// Parses `0-7,16,20-23,3-99:8`. Ranks must be < world_size when it is
  /// given (> 0). nullopt and `error` set on bad syntax, a reversed range,
  /// a rank out of range, or more than 2^24 items.
  static std::optional<RankSet> parse(std::string_view text, std::int64_t world_size,
                                      std::string& error);

  [[nodiscard]] std::string to_string() const;
  [[nodiscard]] std::int64_t size() const;
  [[nodiscard]] bool empty() const { return runs_.empty(); }
  [[nodiscard]] bool contains(std::int64_t rank) const;
  [[nodiscard]] std::int64_t first() const { return runs_.front().start; }
  [[nodiscard]] const std::vector<Progression>& runs() const { return runs_; }
  /// Every rank, ascending. Costs O(size()).
  [[nodiscard]] std::vector<std::int64_t> expand() const;
  /// Union with another set (O(size of both)).
  [[nodiscard]] RankSet unite(const RankSet& other) const;

 private:
  std::vector<Progression> runs_;
};

/// The ranks a hierarchical all-gather of `rank` touches: every rank reached
/// by moving `rank` within each stage's group, i.e. `rank + sum_s (m_s - rank)`
/// for every choice of a member `m_s` of stage `s`'s group. On a row-major
/// mesh whose stages gather over distinct axes this is exactly the sub-mesh
/// those axes span (a muon group's closure, an FSDP unit's group). Sorted,
/// without duplicates, includes `rank`. Used by `compile --with-groups` and
/// `verify` (the files a rank's buffer check needs).
std::vector<std::int64_t> group_closure(std::int64_t rank,
                                        const std::vector<std::vector<std::int64_t>>& stages);

/// An ORDERED list of ranks (a communication group by coordinate, as rank
/// files write them) in the same item syntax, order kept: each run of three or
/// more ranks with one positive step becomes `a-b` / `a-b:s`, anything else a
/// single rank, items in list order (`4096-5112:8`; `8,0,9` stays as is).
/// Size O(runs): one item for a group on one mesh axis, whatever its size.
std::string rank_list_text(const std::vector<std::int64_t>& ranks);

/// Parses `rank_list_text` output back into the list, in order (items are
/// expanded as written; no sorting, duplicates kept). nullopt and `error` on
/// bad syntax, a reversed range or more than 2^24 ranks.
std::optional<std::vector<std::int64_t>> parse_rank_list(std::string_view text, std::string& error);

}  // namespace shardc
