// The verify engine's internals (internal to src/verify; the entry point is
// verify/verify.hpp): the round-trip simulator of the rank files' buffer
// layouts and the checks of every repeated field.
//
// A piece of a param is a Box of its global tensor. Every all-gather is
// checked one param at a time, one stage at a time: each member's current
// piece is packed as its layout says, the group's rows are gathered and
// every receiver unpacks them with ITS layout. In element mode each
// element's value is its global flat index, so the unpacked tensor must read
// back as a box of the global tensor; in box mode (params above
// --max-elements) the same conditions are derived with box arithmetic.
// Simulations are memoized on the geometry relative to the first non-empty
// piece (the unpack is value-oblivious, so a translated layout gives a
// translated result): identical layers and replicas are simulated once.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "outputs/readback.hpp"
#include "shardc/file_system.hpp"
#include "support/box.hpp"
#include "support/limits.hpp"
#include "verify/verify.hpp"

namespace shardc::verify {

using readback::PlanFile;
using readback::PlanParam;
using readback::RankFile;

// A piece of a param is a Box of its global tensor (support/box.hpp).

/// Rank files loaded on demand and kept (parsed) for the whole run. Only
/// files the manifest lists are read, and each is checked against its
/// recorded digest (a change is a mismatch in `report`).
class RankStore {
 public:
  RankStore(FileSystem& fs, std::string ranks_dir, const readback::ManifestFile& manifest,
            Report& report);
  /// The rank file, or nullptr when absent or not part of the compile
  /// (`missing`) or malformed (`fatal` set: exit 2).
  const RankFile* get(std::int64_t rank);
  /// Called with every file loaded (and its path relative to OUTDIR).
  std::function<void(const RankFile&, const std::string&)> on_load;
  /// True when the manifest lists a file for `rank`.
  [[nodiscard]] bool listed(std::int64_t rank) const { return entries_.contains(rank); }
  /// The manifest's rank set text.
  [[nodiscard]] const std::string& listed_text() const { return listed_text_; }
  [[nodiscard]] bool missing(std::int64_t rank) const { return missing_.contains(rank); }
  [[nodiscard]] std::size_t loaded() const { return files_.size(); }
  /// `rank_file`'s (first) entry for param `name`, or nullptr; through an index
  /// when `rank_file` is a file this store returned.
  [[nodiscard]] const readback::RankParam* held(const RankFile& rank_file,
                                                std::string_view name) const;
  std::string fatal;

 private:
  /// A parsed file and its params by name (views of their names).
  struct Loaded {
    RankFile file;
    std::unordered_map<std::string_view, const readback::RankParam*> by_name;
  };
  FileSystem& fs_;
  std::string dir_;
  std::int64_t world_;
  Report& report_;
  std::string listed_text_;
  std::map<std::int64_t, const readback::ManifestEntry*> entries_;
  std::map<std::int64_t, Loaded> files_;
  std::set<std::int64_t> missing_;
};

/// What every buffer check needs.
struct Context {
  const PlanFile& plan;
  std::unordered_map<std::string_view, const PlanParam*> params;  ///< names view `plan`'s
  RankStore& store;
  Report& report;
  std::int64_t max_elements = 0;
  /// Memoized unpack results: relative geometry -> result boxes (relative).
  std::unordered_map<std::string, std::vector<std::optional<Box>>> memo;

