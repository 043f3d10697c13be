#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include "driver_fixture.hpp"
#include "frontend/frontend.hpp"

using namespace shardc;

TEST_CASE_FIXTURE(test::DriverFixture, "compile writes the marker, plan.json and every rank file") {
  CHECK(run_compile(compile_opts(), fs, out, err) == ExitCode::Ok);
  CHECK(fs.files.contains("out/.shardc-output"));
  const auto plan = nlohmann::json::parse(fs.files.at("out/plan.json"));
  CHECK(plan["world_size"] == 4);
  for (int r = 0; r < 4; ++r) {
    const std::string path = "out/ranks/rank-" + std::to_string(r) + ".json";
    REQUIRE(fs.files.contains(path));
    CHECK(nlohmann::json::parse(fs.files.at(path))["rank"] == r);
  }
  CHECK(out.str().find("compiled tiny: world size 4") != std::string::npos);
  CHECK(out.str().find("4 rank files") != std::string::npos);
}

TEST_CASE_FIXTURE(test::DriverFixture, "compile output does not depend on the worker count") {
  CompileOptions one = compile_opts("one");
  one.jobs = 1;
  CompileOptions many = compile_opts("many");
  many.jobs = 7;
  REQUIRE(run_compile(one, fs, out, err) == ExitCode::Ok);
  REQUIRE(run_compile(many, fs, out, err) == ExitCode::Ok);
  CHECK(fs.files.at("one/plan.json") == fs.files.at("many/plan.json"));
  for (int r = 0; r < 4; ++r) {
    const std::string name = "/ranks/rank-" + std::to_string(r) + ".json";
    CHECK(fs.files.at("one" + name) == fs.files.at("many" + name));
  }
}

TEST_CASE_FIXTURE(test::DriverFixture,
                  "compile --ranks writes only the set and drops stale files") {
  REQUIRE(run_compile(compile_opts(), fs, out, err) == ExitCode::Ok);
  CompileOptions options = compile_opts();
  options.ranks = "1-2";
  REQUIRE(run_compile(options, fs, out, err) == ExitCode::Ok);
  CHECK(fs.files.contains("out/ranks/rank-1.json"));
  CHECK(fs.files.contains("out/ranks/rank-2.json"));
  CHECK_FALSE(fs.files.contains("out/ranks/rank-0.json"));
  CHECK_FALSE(fs.files.contains("out/ranks/rank-3.json"));
  options.rank_files = false;
  REQUIRE(run_compile(options, fs, out, err) == ExitCode::Ok);
  CHECK_FALSE(fs.files.contains("out/ranks/rank-1.json"));
  CHECK(fs.files.contains("out/plan.json"));
}

TEST_CASE_FIXTURE(test::DriverFixture, "compile rejects a bad rank set with exit 2") {
  CompileOptions options = compile_opts();
  options.ranks = "0-9";
  CHECK(run_compile(options, fs, out, err) == ExitCode::Usage);
  CHECK(err.str().find("--ranks '0-9'") != std::string::npos);
  CHECK_FALSE(fs.files.contains("out/plan.json"));
}

TEST_CASE_FIXTURE(test::DriverFixture,
                  "compile refuses a foreign non-empty directory unless --force") {
  fs.dirs.insert("out");
  fs.files["out/notes.txt"] = "mine";
  CHECK(run_compile(compile_opts(), fs, out, err) == ExitCode::Usage);
  CHECK(err.str().find("not written by shardc") != std::string::npos);
  CHECK_FALSE(fs.files.contains("out/plan.json"));
  CompileOptions options = compile_opts();
  options.force = true;
  CHECK(run_compile(options, fs, out, err) == ExitCode::Ok);
  CHECK(fs.files.at("out/notes.txt") == "mine");
}

TEST_CASE_FIXTURE(test::DriverFixture, "compile refuses a symlinked OUTDIR") {
  fs.symlinks.insert("out");
  CHECK(run_compile(compile_opts(), fs, out, err) == ExitCode::Usage);
  CHECK(err.str().find("symbolic link") != std::string::npos);
}

TEST_CASE_FIXTURE(test::DriverFixture, "compile reports an unwritable directory with exit 2") {
  fs.fail_writes_under = "ranks/rank-";
  CHECK(run_compile(compile_opts(), fs, out, err) == ExitCode::Usage);
  CHECK(err.str().find("Permission denied") != std::string::npos);
}

namespace {

bool has_temp_sibling(const test::FakeFileSystem& fs) {
  for (const auto& d : fs.dirs)
    if (d.find(".shardc-tmp.") != std::string::npos) return true;
  return false;
}

}  // namespace

TEST_CASE_FIXTURE(test::DriverFixture, "compile writes manifest.json with every file's digest") {
  REQUIRE(run_compile(compile_opts(), fs, out, err) == ExitCode::Ok);
  const auto manifest = nlohmann::json::parse(fs.files.at("out/manifest.json"));
  CHECK(manifest["format"] == "shardc.manifest/v1");
  CHECK(manifest["world_size"] == 4);
  CHECK(manifest["plan"]["sha256"] == sha256_hex(fs.files.at("out/plan.json")));
  CHECK(manifest["plan"]["bytes"] == fs.files.at("out/plan.json").size());
  CHECK(manifest["rank_files"]["ranks"] == "0-3");
  REQUIRE(manifest["rank_files"]["files"].size() == 4);
  for (int r = 0; r < 4; ++r) {
    const auto& entry = manifest["rank_files"]["files"][static_cast<std::size_t>(r)];
    CHECK(entry["rank"] == r);
    CHECK(entry["sha256"] == sha256_hex(fs.files.at("out/" + entry["path"].get<std::string>())));
  }
  CHECK_FALSE(has_temp_sibling(fs));
  CHECK(fs.syncs >= 2);
}

TEST_CASE_FIXTURE(test::DriverFixture, "a failed rerun leaves the previous complete output") {
  CompileOptions options = compile_opts();
  options.ranks = "0-1";
  REQUIRE(run_compile(options, fs, out, err) == ExitCode::Ok);
  const auto before = fs.files;
  fs.fail_writes_under = "ranks/rank-3";
  CHECK(run_compile(compile_opts(), fs, out, err) == ExitCode::Usage);
  CHECK(fs.files == before);
  CHECK_FALSE(has_temp_sibling(fs));
}

TEST_CASE_FIXTURE(test::DriverFixture, "compile writes in place when no sibling can be made") {
  fs.no_temp_siblings = true;
  REQUIRE(run_compile(compile_opts(), fs, out, err) == ExitCode::Ok);
  CHECK(fs.files.contains("out/manifest.json"));
  CompileOptions options = compile_opts();
  options.ranks = "2";
  fs.fail_writes_under = "ranks/rank-2";
  CHECK(run_compile(options, fs, out, err) == ExitCode::Usage);
  CHECK_FALSE(fs.files.contains("out/manifest.json"));  // uncommitted: refused as incomplete
  fs.fail_writes_under.clear();
  REQUIRE(run_compile(options, fs, out, err) == ExitCode::Ok);
  CHECK(nlohmann::json::parse(fs.files.at("out/manifest.json"))["rank_files"]["ranks"] == "2");
  CHECK_FALSE(fs.files.contains("out/ranks/rank-0.json"));
}

TEST_CASE_FIXTURE(test::DriverFixture, "compile writes nothing for an invalid plan") {
  fs.files["r.yaml"] = test::kRecipeUncovered;
  CHECK(run_compile(compile_opts(), fs, out, err) == ExitCode::Invalid);
  CHECK_FALSE(fs.dirs.contains("out"));
}
