// RealFileSystem: whole-directory operations for output commits (durable
// sync, temporary siblings, atomic directory replacement, tree removal).
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <charconv>
#include <filesystem>
#include <system_error>

#include "shardc/driver.hpp"

namespace shardc {
namespace {

namespace fs = std::filesystem;

std::string errno_text(int err) { return std::system_category().message(err); }

std::string strip_trailing_slashes(std::string path) {
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  return path;
}

// Opens a directory for fsync/syncfs; -1 with errno set on failure.
int open_dir(const std::string& dir) {
  return ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
}

bool fsync_dir(const std::string& dir, bool whole_fs, std::string& error) {
  const int fd = open_dir(dir);
  if (fd < 0) {
    error = "cannot open " + dir + ": " + errno_text(errno);
    return false;
  }
  bool ok = true;
  if (whole_fs && ::syncfs(fd) != 0) ok = false;
  if (ok && ::fsync(fd) != 0) ok = false;
  if (!ok) error = "cannot sync " + dir + ": " + errno_text(errno);
  ::close(fd);
  return ok;
}

fs::path parent_of(const std::string& path) {
  fs::path trimmed(strip_trailing_slashes(path));
  fs::path parent = trimmed.parent_path();
  return parent.empty() ? fs::path(".") : parent;
}

std::string temp_prefix(const std::string& target) {
  return "." + fs::path(strip_trailing_slashes(target)).filename().string() + ".shardc-tmp.";
}

// The pid in ".<name>.shardc-tmp.<pid>.<n>", or 0.
pid_t pid_of_temp(const std::string& name, const std::string& prefix) {
  if (!name.starts_with(prefix)) return 0;
  const char* first = name.data() + prefix.size();
  const char* last = name.data() + name.size();
  long pid = 0;
  const auto [end, ec] = std::from_chars(first, last, pid);
  if (ec != std::errc{} || end == last || *end != '.' || pid <= 0) return 0;
  return static_cast<pid_t>(pid);
}

// Removes temporary siblings whose process is gone (a killed compile).
void remove_stale_siblings(const fs::path& parent, const std::string& prefix) {
  std::error_code ec;
  for (fs::directory_iterator it(parent, ec), end; !ec && it != end; it.increment(ec)) {
    const pid_t pid = pid_of_temp(it->path().filename().string(), prefix);
    if (pid == 0 || pid == ::getpid()) continue;
    if (::kill(pid, 0) == 0 || errno != ESRCH) continue;  // alive, or not ours to judge
    std::error_code rm;
    fs::remove_all(it->path(), rm);
  }
}

// An flock(2) held on `fd`; a lock file (not a locked directory) is unlinked before release,
// while still locked, so a waiter that opened it re-checks and retries on the new file.
class FlockLock final : public FileLock {
 public:
  FlockLock(int fd, std::string unlink_path) : fd_(fd), unlink_path_(std::move(unlink_path)) {}
  FlockLock(const FlockLock&) = delete;
  FlockLock& operator=(const FlockLock&) = delete;
  ~FlockLock() override {
    if (!unlink_path_.empty()) ::unlink(unlink_path_.c_str());
    ::close(fd_);  // releases the lock
  }

