// `shardc verify` internals (src/driver/verify*.cpp): the round-trip
// simulator of the rank files' buffer layouts.
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

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "shardc/driver.hpp"
#include "shardc/readback.hpp"

namespace shardc::driver::verify {

using readback::PlanFile;
using readback::PlanParam;
using readback::RankFile;

/// A piece of a global tensor: origin and extent per dim.
struct Box {
  Shape origin;
  Shape shape;
  bool operator==(const Box&) const = default;
};

[[nodiscard]] bool is_empty(const Box& b);
/// "[o0, o1] + [s0, s1]".
[[nodiscard]] std::string box_text(const Box& b);
[[nodiscard]] std::string ints_text(const std::vector<std::int64_t>& v);

/// Counters, the first mismatches and the first groups that could not be
/// checked (a member's rank file is absent: not a mismatch).
struct Report {
  std::vector<std::string> mismatches;
  std::int64_t num_mismatches = 0;
  std::vector<std::string> unverifiable_list;
  std::int64_t unverifiable = 0;
  std::int64_t buffers = 0;
  std::int64_t groups = 0;  ///< muon groups (closures) and FSDP2 units verified
  std::int64_t element_params = 0;
  std::int64_t box_params = 0;
  std::int64_t memo_hits = 0;
  std::int64_t slice_checks = 0;
  int max_listed = 20;

  void mismatch(const std::string& what);
  void not_verifiable(const std::string& what);
};

/// Rank files loaded on demand and kept (parsed) for the whole run.
class RankStore {
 public:
  RankStore(FileSystem& fs, std::string ranks_dir, std::int64_t world_size)
      : fs_(fs), dir_(std::move(ranks_dir)), world_(world_size) {}
  /// The rank file, or nullptr when absent (`missing`) or malformed
  /// (`fatal` set: exit 2).
  const RankFile* get(std::int64_t rank);
  [[nodiscard]] bool missing(std::int64_t rank) const { return missing_.contains(rank); }
  [[nodiscard]] std::size_t loaded() const { return files_.size(); }
  std::string fatal;

 private:
  FileSystem& fs_;
  std::string dir_;
  std::int64_t world_;
  std::map<std::int64_t, RankFile> files_;
  std::set<std::int64_t> missing_;
};

/// What every buffer check needs.
struct Context {
  const PlanFile& plan;
  std::map<std::string, const PlanParam*> params;
  RankStore& store;
  Report& report;
  std::int64_t max_elements = 0;
  /// Memoized unpack results: relative geometry -> result boxes (relative).
  std::unordered_map<std::string, std::vector<std::optional<Box>>> memo;

  [[nodiscard]] const PlanParam* param(const std::string& name) const {
    const auto it = params.find(name);
    return it == params.end() ? nullptr : it->second;
  }
  /// The rank file's entry for `name`, or nullptr.
  static const readback::RankParam* held(const RankFile& f, const std::string& name);
};

/// The sampled rank files against plan.json: each rank holds exactly the
/// params whose shards list it, with that shard's local shape, global offset
/// and padded shape (verify_manifest.cpp).
void check_manifest(Context& cx, const std::vector<std::int64_t>& sample);

/// Checks buffer `b` of every rank in `sample` (and of the group members
/// those need).
void verify_muon(Context& cx, std::size_t b, const std::vector<std::int64_t>& sample);
void verify_fsdp2(Context& cx, std::size_t b, const std::vector<std::int64_t>& sample);

/// Owners recomputed on the replicate grid (largest first, least loaded,
/// ties lowest), is_owner, replicate_coord, and the slice-back recipe
/// applied to the global box giving this rank's own piece.
void check_owners_and_slices(Context& cx, const RankFile& f, const readback::MuonGroup& g);

/// Each held param in exactly one of (groups/units, not_communicated);
/// aliases and (muon) ndim < 2 params never communicated.
void check_coverage(Context& cx, const RankFile& f, std::size_t b);

// ------------------------------------------------------------ simulation --

/// One member of a muon stage group: its current piece and its entry for
/// the param in this stage (from its own rank file).
struct MuonMember {
  Box box;
  const readback::MuonStageParam* entry = nullptr;
};

/// What `receiver` holds after unpacking the gathered rows; nullopt and
/// `why` when it is not a box of the global tensor (or reads padding).
std::optional<Box> muon_unpack_elements(const Shape& global, const std::vector<MuonMember>& m,
                                        std::size_t receiver, std::string& why);
std::optional<Box> muon_unpack_boxes(const Shape& global, const std::vector<MuonMember>& m,
                                     std::size_t receiver, std::string& why);

/// One member of an FSDP2 unit: its local piece and its entry for the param.
struct Fsdp2Member {
  Box box;
  const readback::Fsdp2Param* entry = nullptr;
};

/// The unsharded (TP/EP-local) tensor `receiver` rebuilds; nullopt and
/// `why` when it is not a box of the global tensor made of every piece.
std::optional<Box> fsdp2_unpack_elements(const Shape& global, const std::vector<Fsdp2Member>& m,
                                         std::size_t receiver, std::string& why);
std::optional<Box> fsdp2_unpack_boxes(const Shape& global, const std::vector<Fsdp2Member>& m,
                                      std::size_t receiver, std::string& why);

}  // namespace shardc::driver::verify
