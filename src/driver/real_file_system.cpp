// RealFileSystem: the disk, through POSIX calls and std::filesystem.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <filesystem>
#include <system_error>
#include <utility>

#include "shardc/driver.hpp"
#include "support/large_buffer.hpp"

namespace shardc {
namespace {

namespace fs = std::filesystem;

std::string errno_text(int err) { return std::system_category().message(err); }

// Closes a file descriptor on scope exit.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd&& other) noexcept : fd_(other.release()) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  [[nodiscard]] int get() const { return fd_; }
  int release() { return std::exchange(fd_, -1); }

 private:
  int fd_;
};

std::string strip_trailing_slashes(std::string path) {
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  return path;
}

bool read_all(int fd, std::int64_t max_bytes, std::string& text, std::string& error) {
  char buf[1 << 16];
  for (;;) {
    const ssize_t count = ::read(fd, buf, sizeof buf);
    if (count < 0 && errno == EINTR) continue;
    if (count < 0) {
      error = errno_text(errno);
      return false;
    }
    if (count == 0) return true;
    text.append(buf, static_cast<std::size_t>(count));
    if (static_cast<std::int64_t>(text.size()) > max_bytes) {
      error = "file is larger than " + std::to_string(max_bytes) + " bytes";
      return false;
    }
  }
}

bool write_all(int fd, std::string_view bytes, std::string& error) {
  while (!bytes.empty()) {
    const ssize_t count = ::write(fd, bytes.data(), bytes.size());
    if (count < 0 && errno == EINTR) continue;
    if (count < 0) {
      error = errno_text(errno);
      return false;
    }
    bytes.remove_prefix(static_cast<std::size_t>(count));
  }
  return true;
}

// What a non-regular file is, for errors: "is a symbolic link", "is a directory", ...
std::string not_regular_text(mode_t mode) {
  if (S_ISLNK(mode)) return "is a symbolic link";
  if (S_ISDIR(mode)) return "is a directory";
  if (S_ISCHR(mode) || S_ISBLK(mode)) return "is a device";
  if (S_ISFIFO(mode)) return "is a FIFO";
  if (S_ISSOCK(mode)) return "is a socket";
  return "is not a regular file";
}

// `st` as a stat call that returned `result` left it: false and `error` when the call
// failed or (`require_regular`) `st` is not a regular file.
bool stat_ok(int result, const struct stat& st, bool require_regular, std::string& error) {
  if (result != 0) {
    error = errno_text(errno);
    return false;
  }
  if (require_regular && !S_ISREG(st.st_mode)) {
    error = not_regular_text(st.st_mode);
    return false;
  }
  return true;
}

// `path` opened read-only with `flags` added, its fstat in `st`; an invalid Fd and `error`
// when either fails or (`require_regular`) the descriptor is not a regular file.
Fd open_and_stat(const std::string& path, int flags, bool require_regular, struct stat& st,
                 std::string& error) {
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | flags));
  if (fd.get() < 0) {
    error = errno_text(errno);
    return fd;
  }
  if (!stat_ok(::fstat(fd.get(), &st), st, require_regular, error)) return Fd(-1);
  return fd;
}

// `path` opened read-only, its stat in `st`; an invalid Fd and `error` when either fails.
Fd open_for_reading(const std::string& path, struct stat& st, std::string& error) {
  return open_and_stat(path, 0, false, st, error);
}

// `path` opened read-only when it is a regular file (following symlinks), its stat in `st`;
// an invalid Fd and `error` ("is a FIFO", ...) otherwise. The type is checked before opening
// (open(2) of a FIFO without a writer blocks) and again on the descriptor, which is opened
// O_NONBLOCK in case the name changed in between.
Fd open_regular(const std::string& path, struct stat& st, std::string& error) {
  if (!stat_ok(::stat(path.c_str(), &st), st, true, error)) return Fd(-1);
  return open_and_stat(path, O_NONBLOCK, true, st, error);
}

// The whole of an opened file (`st` its fstat): refused when a regular file is larger
// than `max_bytes`; a regular file's text is reserved at its size (plus slack) up front.
std::optional<std::string> read_opened(const Fd& fd, const struct stat& st, std::int64_t max_bytes,
                                       std::string& error) {
  if (S_ISREG(st.st_mode) && st.st_size > max_bytes) {
    error = "file is larger than " + std::to_string(max_bytes) + " bytes";
    return std::nullopt;
  }
  std::string text;
  if (S_ISREG(st.st_mode))
    reserve_large(text, static_cast<std::size_t>(st.st_size) + kReadSlackBytes);
  if (!read_all(fd.get(), max_bytes, text, error)) return std::nullopt;
  return text;
}

