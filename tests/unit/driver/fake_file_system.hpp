// An in-memory FileSystem for driver tests: files and directories in maps,
// symlinks as flagged paths, optional write failures. Thread-safe.
#pragma once

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
  std::string fail_writes_under;  ///< writes to paths with this prefix fail

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

  bool write_atomic(const std::string& path, std::string_view bytes, std::string& error) override {
    const std::lock_guard lock(mutex_);
    if (!fail_writes_under.empty() && path.starts_with(fail_writes_under)) {
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

 private:
  static std::string parent(const std::string& path) {
    const auto slash = path.find_last_of('/');
    return slash == std::string::npos ? "." : path.substr(0, slash);
  }

  std::mutex mutex_;
};

}  // namespace shardc::test
