#include "driver/out_dir.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>
#include <filesystem>
#include <ostream>

#include "backend/backend.hpp"
#include "driver/session.hpp"

namespace shardc::driver {
namespace {

constexpr std::string_view kMarkerText =
    "This directory is written by shardc compile. A compile is complete only when\n"
    "manifest.json is present (it is written last). shardc may replace or delete\n"
    "plan.json, manifest.json and ranks/rank-*.json here on the next run, and replaces\n"
    "the whole directory when it holds nothing else.\n";

// Temporary files an interrupted write may leave: ".<name>.tmp.<pid>.<n>".
bool is_leftover_temp(const std::string& name) {
  return name.starts_with(".rank-") && name.find(".json.tmp.") != std::string::npos;
}

// Top-level entries a compile writes (or an interrupted one leaves).
bool is_own_entry(const std::string& name) {
  static constexpr std::array<std::string_view, 4> kOwn = {kMarkerName, "plan.json", kManifestName,
                                                           "ranks"};
  return std::find(kOwn.begin(), kOwn.end(), name) != kOwn.end() ||
         (name.starts_with(".") && name.find(".tmp.") != std::string::npos);
}

bool refuse_symlinks(const std::string& dir, FileSystem& fs, std::ostream& err) {
  if (fs.is_symlink(dir)) {
    print_error(err, DiagCode::EOutput,
                "output directory '" + dir +
                    "' is a symbolic link; shardc does not write through symlinks "
                    "(pass the real path)");
    return false;
  }
  if (fs.is_symlink(path_join(dir, "ranks"))) {
    print_error(
        err, DiagCode::EOutput,
        "'" + path_join(dir, "ranks") + "' is a symbolic link; shardc does not write through it");
    return false;
  }
  return true;
}

// In place: removes manifest.json first, so until the new one is written the
// directory is refused as incomplete.
bool uncommit(const std::string& dir, FileSystem& fs, std::ostream& err) {
  std::string error;
  if (!fs.remove_file(path_join(dir, kManifestName), error) || !fs.sync_dir(dir, error)) {
    print_error(err, DiagCode::EOutput, "cannot write to output directory '" + dir + "': " + error);
    return false;
  }
  return true;
}

// Swap or in place (see out_dir.hpp); nullopt after printing a refusal.
std::optional<bool> choose_in_place(const std::string& dir, bool force, FileSystem& fs,
                                    std::ostream& err) {
  const auto entries = fs.list_dir(dir);
  if (!entries) {
    // Absent: swap, and OUTDIR appears only when the finished sibling is renamed into place
    // (a kill before that leaves it absent, as it was). Anything else under the name is refused.
    std::string error;
    std::int64_t size = 0;
    if (fs.read_range(dir, 0, 0, size, error)) error = "exists and is not a directory";
    if (error != "No such file or directory") {
      print_error(err, DiagCode::EOutput, "cannot create output directory '" + dir + "': " + error);
      return std::nullopt;
    }
    return false;
  }
  if (entries->empty()) return true;
  const bool marked = std::find(entries->begin(), entries->end(), kMarkerName) != entries->end();
  if (!marked && !force) {
    print_error(err, DiagCode::EOutput,
                "output directory '" + dir + "' is not empty and was not written by shardc (no " +
                    kMarkerName + " file); choose an empty directory or pass --force");
    return std::nullopt;
  }
  return !marked || !std::all_of(entries->begin(), entries->end(), is_own_entry);
}

// `<parent>/.<name>.shardc-lock`, beside OUTDIR: it survives the swap that replaces OUTDIR.
std::string lock_path(const std::string& dir) {
  std::string trimmed = dir;
  while (trimmed.size() > 1 && trimmed.back() == '/') trimmed.pop_back();
  const std::filesystem::path dir_path(trimmed);
  const std::filesystem::path parent =
      dir_path.parent_path().empty() ? "." : dir_path.parent_path();
  return (parent / ("." + dir_path.filename().string() + ".shardc-lock")).string();
}

// The exclusive lock of one compile into `dir`; nullptr after printing why.
std::shared_ptr<FileLock> lock_output(const std::string& dir, FileSystem& fs, std::ostream& err) {
  std::string error;
  const std::string path = lock_path(dir);
  const std::string parent = std::filesystem::path(path).parent_path().string();
  if (!fs.make_dirs(parent, error)) {
    print_error(err, DiagCode::EOutput,
                "cannot create output directory '" + dir + "': " + parent + ": " + error);
    return nullptr;
  }
  std::shared_ptr<FileLock> lock = fs.try_lock(path, error);
  const bool held = !lock && error.starts_with("held by");
  if (!lock && !held && fs.list_dir(dir)) {
    // An unwritable parent (the compile then writes in place): lock OUTDIR itself.
    lock = fs.try_lock(dir, error);
  }
  if (!lock && held) {
    print_error(err, DiagCode::EOutput,
                "output directory '" + dir + "' is being written by another shardc compile (" +
                    path + ": " + error +
                    "); wait for it to finish, or compile into another OUTDIR");
  } else if (!lock) {
    print_error(err, DiagCode::EOutput, "cannot lock output directory '" + dir + "': " + error);
  }
  return lock;
}

}  // namespace

std::optional<OutputTarget> begin_output(const std::string& dir, bool force, FileSystem& fs,
                                         std::ostream& err) {
  if (!refuse_symlinks(dir, fs, err)) return std::nullopt;
  std::shared_ptr<FileLock> lock = lock_output(dir, fs, err);
  if (!lock) return std::nullopt;
  const auto in_place = choose_in_place(dir, force, fs, err);
  if (!in_place) return std::nullopt;
  OutputTarget target{dir, dir, *in_place, std::move(lock)};
  std::string error;
  if (!target.in_place) {
    if (auto tmp = fs.make_temp_sibling(dir, error)) {
      target.write_dir = *tmp;
    } else {
      spdlog::debug("{}; writing in place", error);
      target.in_place = true;
      if (!fs.make_dirs(dir, error)) {
        print_error(err, DiagCode::EOutput,
                    "cannot create output directory '" + dir + "': " + error);
        return std::nullopt;
      }
    }
  }
  // Siblings of killed compiles go in both modes (make_temp_sibling removed them for a swap).
  if (target.in_place) fs.remove_dead_temp_siblings(dir);
  if (target.in_place && !uncommit(dir, fs, err)) return std::nullopt;
  if (!fs.write_atomic(path_join(target.write_dir, kMarkerName), kMarkerText, error)) {
    print_error(err, DiagCode::EOutput, "cannot write to output directory '" + dir + "': " + error);
    abandon_output(target, fs);
    return std::nullopt;
  }
  spdlog::debug("writing {} ({})", target.write_dir, target.in_place ? "in place" : "swap");
  return target;
}

bool commit_output(const OutputTarget& target, const std::string& manifest, FileSystem& fs,
                   std::ostream& err) {
  std::string error;
  const std::string path = path_join(target.write_dir, kManifestName);
  bool ok = fs.sync_dir(target.write_dir, error) && fs.write_atomic(path, manifest, error) &&
            fs.sync_dir(target.write_dir, error);
  if (ok && !target.in_place) ok = fs.replace_dir(target.write_dir, target.out_dir, error);
  if (!ok) {
    print_error(err, DiagCode::EOutput, "cannot commit '" + target.out_dir + "': " + error);
    abandon_output(target, fs);
    return false;
  }
  if (!target.in_place && !fs.remove_tree(target.write_dir, error))  // now the previous OUTDIR
    spdlog::warn("{}", error);
  return true;
}

void abandon_output(const OutputTarget& target, FileSystem& fs) {
  if (target.in_place) return;
  std::string error;
  if (!fs.remove_tree(target.write_dir, error)) spdlog::warn("{}", error);
}

bool prepare_ranks_dir(const std::string& ranks_dir, FileSystem& fs, std::ostream& err) {
  if (fs.is_symlink(ranks_dir)) {
    print_error(err, DiagCode::EOutput,
                "'" + ranks_dir + "' is a symbolic link; shardc does not write through it");
    return false;
  }
  std::string error;
  if (!fs.make_dirs(ranks_dir, error)) {
    print_error(err, DiagCode::EOutput, "cannot create '" + ranks_dir + "': " + error);
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
      print_error(err, DiagCode::EOutput,
                  "cannot remove stale '" + path_join(ranks_dir, name) + "': " + error);
    }
  }
  if (removed > 0) spdlog::debug("removed {} stale rank files from {}", removed, ranks_dir);
  return removed;
}

}  // namespace shardc::driver
