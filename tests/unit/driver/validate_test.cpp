#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include "driver_fixture.hpp"

using namespace shardc;

TEST_CASE_FIXTURE(test::DriverFixture, "validate accepts a good recipe and prints a verdict") {
  CHECK(run_validate(common(), fs, out, err) == ExitCode::Ok);
  CHECK(out.str() == "ok: tiny on 4 ranks, 2 params, 1 stage\n");
  CHECK(err.str().empty());
}

TEST_CASE_FIXTURE(test::DriverFixture, "validate reports an invalid plan with exit 1") {
  fs.files["bad.yaml"] = test::kRecipeUncovered;
  CHECK(run_validate(common("bad.yaml"), fs, out, err) == ExitCode::Invalid);
  CHECK(err.str().find("error[E-UNCOVERED]") != std::string::npos);
  CHECK(err.str().find("b.weight") != std::string::npos);
  CHECK(out.str().empty());
}

TEST_CASE_FIXTURE(test::DriverFixture, "validate exits 2 for a missing or malformed input") {
  SUBCASE("missing model") {
    CommonOptions options = common();
    options.model_path = "absent.yaml";
    CHECK(run_validate(options, fs, out, err) == ExitCode::Usage);
    CHECK(err.str().find("absent.yaml: error[E-MODEL]: cannot read model file") !=
          std::string::npos);
  }
  SUBCASE("malformed recipe") {
    fs.files["r.yaml"] = "format: shardc.recipe/v1\nmesh: [\n";
    CHECK(run_validate(common(), fs, out, err) == ExitCode::Usage);
    CHECK(err.str().find("E-RECIPE") != std::string::npos);
  }
}

TEST_CASE_FIXTURE(test::DriverFixture, "validate --format json prints diagnostics to stdout") {
  CommonOptions options = common("bad.yaml");
  options.diag_format = DiagFormat::Json;
  fs.files["bad.yaml"] = test::kRecipeUncovered;
  CHECK(run_validate(options, fs, out, err) == ExitCode::Invalid);
  const auto j = nlohmann::json::parse(out.str());
  REQUIRE(j.is_array());
  CHECK(j[0]["code"] == "E-UNCOVERED");
  CHECK(j[0]["file"] == "m.yaml");  // located at the uncovered param

  std::ostringstream clean;
  CHECK(run_validate(common(), fs, clean, err) == ExitCode::Ok);
  options = common();
  options.diag_format = DiagFormat::Json;
  std::ostringstream clean_json;
  CHECK(run_validate(options, fs, clean_json, err) == ExitCode::Ok);
  CHECK(clean_json.str() == "[]\n");
}

TEST_CASE_FIXTURE(test::DriverFixture, "validate --format github prints annotations") {
  CommonOptions options = common("bad.yaml");
  options.diag_format = DiagFormat::Github;
  fs.files["bad.yaml"] = test::kRecipeUncovered;
  CHECK(run_validate(options, fs, out, err) == ExitCode::Invalid);
  CHECK(out.str().starts_with("::error file=m.yaml,line="));
}

TEST_CASE_FIXTURE(test::DriverFixture, "warnings pass unless --strict") {
  fs.files["w.yaml"] = test::kRecipeUnusedRule;
  CommonOptions options = common("w.yaml");
  CHECK(run_validate(options, fs, out, err) == ExitCode::Ok);
  CHECK(err.str().find("warning[W-UNUSED-RULE]") != std::string::npos);
  CHECK(out.str().find("(1 warning)") != std::string::npos);
  options.strict = true;
  std::ostringstream strict_err;
  CHECK(run_validate(options, fs, out, strict_err) == ExitCode::Invalid);
  CHECK(strict_err.str().find("warnings are errors under --strict") != std::string::npos);
}

TEST_CASE("schema and verify report what they cannot do") {
  std::ostringstream out;
  std::ostringstream err;
  CHECK(run_schema("no-such-schema", out, err) == ExitCode::Usage);
  CHECK(err.str().find("unknown schema 'no-such-schema'") != std::string::npos);
  test::FakeFileSystem fs;
  VerifyOptions verify;
  verify.out_dir = "out";
  CHECK(run_verify(verify, fs, out, err) == ExitCode::Usage);
  CHECK(std::string(version()).size() > 0);
}
