// The narrow interface to the disk every stage that reads or writes files
// goes through (the driver, checkpoint import). An interface only: the disk
// itself is `RealFileSystem` (shardc/driver.hpp); tests supply fakes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace shardc {

/// Spare capacity a `FileSystem::read` should leave past the file's bytes
/// (`text.capacity() - text.size()`): the JSON reader uses it as simdjson's
/// padding instead of copying the text (it copies when the room is missing).
inline constexpr std::size_t kReadSlackBytes = 64;

/// A lock this process holds (FileSystem::try_lock); released when destroyed, or when the
/// process dies (a SIGKILLed compile never leaves a lock held).
class FileLock {
 public:
  virtual ~FileLock() = default;
};

/// The narrow interface to the disk. `RealFileSystem` is the disk; tests
/// may supply a fake.
class FileSystem {
 public:
  virtual ~FileSystem() = default;
  /// Reads a whole file. nullopt and `error` set when missing/unreadable or
  /// larger than `max_bytes`. The disk leaves kReadSlackBytes of capacity.
  virtual std::optional<std::string> read(const std::string& path, std::int64_t max_bytes,
                                          std::string& error) = 0;
  /// Reads a whole regular file, as `read` does, for files that are only ever regular files
  /// (checkpoint members, OUTDIR files): a FIFO, socket, device or directory is refused with
  /// `error` "is a FIFO" / "is a socket" / "is a device" / "is a directory" before it is
  /// opened (and opened non-blocking, in case it changed in between), so a FIFO without a
  /// writer never blocks. `read` keeps accepting pipes for MODEL and RECIPE (`<(...)`).
  virtual std::optional<std::string> read_regular(const std::string& path, std::int64_t max_bytes,
                                                  std::string& error) = 0;
  /// Reads at most `max_bytes` bytes starting at byte `offset` of a regular
  /// file (fewer at the end of the file) and sets `file_size` to the file's
  /// size in bytes: a bounded read for file headers (safetensors). nullopt and
  /// `error` set when missing, unreadable or not a regular file (refused before
  /// opening, as `read_regular` does: never blocks on a FIFO).
  virtual std::optional<std::string> read_range(const std::string& path, std::int64_t offset,
                                                std::int64_t max_bytes, std::int64_t& file_size,
                                                std::string& error) = 0;
  /// Writes `bytes` to `path` atomically (temporary file in the same
  /// directory, then rename). false and `error` set on failure; never
  /// leaves a partial file at `path`. Refuses (false, `error` "is a symbolic
  /// link" / "is a device" / ...) when `path` exists and is not a regular file:
  /// the rename would replace the link or node itself.
  virtual bool write_atomic(const std::string& path, std::string_view bytes,
                            std::string& error) = 0;
  /// Removes a file (not a directory). false and `error` on failure; a file
  /// that does not exist is not a failure.
  virtual bool remove_file(const std::string& path, std::string& error) = 0;
  /// Creates a directory (and parents). false and `error` on failure.
  virtual bool make_dirs(const std::string& path, std::string& error) = 0;
  /// Entries (names only) of a directory; nullopt if it does not exist.
  virtual std::optional<std::vector<std::string>> list_dir(const std::string& path) = 0;
  /// True when `path` is a symbolic link.
  virtual bool is_symlink(const std::string& path) = 0;

  // --- whole-directory commits (see docs/commands.md "Output directory commits") ---

  /// Makes every file and directory entry written so far under the
  /// directory `dir` durable (Linux: one syncfs(2) of its filesystem, then
  /// fsync(2) of `dir`; one call instead of an fsync per rank file, which
  /// costs ~4 ms each on ext4). false and `error` on failure.
  virtual bool sync_dir(const std::string& dir, std::string& error) = 0;
  /// Creates a fresh, empty, hidden sibling of `target` to build a new
  /// output in (`<parent>/.<name>.shardc-tmp.<pid>.<n>`) and returns its
  /// path. Siblings of the same pattern left by processes that no longer
  /// run (killed compiles) are removed first. nullopt and `error` when the
  /// parent is not writable.
  virtual std::optional<std::string> make_temp_sibling(const std::string& target,
                                                       std::string& error) = 0;
  /// Puts the directory `from` at `to` atomically. When `to` exists the two
  /// are exchanged (renameat2 RENAME_EXCHANGE; where the filesystem lacks
  /// it, three renames with a short window in which `to` is absent), so
  /// `from` then names the previous directory; when it does not, `from` is
  /// renamed. The parent is fsync'ed. false and `error` on failure, nothing
  /// moved.
  virtual bool replace_dir(const std::string& from, const std::string& to, std::string& error) = 0;
  /// Takes an exclusive advisory lock (flock(2), so other processes only) named `path`
  /// without waiting: `path` is created as a lock file holding this pid and removed on
  /// release; an existing directory is locked itself. nullptr and `error` when another
  /// process holds it ("held by pid N") or it cannot be created.
  virtual std::unique_ptr<FileLock> try_lock(const std::string& path, std::string& error) = 0;
  /// Removes the temporary siblings of `target` (`.<name>.shardc-tmp.<pid>.<n>`) whose
  /// process no longer runs, as make_temp_sibling does first; for compiles that write in place.
  virtual void remove_dead_temp_siblings(const std::string& target) = 0;
  /// Removes the directory `dir` and everything in it; symlinks inside are
  /// removed, never followed. A missing `dir` is not a failure.
  virtual bool remove_tree(const std::string& dir, std::string& error) = 0;
};

}  // namespace shardc
