#include "driver/out_dir.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <ostream>

#include "driver/session.hpp"

namespace shardc::driver {
namespace {

constexpr std::string_view kMarkerText =
    "This directory is written by shardc compile. shardc may replace or delete\n"
    "plan.json and ranks/rank-*.json here on the next run.\n";

bool is_rank_file_name(const std::string& name) {
  if (name.size() <= 10 || !name.starts_with("rank-") || !name.ends_with(".json")) return false;
  const std::string digits = name.substr(5, name.size() - 10);
  return std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// Temporary files an interrupted write may leave: ".<name>.tmp.<pid>.<n>".
bool is_leftover_temp(const std::string& name) {
  return name.starts_with(".rank-") && name.find(".json.tmp.") != std::string::npos;
}

}  // namespace

std::string path_join(const std::string& dir, const std::string& name) {
  if (dir.empty()) return name;
  return dir.back() == '/' ? dir + name : dir + "/" + name;
}

bool prepare_out_dir(const std::string& dir, bool force, FileSystem& fs, std::ostream& err) {
  if (fs.is_symlink(dir)) {
    print_error(err, "output directory '" + dir +
                         "' is a symbolic link; shardc does not write through symlinks "
                         "(pass the real path)");
    return false;
  }
  std::string error;
  const auto entries = fs.list_dir(dir);
  if (!entries) {
    if (!fs.make_dirs(dir, error)) {
      print_error(err, "cannot create output directory '" + dir + "': " + error);
      return false;
    }
  } else if (!entries->empty() &&
             std::find(entries->begin(), entries->end(), kMarkerName) == entries->end() && !force) {
    print_error(err, "output directory '" + dir +
                         "' is not empty and was not written by shardc (no " + kMarkerName +
                         " file); choose an empty directory or pass --force");
    return false;
  }
  if (!fs.write_atomic(path_join(dir, kMarkerName), kMarkerText, error)) {
    print_error(err, "cannot write to output directory '" + dir + "': " + error);
    return false;
  }
  return true;
}

bool prepare_ranks_dir(const std::string& ranks_dir, FileSystem& fs, std::ostream& err) {
  if (fs.is_symlink(ranks_dir)) {
    print_error(err, "'" + ranks_dir + "' is a symbolic link; shardc does not write through it");
    return false;
  }
  std::string error;
  if (!fs.make_dirs(ranks_dir, error)) {
    print_error(err, "cannot create '" + ranks_dir + "': " + error);
    return false;
  }
  return true;
}

int remove_stale_rank_files(const std::string& ranks_dir, const std::set<std::string>& keep,
                            FileSystem& fs, std::ostream& err) {
  const auto entries = fs.list_dir(ranks_dir);
  if (!entries) return 0;
  int removed = 0;
  for (const auto& name : *entries) {
    const bool stale = (is_rank_file_name(name) && !keep.contains(name)) || is_leftover_temp(name);
    if (!stale) continue;
    std::string error;
    if (fs.remove_file(path_join(ranks_dir, name), error)) {
      ++removed;
    } else {
      print_error(err, "cannot remove stale '" + path_join(ranks_dir, name) + "': " + error);
    }
  }
  if (removed > 0) spdlog::debug("removed {} stale rank files from {}", removed, ranks_dir);
  return removed;
}

}  // namespace shardc::driver
