// The compile output directory (internal to src/driver): creation, the
// `.shardc-output` marker that makes a directory safe to overwrite, and
// removal of rank files a previous run left behind.
#pragma once

#include <iosfwd>
#include <set>
#include <string>

#include "shardc/driver.hpp"

namespace shardc::driver {

/// Name of the marker file shardc writes into every OUTDIR it owns.
inline constexpr const char* kMarkerName = ".shardc-output";

/// `dir/name`, without doubling a trailing slash.
std::string path_join(const std::string& dir, const std::string& name);

/// Makes `dir` a shardc output directory: refuses a symlink, creates it when
/// missing, refuses a non-empty directory without the marker unless
/// `force`, then writes the marker. Prints the reason and returns false on
/// failure.
bool prepare_out_dir(const std::string& dir, bool force, FileSystem& fs, std::ostream& err);

/// Creates `dir/ranks` (refusing a symlink). Prints and returns false on failure.
bool prepare_ranks_dir(const std::string& ranks_dir, FileSystem& fs, std::ostream& err);

/// Removes every `rank-*.json` (and leftover temporary file) in `ranks_dir`
/// not named in `keep`. Returns the number removed; prints failures.
int remove_stale_rank_files(const std::string& ranks_dir, const std::set<std::string>& keep,
                            FileSystem& fs, std::ostream& err);

}  // namespace shardc::driver