 private:
  int fd_;
  std::string unlink_path_;
};

std::string holder_text(int fd) {
  char buf[32] = {};
  const ssize_t count = ::pread(fd, buf, sizeof buf - 1, 0);
  long pid = 0;
  if (count > 0) std::from_chars(buf, buf + count, pid);
  return pid > 0 ? "held by pid " + std::to_string(pid) : "held by another process";
}

}  // namespace

std::unique_ptr<FileLock> RealFileSystem::try_lock(const std::string& path, std::string& error) {
  const std::string trimmed = strip_trailing_slashes(path);
  struct stat st {};
  if (::stat(trimmed.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
    const int fd = open_dir(trimmed);
    if (fd < 0) {
      error = "cannot open " + trimmed + ": " + errno_text(errno);
      return nullptr;
    }
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      error = errno == EWOULDBLOCK ? "held by another process" : errno_text(errno);
      ::close(fd);
      return nullptr;
    }
    return std::make_unique<FlockLock>(fd, "");
  }
  for (int attempt = 0; attempt < 100; ++attempt) {
    const int fd = ::open(trimmed.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0) {
      error = "cannot create " + trimmed + ": " + errno_text(errno);
      return nullptr;
    }
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      error = errno == EWOULDBLOCK ? holder_text(fd) : errno_text(errno);
      ::close(fd);
      return nullptr;
    }
    // Locked; but the holder before us may have unlinked the file meanwhile: the lock counts
    // only if `p` still names the file we locked.
    struct stat mine {};
    struct stat now {};
    if (::fstat(fd, &mine) == 0 && ::stat(trimmed.c_str(), &now) == 0 &&
        mine.st_dev == now.st_dev && mine.st_ino == now.st_ino) {
      const std::string pid = std::to_string(::getpid()) + "\n";
      if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, pid.data(), pid.size(), 0) < 0) {
        // The pid is only for messages: the lock holds without it.
      }
      return std::make_unique<FlockLock>(fd, trimmed);
    }
    ::close(fd);
  }
  error = "cannot lock " + trimmed + ": it keeps being replaced";
  return nullptr;
}

void RealFileSystem::remove_dead_temp_siblings(const std::string& target) {
  remove_stale_siblings(parent_of(target), temp_prefix(target));
}

bool RealFileSystem::sync_dir(const std::string& dir, std::string& error) {
  return fsync_dir(dir, true, error);
}

std::optional<std::string> RealFileSystem::make_temp_sibling(const std::string& target,
                                                             std::string& error) {
  static std::atomic<std::uint64_t> counter{0};
  const fs::path parent = parent_of(target);
  const std::string prefix = temp_prefix(target);
  remove_stale_siblings(parent, prefix);
  const fs::path tmp =
      parent / (prefix + std::to_string(::getpid()) + "." + std::to_string(counter.fetch_add(1)));
  if (::mkdir(tmp.c_str(), 0755) != 0) {
    error = "cannot create " + tmp.string() + ": " + errno_text(errno);
    return std::nullopt;
  }
  return tmp.string();
}

bool RealFileSystem::replace_dir(const std::string& from, const std::string& to,
                                 std::string& error) {
  const std::string dst = strip_trailing_slashes(to);
  struct stat st {};
  if (::lstat(dst.c_str(), &st) != 0) {
    if (::rename(from.c_str(), dst.c_str()) != 0) {
      error = "cannot rename " + from + " to " + dst + ": " + errno_text(errno);
      return false;
    }
  } else if (::renameat2(AT_FDCWD, from.c_str(), AT_FDCWD, dst.c_str(), RENAME_EXCHANGE) != 0) {
    if (errno != EINVAL && errno != ENOSYS) {
      error = "cannot exchange " + from + " and " + dst + ": " + errno_text(errno);
      return false;
    }
    // No RENAME_EXCHANGE on this filesystem: move the old one aside first.
    const std::string aside = from + ".old";
    if (::rename(dst.c_str(), aside.c_str()) != 0) {
      error = "cannot rename " + dst + ": " + errno_text(errno);
      return false;
    }
    if (::rename(from.c_str(), dst.c_str()) != 0) {
      error = "cannot rename " + from + " to " + dst + ": " + errno_text(errno);
      ::rename(aside.c_str(), dst.c_str());
      return false;
    }
    ::rename(aside.c_str(), from.c_str());
  }
  std::string ignored;
  fsync_dir(parent_of(dst).string(), false, ignored);
  return true;
}

bool RealFileSystem::remove_tree(const std::string& dir, std::string& error) {
  std::error_code ec;
  fs::remove_all(dir, ec);
  if (ec) {
    error = "cannot remove " + dir + ": " + ec.message();
    return false;
  }
  return true;
}

}  // namespace shardc
