#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include "driver_fixture.hpp"

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
  CompileOptions o = compile_opts();
  o.ranks = "1-2";
  REQUIRE(run_compile(o, fs, out, err) == ExitCode::Ok);
  CHECK(fs.files.contains("out/ranks/rank-1.json"));
  CHECK(fs.files.contains("out/ranks/rank-2.json"));
  CHECK_FALSE(fs.files.contains("out/ranks/rank-0.json"));
  CHECK_FALSE(fs.files.contains("out/ranks/rank-3.json"));
  o.rank_files = false;
  REQUIRE(run_compile(o, fs, out, err) == ExitCode::Ok);
  CHECK_FALSE(fs.files.contains("out/ranks/rank-1.json"));
  CHECK(fs.files.contains("out/plan.json"));
}

TEST_CASE_FIXTURE(test::DriverFixture, "compile rejects a bad rank set with exit 2") {
  CompileOptions o = compile_opts();
  o.ranks = "0-9";
  CHECK(run_compile(o, fs, out, err) == ExitCode::Usage);
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
  CompileOptions o = compile_opts();
  o.force = true;
  CHECK(run_compile(o, fs, out, err) == ExitCode::Ok);
  CHECK(fs.files.at("out/notes.txt") == "mine");
}

TEST_CASE_FIXTURE(test::DriverFixture, "compile refuses a symlinked OUTDIR") {
  fs.symlinks.insert("out");
  CHECK(run_compile(compile_opts(), fs, out, err) == ExitCode::Usage);
  CHECK(err.str().find("symbolic link") != std::string::npos);
}

TEST_CASE_FIXTURE(test::DriverFixture, "compile reports an unwritable directory with exit 2") {
  fs.fail_writes_under = "out/ranks/";
  CHECK(run_compile(compile_opts(), fs, out, err) == ExitCode::Usage);
  CHECK(err.str().find("Permission denied") != std::string::npos);
}

TEST_CASE_FIXTURE(test::DriverFixture, "compile writes nothing for an invalid plan") {
  fs.files["r.yaml"] = test::kRecipeUncovered;
  CHECK(run_compile(compile_opts(), fs, out, err) == ExitCode::Invalid);
  CHECK_FALSE(fs.dirs.contains("out"));
}
