#include <doctest/doctest.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "shardc/driver.hpp"

using namespace shardc;
namespace fs = std::filesystem;

namespace {

// A fresh directory under the system temp dir, removed afterwards.
struct TempDir {
  fs::path path;
  TempDir() {
    static int counter = 0;
    path = fs::temp_directory_path() /
           ("shardc-rfs-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  [[nodiscard]] std::string at(const std::string& name) const { return (path / name).string(); }
};

}  // namespace

TEST_CASE("real file system writes atomically and reads back") {
  TempDir dir;
  RealFileSystem rfs;
  std::string error;
  REQUIRE(rfs.write_atomic(dir.at("a.json"), "{}\n", error));
  CHECK(rfs.read(dir.at("a.json"), 100, error) == std::string("{}\n"));
  REQUIRE(rfs.write_atomic(dir.at("a.json"), "[]\n", error));
  CHECK(rfs.read(dir.at("a.json"), 100, error) == std::string("[]\n"));
  CHECK(rfs.list_dir(dir.path.string()) == std::vector<std::string>{"a.json"});  // no temp left
}

TEST_CASE("real file system reports missing, oversized and directory reads") {
  TempDir dir;
  RealFileSystem rfs;
  std::string error;
  CHECK_FALSE(rfs.read(dir.at("missing"), 100, error));
  CHECK(error.find("No such file") != std::string::npos);
  REQUIRE(rfs.write_atomic(dir.at("big"), std::string(50, 'x'), error));
  CHECK_FALSE(rfs.read(dir.at("big"), 10, error));
  CHECK(error.find("larger than 10 bytes") != std::string::npos);
  CHECK_FALSE(rfs.read(dir.path.string(), 10, error));
  CHECK_FALSE(rfs.write_atomic(dir.at("no/such/dir/f"), "x", error));
}

TEST_CASE("real file system creates, lists, removes and sees symlinks") {
  TempDir dir;
  RealFileSystem rfs;
  std::string error;
  REQUIRE(rfs.make_dirs(dir.at("x/y"), error));
  CHECK(rfs.list_dir(dir.at("x")) == std::vector<std::string>{"y"});
  CHECK_FALSE(rfs.list_dir(dir.at("nope")));
  REQUIRE(rfs.write_atomic(dir.at("x/f"), "1", error));
  CHECK(rfs.remove_file(dir.at("x/f"), error));
  CHECK(rfs.remove_file(dir.at("x/f"), error));  // already gone: fine
  CHECK_FALSE(rfs.remove_file(dir.at("x/y"), error));
  fs::create_directory_symlink(dir.at("x"), dir.at("link"));
  CHECK(rfs.is_symlink(dir.at("link")));
  CHECK(rfs.is_symlink(dir.at("link") + "/"));
  CHECK_FALSE(rfs.is_symlink(dir.at("x")));
  REQUIRE(rfs.write_atomic(dir.at("file"), "1", error));
  CHECK_FALSE(rfs.make_dirs(dir.at("file"), error));
}
