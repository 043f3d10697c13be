// verify: what OUTDIR/ranks holds besides the compile's rank files. The
// directory is listed once, so the cost follows the entries present, never
// a world size read from a file.
#include <charconv>
#include <set>

#include "backend/backend.hpp"
#include "outputs/output_dir.hpp"
#include "verify/engine.hpp"

namespace shardc::verify {
namespace {

// The rank in "rank-<digits>.json", or nullopt when it does not fit int64.
std::optional<std::int64_t> rank_in_name(const std::string& name) {
  const char* first = name.data() + 5;
  const char* last = name.data() + name.size() - 5;
  std::int64_t rank = 0;
  const auto [end, ec] = std::from_chars(first, last, rank);
  if (ec != std::errc{} || end != last) return std::nullopt;
  return rank;
}

// Why a rank-file name is not part of the compile ("" when it is).
std::string classify(const std::string& name, const readback::ManifestFile& manifest,
                     const std::set<std::string>& listed) {
  if (listed.contains("ranks/" + name)) return {};
  const auto rank = rank_in_name(name);
  if (!rank || *rank >= manifest.world_size)
    return "a rank file beyond the world size " + std::to_string(manifest.world_size);
  const std::string canonical = rank_file_name(*rank, manifest.world_size);
  if (canonical != name)
    return listed.contains("ranks/" + canonical)
               ? "a second file for rank " + std::to_string(*rank) + " (duplicate of " + canonical +
                     ")"
               : "not a rank-file name of this world size (rank " + std::to_string(*rank) + " is " +
                     canonical + ")";
  return "a rank file not part of this compile (manifest.json lists ranks '" + manifest.ranks +
         "')";
}

}  // namespace

void check_ranks_listing(const std::string& ranks_dir, const readback::ManifestFile& manifest,
                         FileSystem& fs, Report& report) {
  std::set<std::string> listed;
  for (const auto& entry : manifest.rank_files) listed.insert(entry.path);
  if (fs.is_symlink(ranks_dir)) report.warning("ranks: a symbolic link (shardc never writes one)");
  const auto names = fs.list_dir(ranks_dir);
  std::set<std::string> present;
  for (const auto& name : names ? *names : std::vector<std::string>{}) {
    const std::string rel = "ranks/" + name;
    present.insert(rel);
    if (fs.is_symlink(path_join(ranks_dir, name))) {
      report.warning(rel + ": a symbolic link (shardc never writes one)");
      continue;
    }
    const std::string why =
        is_rank_file_name(name) ? classify(name, manifest, listed) : "a foreign file";
    if (!why.empty()) report.warning(rel + ": " + why);
  }
  for (const auto& rel : listed)
    if (!present.contains(rel))
      report.mismatch(rel + " is listed in manifest.json but missing (removed after the compile)");
}

}  // namespace shardc::verify
