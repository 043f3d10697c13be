// `shardc verify`'s engine, its one entry point: everything the outputs of a
// compile can be checked for without the inputs (the commit and every digest,
// plan.json's and the rank files' repeated fields, the ranks listing, and the
// round-trip simulation of every buffer layout; verify/engine.hpp). The
// driver adds what needs the inputs (`--against`) and prints the summary.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "outputs/readback.hpp"
#include "shardc/file_system.hpp"
#include "support/limits.hpp"
#include "support/rank_set.hpp"

namespace shardc::verify {

using readback::PlanFile;
using readback::PlanParam;
using readback::RankFile;
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
  std::int64_t packed_skipped = 0;  ///< packed params whose FSDP2 simulation is skipped
  std::int64_t memo_hits = 0;
  std::int64_t slice_checks = 0;
  std::vector<std::string> warnings;  ///< the first max_listed
  std::int64_t num_warnings = 0;      ///< errors under --strict
  int max_listed = 20;

  void mismatch(const std::string& what);
  /// Something in OUTDIR that is not part of the compile (verify_listing.cpp).
  void warning(const std::string& what);
  void not_verifiable(const std::string& what);
};

/// OUTDIR/manifest.json (verify_commit.cpp); nullopt after printing
/// "incomplete compile: N of M rank files; rerun compile" when it is absent,
/// or why it cannot be read or is inconsistent.
std::optional<readback::ManifestFile> load_commit(const std::string& out_dir, FileSystem& fs,
                                                  std::ostream& err);
/// How many bytes to read of a file the manifest says has `recorded` bytes:
/// a little more (so a grown file is reported as changed, not unreadable),
/// never more than 4 GiB.
[[nodiscard]] inline std::int64_t read_limit(std::int64_t recorded) {
  constexpr std::int64_t kMax = limits::kMaxPlanBytes;
  return std::min(std::max<std::int64_t>(recorded, 0), kMax) + 4096;
}

/// "" when `bytes` have the size and sha256 `entry` records, else a message
/// naming the file and both values.
std::string digest_change(const readback::ManifestEntry& entry, std::string_view bytes);

/// One verify run over a committed OUTDIR.
struct Request {
  std::string out_dir;
  std::vector<std::int64_t> sample;  ///< the ranks to verify, in the order asked
  /// Params with more global elements are checked with box arithmetic.
  std::int64_t max_elements = 0;
  /// Called once the sample is loaded, with its readable ranks in ascending
  /// order, before the buffers are simulated (the driver's `--against` checks).
  std::function<void(const std::vector<std::int64_t>&)> after_load;
};

/// How a run ended.
struct Outcome {
  enum class Status {
    Checked,         ///< every check ran; `report` says whether they passed
    PlanUnusable,    ///< plan.json's sizes are inconsistent: nothing simulated (exit 1)
    OutputsUnusable  ///< a file is malformed or not part of the compile (printed; exit 2)
  };
  Status status = Status::Checked;
  std::vector<std::int64_t> sample;  ///< the sampled ranks whose files were read
  std::size_t files_read = 0;        ///< rank files read (the sample and the members it needs)
  /// When some group is not verifiable: the smallest rank set whose files
  /// make every sampled rank verifiable.
  RankSet needed;
};

/// Checks the outputs of a compile: `plan` and `manifest` as read from
/// `request.out_dir` (load_commit; plan.json's own digest is the caller's),
/// the rank files of `request.sample` and of the group members they need.
/// Problems go to `report`; unusable outputs are printed to `err`.
Outcome verify_outputs(const PlanFile& plan, const readback::ManifestFile& manifest,
                       const Request& request, Report& report, FileSystem& fs, std::ostream& err);

}  // namespace shardc::verify