  [[nodiscard]] const PlanParam* param(std::string_view name) const {
    const auto it = params.find(name);
    return it == params.end() ? nullptr : it->second;
  }
  /// The rank file's entry for `name`, or nullptr.
  [[nodiscard]] const readback::RankParam* held(const RankFile& rank_file,
                                                std::string_view name) const {
    return store.held(rank_file, name);
  }
};

/// The sampled rank files against plan.json: each rank holds exactly the
/// params whose shards list it, with that shard's local shape, global offset
/// and padded shape (verify_manifest.cpp).
void check_manifest(Context& cx, const std::vector<std::int64_t>& sample);

/// Lists `ranks_dir` once (cost: the entries present). Rank files the
/// manifest does not list (beyond the world size, a second name for one
/// rank, left over from another compile), other files and symlinks are
/// warnings; a file the manifest lists but the directory lacks is a
/// mismatch (verify_listing.cpp).
void check_ranks_listing(const std::string& ranks_dir, const readback::ManifestFile& manifest,
                         FileSystem& fs, Report& report);

/// Elements of a shape read from a file; nullopt when an extent is negative
/// or the product (zeros counted as 1) reaches 2^62 (verify_fields.cpp).
std::optional<std::int64_t> shape_numel(const Shape& shape);

/// plan.json's redundant fields (mesh products = world_size, pipeline axis
/// and stage count, shard shapes within global shapes, summary.num_params)
/// and its agreement with manifest.json (world_size, input digests). false
/// when the plan must not drive the simulator (a size it would loop over
/// is inconsistent); every problem is a mismatch in `report`.
bool check_plan_fields(const PlanFile& plan, const readback::ManifestFile& manifest,
                       Report& report);

/// One rank file (`file`, relative to OUTDIR) against plan.json: world_size,
/// coords on both meshes, stage, each held param's dtype, stage,
/// global_shape, numel and bytes, duplicate entries, totals (= the sums of
/// its params, within plan.json's per-rank min/max).
void check_rank_fields(const Context& cx, const RankFile& rank_file, const std::string& file);

/// Checks buffer `buffer_index` of every rank in `sample` (and of the group members
/// those need).
void verify_muon(Context& cx, std::size_t buffer_index, const std::vector<std::int64_t>& sample);
void verify_fsdp2(Context& cx, std::size_t buffer_index, const std::vector<std::int64_t>& sample);
/// megatron_distopt / deepspeed_zero: per DP group, the members' layouts agree,
/// each owns exactly its shard of every bucket, every element of every param is
/// owned once and the padding follows the framework's rule (verify_flat.cpp).
void verify_flat(Context& cx, std::size_t buffer_index, const std::vector<std::int64_t>& sample);

/// Owners recomputed on the replicate grid (largest first, least loaded,
/// ties lowest), replicate_coord, and the slice-back recipe applied to the
/// global box giving this rank's own piece.
void check_owners_and_slices(Context& cx, const RankFile& rank_file,
                             const readback::MuonGroup& group);

/// Each held param in exactly one of (groups/units, not_communicated);
/// aliases and (muon) ndim < 2 params never communicated.
void check_coverage(Context& cx, const RankFile& rank_file, std::size_t buffer_index);

// ------------------------------------------------------------ simulation --

/// Memo keys are raw bytes: a number as its 8 bytes, a vector as its length
/// then its values.
void append_key(std::string& key, std::int64_t value);
void append_key(std::string& key, const std::vector<std::int64_t>& values);
/// A member's piece in a memo key: its offset relative to `anchor` ([-1]
/// when it is empty), then its shape.
void append_piece_key(std::string& key, const Box& piece, const Shape& anchor);

/// The offset of the first non-empty piece of `members` (MuonMember or Fsdp2Member), else the
/// origin of `ndim` dims: simulations are memoized relative to it.
template <typename Member>
Shape anchor_of(const std::vector<Member>& members, std::size_t ndim) {
  for (const Member& member : members)
    if (!is_empty(member.box)) return member.box.offset;
  return Shape(ndim, 0);
}

/// Memo key of one simulation: `kind` (layout and mode), the global shape, then per member
/// its piece relative to `anchor` and what `append_entry(key, entry)` adds of its entry.
template <typename Member, typename AppendEntry>
std::string simulation_key(std::string_view kind, const Shape& global,
                           const std::vector<Member>& members, const Shape& anchor,
                           AppendEntry append_entry) {
  std::string key(kind);
  append_key(key, global);
  for (const Member& member : members) {
    append_piece_key(key, member.box, anchor);
    append_entry(key, *member.entry);
  }
  return key;
}

/// One member of a muon stage group: its current piece and its entry for
/// the param in this stage (from its own rank file).
struct MuonMember {
  Box box;
  const readback::MuonStageParam* entry = nullptr;
};

/// What `receiver` holds after unpacking the gathered rows; nullopt and
/// `why` when it is not a box of the global tensor (or reads padding).
std::optional<Box> muon_unpack_elements(const Shape& global, const std::vector<MuonMember>& members,
                                        std::size_t receiver, std::string& why);
std::optional<Box> muon_unpack_boxes(const Shape& global, const std::vector<MuonMember>& members,
                                     std::size_t receiver, std::string& why);

/// One member of an FSDP2 unit: its local piece and its entry for the param.
struct Fsdp2Member {
  Box box;
  const readback::Fsdp2Param* entry = nullptr;
};

/// The unsharded (TP/EP-local) tensor `receiver` rebuilds; nullopt and
/// `why` when it is not a box of the global tensor made of every piece.
std::optional<Box> fsdp2_unpack_elements(const Shape& global,
                                         const std::vector<Fsdp2Member>& members,
                                         std::size_t receiver, std::string& why);
std::optional<Box> fsdp2_unpack_boxes(const Shape& global, const std::vector<Fsdp2Member>& members,
                                      std::size_t receiver, std::string& why);

}  // namespace shardc::verify
