// The compile output directory (internal to src/driver): the commit
// protocol, the `.shardc-output` marker that makes a directory safe to
// overwrite, and removal of rank files a previous run left behind.
//
// Protocol (docs/commands.md "Output directory commits"): a directory holds a complete
// compile iff it holds `manifest.json`, which is written last, after every
// other file is durable. Two ways to get there:
//  * swap (OUTDIR missing, or holding only shardc's own entries): everything
//    is written into a fresh hidden sibling, made durable, the manifest is
//    added, and the sibling replaces OUTDIR with one atomic exchange. A kill
//    at any moment leaves OUTDIR as it was (the previous complete compile).
//  * in place (an existing empty directory, e.g. a mount point; a directory
//    with foreign files under --force or beside the marker; a parent that is
//    not writable): manifest.json is removed first (the directory is then
//    refused as incomplete), files are written, stale rank files removed,
//    and manifest.json written last.
#pragma once

#include <iosfwd>
#include <memory>
#include <optional>
#include <set>
#include <string>

#include "outputs/output_dir.hpp"
#include "shardc/driver.hpp"

namespace shardc::driver {

// The file names (outputs/output_dir.hpp), as the commands have always spelled them.
using shardc::is_rank_file_name;
using shardc::kMarkerName;
using shardc::path_join;

/// Where one compile writes, and how it commits.
struct OutputTarget {
  std::string out_dir;    ///< OUTDIR as given
  std::string write_dir;  ///< the temporary sibling (swap) or OUTDIR (in place)
  bool in_place = false;
  /// The exclusive lock on OUTDIR (`<parent>/.<name>.shardc-lock`, or OUTDIR itself when the
  /// parent is not writable), held from begin_output until the target is destroyed: a second
  /// compile into the same OUTDIR is refused instead of mixing its files with this one's.
  std::shared_ptr<FileLock> lock;
};

/// Checks OUTDIR (refuses a symlinked OUTDIR or OUTDIR/ranks, and a
/// non-empty directory without the marker unless `force`), locks it (refusing, exit 2,
/// while another compile holds it), picks the protocol (an absent OUTDIR is not created
/// until the swap renames the finished sibling into place), removes temporary siblings of
/// dead compiles (in place too), uncommits an in-place OUTDIR (removes manifest.json) and writes
/// the marker into the write directory. Prints the reason and returns
/// nullopt on failure.
std::optional<OutputTarget> begin_output(const std::string& dir, bool force, FileSystem& fs,
                                         std::ostream& err);

/// Makes every written file durable, writes `manifest` as manifest.json,
/// and (swap) replaces OUTDIR with the write directory and removes the
/// previous one. Prints and returns false on failure.
bool commit_output(const OutputTarget& target, const std::string& manifest, FileSystem& fs,
                   std::ostream& err);

/// After a failure: removes the temporary sibling (swap); nothing in place.
void abandon_output(const OutputTarget& target, FileSystem& fs);

/// Creates `dir/ranks` (refusing a symlink). Prints and returns false on failure.
bool prepare_ranks_dir(const std::string& ranks_dir, FileSystem& fs, std::ostream& err);

/// Removes every `rank-*.json` (and leftover temporary file) in `ranks_dir`
/// not named in `keep`. Returns the number removed; prints failures.
int remove_stale_rank_files(const std::string& ranks_dir, const std::set<std::string>& keep,
                            FileSystem& fs, std::ostream& err);

}  // namespace shardc::driver