// A temporary name next to `path`, unique within the process and across
// processes (pid), hidden (leading dot).
std::string temp_name_for(const std::string& path) {
  static std::atomic<std::uint64_t> counter{0};
  const fs::path file_path(path);
  const std::string name = "." + file_path.filename().string() + ".tmp." +
                           std::to_string(::getpid()) + "." + std::to_string(counter.fetch_add(1));
  return (file_path.parent_path() / name).string();
}

}  // namespace

std::optional<std::string> RealFileSystem::read(const std::string& path, std::int64_t max_bytes,
                                                std::string& error) {
  struct stat st {};
  Fd fd = open_for_reading(path, st, error);
  if (fd.get() < 0) return std::nullopt;
  if (S_ISDIR(st.st_mode)) {
    error = "is a directory";
    return std::nullopt;
  }
  return read_opened(fd, st, max_bytes, error);
}

std::optional<std::string> RealFileSystem::read_regular(const std::string& path,
                                                        std::int64_t max_bytes,
                                                        std::string& error) {
  struct stat st {};
  Fd fd = open_regular(path, st, error);
  if (fd.get() < 0) return std::nullopt;
  return read_opened(fd, st, max_bytes, error);
}

std::optional<std::string> RealFileSystem::read_range(const std::string& path, std::int64_t offset,
                                                      std::int64_t max_bytes,
                                                      std::int64_t& file_size, std::string& error) {
  struct stat st {};
  Fd fd = open_regular(path, st, error);
  if (fd.get() < 0) return std::nullopt;
  file_size = st.st_size;
  const std::int64_t want = std::clamp<std::int64_t>(file_size - offset, 0, max_bytes);
  std::string bytes(static_cast<std::size_t>(want), '\0');
  std::int64_t got = 0;
  while (got < want) {
    const ssize_t count =
        ::pread(fd.get(), bytes.data() + got, static_cast<std::size_t>(want - got),
                static_cast<off_t>(offset + got));
    if (count < 0 && errno == EINTR) continue;
    if (count < 0) {
      error = errno_text(errno);
      return std::nullopt;
    }
    if (count == 0) break;
    got += count;
  }
  bytes.resize(static_cast<std::size_t>(got));
  return bytes;
}

bool RealFileSystem::write_atomic(const std::string& path, std::string_view bytes,
                                  std::string& error) {
  // The rename below replaces whatever `path` names: only a regular file (or nothing) may be
  // replaced, never a symlink, device, FIFO, socket or directory (`-o /dev/null` as root
  // would otherwise turn the device node into a file).
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
    error = not_regular_text(st.st_mode) + "; shardc replaces only regular files";
    return false;
  }
  const std::string tmp = temp_name_for(path);
  Fd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
  if (fd.get() < 0) {
    error = "cannot create " + tmp + ": " + errno_text(errno);
    return false;
  }
  bool ok = write_all(fd.get(), bytes, error);
  if (::close(fd.release()) != 0 && ok) {
    error = errno_text(errno);
    ok = false;
  }
  if (ok && ::rename(tmp.c_str(), path.c_str()) != 0) {
    error = "cannot rename " + tmp + " to " + path + ": " + errno_text(errno);
    ok = false;
  }
  if (!ok) ::unlink(tmp.c_str());
  return ok;
}

bool RealFileSystem::remove_file(const std::string& path, std::string& error) {
  std::error_code ec;
  const auto st = fs::symlink_status(path, ec);
  if (ec || !fs::exists(st)) return true;
  if (fs::is_directory(st)) {
    error = path + " is a directory";
    return false;
  }
  if (!fs::remove(path, ec) && ec) {
    error = ec.message();
    return false;
  }
  return true;
}

bool RealFileSystem::make_dirs(const std::string& path, std::string& error) {
  std::error_code ec;
  fs::create_directories(path, ec);
  if (ec) {
    error = ec.message();
    return false;
  }
  if (!fs::is_directory(path, ec)) {
    error = "exists and is not a directory";
    return false;
  }
  return true;
}

std::optional<std::vector<std::string>> RealFileSystem::list_dir(const std::string& path) {
  std::error_code ec;
  if (!fs::is_directory(path, ec)) return std::nullopt;
  std::vector<std::string> names;
  for (fs::directory_iterator it(path, ec), end; !ec && it != end; it.increment(ec)) {
    names.push_back(it->path().filename().string());
  }
  if (ec) return std::nullopt;
  std::sort(names.begin(), names.end());
  return names;
}

bool RealFileSystem::is_symlink(const std::string& path) {
  std::error_code ec;
  return fs::is_symlink(fs::symlink_status(strip_trailing_slashes(path), ec));
}

}  // namespace shardc
