// An in-memory FileSystem for driver tests: files and directories in maps,
// symlinks as flagged paths, optional write failures. Thread-safe.
#pragma once

#include <algorithm>
#include <map>
#include <mutex>
#include <set>
#include <string>

#include "shardc/driver.hpp"

namespace shardc::test {

class FakeFileSystem final : public FileSystem {
 public:
  std::map<std::string, std::string> files;
  std::set<std::string> dirs{"."};
  std::set<std::string> symlinks;
  std::string fail_writes_under;  ///< writes to paths containing this text fail

  std::optional<std::string> read(const std::string& path, std::int64_t max_bytes,
                                  std::string& error) override {
    const std::lock_guard lock(mutex_);
    const auto it = files.find(path);
    if (it == files.end()) {
      error = "No such file or directory";
      return std::nullopt;
    }
    if (static_cast<std::int64_t>(it->second.size()) > max_bytes) {
      error = "too large";
      return std::nullopt;
    }
    return it->second;
  }

  // The fake holds no FIFOs or devices: a regular read is a read.
  std::optional<std::string> read_regular(const std::string& path, std::int64_t max_bytes,
                                          std::string& error) override {
    return read(path, max_bytes, error);
  }

  /// Files are stored whole; `sparse_sizes` adds zero bytes after a file's
  /// stored text (a sparse tail), so huge claimed sizes cost nothing.
  std::map<std::string, std::int64_t> sparse_sizes;

  std::optional<std::string> read_range(const std::string& path, std::int64_t offset,
                                        std::int64_t max_bytes, std::int64_t& file_size,
                                        std::string& error) override {
    const std::lock_guard lock(mutex_);
    const auto it = files.find(path);
    if (it == files.end()) {
      error = "No such file or directory";
      return std::nullopt;
    }
    const auto stored = static_cast<std::int64_t>(it->second.size());
    const auto sparse = sparse_sizes.find(path);
    file_size = sparse == sparse_sizes.end() ? stored : std::max(stored, sparse->second);
    const std::int64_t end = offset + std::clamp<std::int64_t>(file_size - offset, 0, max_bytes);
    std::string out;
    for (std::int64_t i = offset; i < end; ++i) {
      out.push_back(i < stored ? it->second[static_cast<std::size_t>(i)] : '\0');
    }
    return out;
  }

  bool write_atomic(const std::string& path, std::string_view bytes, std::string& error) override {
    const std::lock_guard lock(mutex_);
    if (!fail_writes_under.empty() && path.find(fail_writes_under) != std::string::npos) {
      error = "Permission denied";
      return false;
    }
    if (!dirs.contains(parent(path))) {
      error = "No such file or directory";
      return false;
    }
    files[path] = std::string(bytes);
    return true;
  }

  bool remove_file(const std::string& path, std::string& /*error*/) override {
    const std::lock_guard lock(mutex_);
    files.erase(path);
    return true;
  }

  bool make_dirs(const std::string& path, std::string& error) override {
    const std::lock_guard lock(mutex_);
    if (files.contains(path)) {
      error = "exists and is not a directory";
      return false;
    }
    for (std::string p = path; !p.empty() && p != "."; p = parent(p)) dirs.insert(p);
    return true;
  }

  std::optional<std::vector<std::string>> list_dir(const std::string& path) override {
    const std::lock_guard lock(mutex_);
    if (!dirs.contains(path)) return std::nullopt;
    std::set<std::string> names;
    for (const auto& [f, text] : files) {
      if (parent(f) == path) names.insert(f.substr(path.size() + 1));
    }
    for (const auto& d : dirs) {
      if (d != path && parent(d) == path) names.insert(d.substr(path.size() + 1));
    }
    return std::vector<std::string>(names.begin(), names.end());
  }

  bool is_symlink(const std::string& path) override {
    const std::lock_guard lock(mutex_);
    return symlinks.contains(path);
  }

  bool sync_dir(const std::string& dir, std::string& error) override {
    const std::lock_guard lock(mutex_);
    ++syncs;
    if (!dirs.contains(dir)) {
      error = "No such file or directory";
      return false;
    }
    return true;
  }

  std::optional<std::string> make_temp_sibling(const std::string& target,
                                               std::string& error) override {
    const std::lock_guard lock(mutex_);
    if (no_temp_siblings) {
      error = "Permission denied";
      return std::nullopt;
    }
    const std::string p = parent(target);
    const std::string base = target.substr(target.find_last_of('/') + 1);
    std::string tmp =
        (p == "." ? "" : p + "/") + "." + base + ".shardc-tmp.1." + std::to_string(temp_counter_++);
    dirs.insert(tmp);
    return tmp;
  }

  // Locks by path within this fake: a second try_lock of a held path fails.
  std::unique_ptr<FileLock> try_lock(const std::string& path, std::string& error) override {
    const std::lock_guard lock(mutex_);
    if (!locks_.insert(path).second) {
      error = "held by pid 1";
      return nullptr;
    }
    class Held final : public FileLock {
     public:
      Held(FakeFileSystem& fs, std::string path) : fs_(fs), path_(std::move(path)) {}
      Held(const Held&) = delete;
      Held& operator=(const Held&) = delete;
      ~Held() override {
        const std::lock_guard lock(fs_.mutex_);
        fs_.locks_.erase(path_);
      }

     private:
      FakeFileSystem& fs_;
      std::string path_;
    };
    return std::make_unique<Held>(*this, path);
  }

  void remove_dead_temp_siblings(const std::string& /*target*/) override {}

  bool replace_dir(const std::string& from, const std::string& to, std::string& error) override {
    const std::lock_guard lock(mutex_);
    if (!dirs.contains(from)) {
      error = "No such file or directory";
      return false;
    }
    const std::string aside = from + ".swap";
    move_tree(to, aside);
    move_tree(from, to);
    move_tree(aside, from);
    return true;
  }

  bool remove_tree(const std::string& dir, std::string& /*error*/) override {
    const std::lock_guard lock(mutex_);
    std::erase_if(files, [&](const auto& kv) { return under(kv.first, dir); });
    std::erase_if(dirs, [&](const std::string& d) { return d == dir || under(d, dir); });
    return true;
  }

  int syncs = 0;
  bool no_temp_siblings = false;  ///< make_temp_sibling fails (unwritable parent)

 private:
  static bool under(const std::string& path, const std::string& dir) {
    return path.size() > dir.size() && path.starts_with(dir) && path[dir.size()] == '/';
  }
  // Renames the directory `from` (if present) and everything under it to `to`.
  void move_tree(const std::string& from, const std::string& to) {
    std::map<std::string, std::string> moved;
    for (auto it = files.begin(); it != files.end();) {
      if (under(it->first, from)) {
        moved[to + it->first.substr(from.size())] = std::move(it->second);
        it = files.erase(it);
      } else {
        ++it;
      }
    }
    files.merge(moved);
    std::set<std::string> moved_dirs;
    for (auto it = dirs.begin(); it != dirs.end();) {
      if (*it == from || under(*it, from)) {
        moved_dirs.insert(to + it->substr(from.size()));
        it = dirs.erase(it);
      } else {
        ++it;
      }
    }
    dirs.merge(moved_dirs);
  }

  static std::string parent(const std::string& path) {
    const auto slash = path.find_last_of('/');
    return slash == std::string::npos ? "." : path.substr(0, slash);
  }

  std::mutex mutex_;
  std::set<std::string> locks_;
  int temp_counter_ = 0;
};

}  // namespace shardc::test
