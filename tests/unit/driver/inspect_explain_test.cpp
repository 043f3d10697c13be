#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include "driver/suggest.hpp"
#include "driver_fixture.hpp"

using namespace shardc;

namespace {

InspectOptions inspect_opts(const test::DriverFixture& fixture, std::int64_t rank) {
  InspectOptions options;
  options.common = fixture.common();
  options.rank = rank;
  return options;
}

}  // namespace

TEST_CASE_FIXTURE(test::DriverFixture, "inspect prints a table with totals for one rank") {
  CHECK(run_inspect(inspect_opts(*this, 1), fs, out, err) == ExitCode::Ok);
  const std::string text = out.str();
  CHECK(text.starts_with("rank 1 of 4, stage 0, dense {dp=0, tp=1}\n"));
  CHECK(text.find("a.weight") != std::string::npos);
  CHECK(text.find("tp:Shard(0)") != std::string::npos);
  CHECK(text.find("[2, 3]") != std::string::npos);
  CHECK(text.find("total: 2 params, 40 B (40)") != std::string::npos);
}

TEST_CASE_FIXTURE(test::DriverFixture, "inspect --match filters rows") {
  InspectOptions options = inspect_opts(*this, 0);
  options.match = "b.*";
  CHECK(run_inspect(options, fs, out, err) == ExitCode::Ok);
  CHECK(out.str().find("a.weight") == std::string::npos);
  CHECK(out.str().find("matched: 1 params") != std::string::npos);
}

TEST_CASE_FIXTURE(test::DriverFixture, "inspect --format json prints the rank file") {
  InspectOptions options = inspect_opts(*this, 3);
  options.format = InspectFormat::Json;
  CHECK(run_inspect(options, fs, out, err) == ExitCode::Ok);
  CHECK(nlohmann::json::parse(out.str())["rank"] == 3);
}

TEST_CASE_FIXTURE(test::DriverFixture, "inspect rejects a rank outside the world") {
  CHECK(run_inspect(inspect_opts(*this, 4), fs, out, err) == ExitCode::Usage);
  CHECK(err.str().find("out of range") != std::string::npos);
}

TEST_CASE_FIXTURE(test::DriverFixture, "explain shows the rule, placements and every shard") {
  ExplainOptions options;
  options.common = common();
  options.fqn = "a.weight";
  CHECK(run_explain(options, fs, out, err) == ExitCode::Ok);
  const std::string text = out.str();
  CHECK(text.find("rule 1 (line 6), match \"a.*\" at r.yaml:6:") != std::string::npos);
  CHECK(text.find("Shard(0)") != std::string::npos);
  CHECK(text.find("shards: 2 distinct") != std::string::npos);
  CHECK(text.find("    0,2 ") != std::string::npos);  // tp = 0 on both dp rows
}

TEST_CASE_FIXTURE(test::DriverFixture, "explain suggests close names for an unknown FQN") {
  ExplainOptions options;
  options.common = common();
  options.fqn = "a.weigth";
  CHECK(run_explain(options, fs, out, err) == ExitCode::Usage);
  CHECK(err.str().find("did you mean a.weight") != std::string::npos);
}

TEST_CASE("edit distance and suggestions") {
  CHECK(driver::edit_distance("kitten", "sitting", 10) == 3);
  CHECK(driver::edit_distance("abc", "abcdefgh", 2) == 3);
  const std::vector<std::string> names = {"model.norm.weight", "lm_head.weight", "x"};
  CHECK(driver::closest_names("norm", names) == std::vector<std::string>{"model.norm.weight"});
  CHECK(driver::closest_names("lm_haed.weight", names).front() == "lm_head.weight");
}

// issue 29: `explain linear_qkv` showed rows, not Megatron's query groups; with
// virtual stages it names the model chunk.
TEST_CASE_FIXTURE(test::DriverFixture,
                  "explain a Megatron linear_qkv: query groups and model chunk") {
  fs.files["m.yaml"] =
      "format: shardc.model/v1\nname: t\ndtype: bfloat16\n"
      "attributes: {num_attention_heads: 8, num_key_value_heads: 4}\n"
      "params:\n"
      "  - repeat: {i: [0, 4]}\n"
      "    params:\n"
      "      - {name: 'decoder.layers.{i}.self_attention.linear_qkv.weight', shape: [64, 16]}\n";
  fs.files["r.yaml"] =
      "mesh: [{name: pp, size: 2}, {name: tp, size: 2}]\n"
      "pipeline: {axis: pp, virtual_stages: 2}\n"
      "rules:\n"
      "  - match: '**.linear_qkv.weight'\n"
      "    placements: {tp: Shard(0)}\n"
      "    unit: 16\n";
  ExplainOptions options;
  options.common = common();
  options.fqn = "decoder.layers.2.self_attention.linear_qkv.weight";
  CHECK(run_explain(options, fs, out, err) == ExitCode::Ok);
  const std::string text = out.str();
  CAPTURE(text);
  // 4 groups of (2 q heads + k + v) x 4 rows = 16 rows; tp 2: groups 0-1 and 2-3.
  CHECK(text.find("query groups: 4 of 16 rows") != std::string::npos);
  CHECK(text.find("groups 0-1") != std::string::npos);
  CHECK(text.find("groups 2-3") != std::string::npos);
  // 4 layers, pp 2 x vp 2: layer 2 is model chunk 2 = stage 0, virtual stage 1.
  CHECK(
      text.find("stage:         0, virtual stage 1 of 2: model chunk 2 of 4 (layer blocks 2-2)") !=
      std::string::npos);
}
