#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include "../verify/buffer_outdir.hpp"
#include "driver_fixture.hpp"
#include "verify/engine.hpp"

using namespace shardc;
using nlohmann::json;

namespace {

struct VerifyFixture : test::DriverFixture {
  VerifyFixture() {
    fs.files["m.yaml"] = test::kBufferModel;
    fs.files["r.yaml"] = test::kBufferRecipe;
    REQUIRE(run_compile(compile_opts(), fs, out, err) == ExitCode::Ok);
  }
  ExitCode verify(std::optional<std::string> ranks = std::nullopt) {
    out.str("");
    err.str("");
    VerifyOptions options;
    options.out_dir = "out";
    options.ranks = std::move(ranks);
    return run_verify(options, fs, out, err);
  }
  json rank(int rank_number) {
    return json::parse(fs.files.at("out/ranks/rank-" + std::to_string(rank_number) + ".json"));
  }
  void put(int rank_number, const json& j) {
    fs.files["out/ranks/rank-" + std::to_string(rank_number) + ".json"] = j.dump();
  }
};

}  // namespace

TEST_CASE_FIXTURE(VerifyFixture, "verify passes on a compiled plan and counts what it checked") {
  CHECK(verify() == ExitCode::Ok);
  CHECK(out.str().find("all buffer layouts round-trip") != std::string::npos);
  CHECK(out.str().find("verified 2 buffers") != std::string::npos);
  CHECK(out.str().find("element-simulated") != std::string::npos);
  CHECK(verify("0,2") == ExitCode::Ok);  // a dp_shard group alone: its tp peers are read too
}

TEST_CASE_FIXTURE(VerifyFixture, "verify box-checks params above --max-elements") {
  VerifyOptions options;
  options.out_dir = "out";
  options.max_elements = 0;
  CHECK(run_verify(options, fs, out, err) == ExitCode::Ok);
  CHECK(out.str().find("(0 element-simulated") != std::string::npos);
}

TEST_CASE_FIXTURE(VerifyFixture, "a corrupted muon split size fails naming param, rank and stage") {
  json j = rank(1);
  auto& group = j["buffers"][0]["groups"][0];
  REQUIRE(group["stages"].size() == 2);         // dp_shard (FSDP) first, then tp
  CHECK(group["stages"][1]["ranks"] == "0,1");  // runs of 3+ become a-b
  CHECK(j["params"][group["params"][0]["param"].get<int>()]["name"] == "emb.weight");
  CHECK(group["params"][0]["split_sizes"][1] == json::parse("[[5, 2]]"));  // run-length
  group["params"][0]["split_sizes"][1] = json::parse("[[4, 1], [5, 1]]");
  put(1, j);
  CHECK(verify() == ExitCode::Invalid);
  CHECK(out.str().find("stage 1 param emb.weight: member 1 has split_sizes [4, 5], this rank "
                       "[5, 5]") != std::string::npos);
}

TEST_CASE_FIXTURE(VerifyFixture, "a split size that disagrees with the member's shard fails") {
  for (int member_rank : {0, 1, 2, 3}) {  // every member agrees on the wrong sizes
    json j = rank(member_rank);
    j["buffers"][0]["groups"][0]["params"][0]["split_sizes"][1] = json::parse("[[6, 1], [4, 1]]");
    put(member_rank, j);
  }
  CHECK(verify() == ExitCode::Invalid);
  CHECK(out.str().find("split_sizes[0] gives member 0 the shape [6, 7]") != std::string::npos);
}

TEST_CASE_FIXTURE(VerifyFixture, "a buffer param index outside the file's params is malformed") {
  json j = rank(0);
  j["buffers"][1]["units"][0]["params"][0]["param"] = 99;
  put(0, j);
  CHECK(verify("0") == ExitCode::Usage);
  CHECK(err.str().find("param index 99") != std::string::npos);
}

TEST_CASE_FIXTURE(VerifyFixture, "a corrupted fsdp2 offset fails naming the param") {
  json j = rank(3);
  auto& params = j["buffers"][1]["units"][0]["params"];
  REQUIRE(params.size() >= 2);
  params[1]["offset"] = params[1]["offset"].get<int>() + 1;
  put(3, j);
  CHECK(verify() == ExitCode::Invalid);
  const auto name = j["params"][params[1]["param"].get<int>()]["name"].get<std::string>();
  CHECK(out.str().find(name) != std::string::npos);
  CHECK(out.str().find("offset") != std::string::npos);
}

TEST_CASE_FIXTURE(VerifyFixture, "a piece at the wrong offset does not round-trip") {
  json j = rank(2);  // dp_shard 1, tp 0: emb rows 3..4 -> claim rows 5..6
  for (auto& entry : j["params"])
    if (entry["name"] == "emb.weight") entry["global_offset"][0] = 5;
  put(2, j);
  CHECK(verify() == ExitCode::Invalid);
  CHECK(out.str().find("emb.weight") != std::string::npos);
}

TEST_CASE_FIXTURE(VerifyFixture, "member files outside a partial compile are not verifiable") {
  CompileOptions partial = compile_opts();
  partial.ranks = "0,2-3";  // rank 1 not compiled: the manifest does not list it
  REQUIRE(run_compile(partial, fs, out, err) == ExitCode::Ok);
  CHECK(verify("0") == ExitCode::Invalid);
  CHECK(out.str().find("not verifiable") != std::string::npos);
  // Missing files are not mismatches, and the message names the rank set that fixes it:
  // rank 0's muon closure is the whole 2 x 2 mesh, its FSDP2 group ranks 0 and 2.
  CHECK(out.str().find("mismatch(es)") == std::string::npos);
  CHECK(out.str().find("no mismatches among the layouts checked") != std::string::npos);
  CHECK(out.str().find("to verify ranks 0, compile (at least) --ranks 0-3 (4 of 4 ranks;") !=
        std::string::npos);
  CHECK(verify("1") == ExitCode::Usage);  // not part of the compile
  CHECK(verify("7") == ExitCode::Usage);  // outside the world
}

TEST_CASE_FIXTURE(VerifyFixture, "a listed rank file removed after the compile is a mismatch") {
  fs.files.erase("out/ranks/rank-1.json");
  CHECK(verify("1") == ExitCode::Invalid);
  CHECK(out.str().find("ranks/rank-1.json is listed in manifest.json but missing") !=
        std::string::npos);
  fs.files["out/ranks/rank-0.json"] = "{";
  CHECK(verify("0") == ExitCode::Usage);
}

TEST_CASE_FIXTURE(VerifyFixture, "verify refuses an OUTDIR without manifest.json") {
  fs.files.erase("out/manifest.json");
  fs.files.erase("out/ranks/rank-2.json");
  CHECK(verify() == ExitCode::Usage);
  CHECK(err.str().find("incomplete compile: 3 of 4 rank files; rerun compile") !=
        std::string::npos);
}

TEST_CASE_FIXTURE(VerifyFixture, "verify names a file changed after the compile") {
  put(1, rank(1));  // same content, other bytes
  CHECK(verify() == ExitCode::Invalid);
  CHECK(out.str().find("ranks/rank-1.json changed after the compile") != std::string::npos);
}

TEST_CASE_FIXTURE(VerifyFixture, "verify reports files that are not part of the compile") {
  fs.files["out/ranks/rank-9.json"] = fs.files.at("out/ranks/rank-1.json");
  fs.files["out/ranks/rank-01.json"] = fs.files.at("out/ranks/rank-1.json");
  fs.files["out/ranks/notes.txt"] = "x";
  CHECK(verify() == ExitCode::Ok);
  CHECK(out.str().find("3 warnings") != std::string::npos);
  CHECK(out.str().find("rank-9.json: a rank file beyond the world size 4") != std::string::npos);
  CHECK(out.str().find("a second file for rank 1") != std::string::npos);
  CHECK(out.str().find("notes.txt: a foreign file") != std::string::npos);
  VerifyOptions options;
  options.out_dir = "out";
  options.strict = true;
  CHECK(run_verify(options, fs, out, err) == ExitCode::Invalid);
}

TEST_CASE_FIXTURE(VerifyFixture, "a rank file's world_size that disagrees is a mismatch") {
  json j = rank(1);
  j["world_size"] = std::int64_t{1} << 40;
  put(1, j);
  CHECK(verify() == ExitCode::Invalid);
  CHECK(out.str().find("ranks/rank-1.json world_size 1099511627776 but plan.json world_size 4") !=
        std::string::npos);
}

TEST_CASE_FIXTURE(VerifyFixture, "a plan.json shard that disagrees with the rank files fails") {
  json plan = json::parse(fs.files.at("out/plan.json"));
  for (auto& entry : plan["params"])
    if (entry["name"] == "w.weight") entry["shards"][0]["global_offset"][0] = 1;
  fs.files["out/plan.json"] = plan.dump();
  CHECK(verify() == ExitCode::Invalid);
  CHECK(out.str().find("w.weight on rank 0: rank file global_offset") != std::string::npos);
}

TEST_CASE("box arithmetic agrees with element simulation on small muon stages") {
  using namespace verify;
  const Shape global{5, 3};
  // Two members splitting dim 0 as 3 + 2, and the same pieces in the wrong order.
  readback::MuonStageParam entry;
  entry.tensor_dim = 0;
  entry.split_sizes = {3, 2};
  entry.padded_numel = 9;
  for (const bool swapped : {false, true}) {
    std::vector<MuonMember> members{{Box{{0, 0}, {3, 3}}, &entry}, {Box{{3, 0}, {2, 3}}, &entry}};
    if (swapped) {
      members[0].box = Box{{2, 0}, {3, 3}};
      members[1].box = Box{{0, 0}, {2, 3}};
    }
    std::string why_e;
    std::string why_b;
    const auto by_elements = muon_unpack_elements(global, members, 1, why_e);
    const auto by_boxes = muon_unpack_boxes(global, members, 1, why_b);
    CHECK(by_elements.has_value() == !swapped);
    CHECK(by_boxes.has_value() == !swapped);
    if (by_elements && by_boxes) CHECK(*by_elements == Box{{0, 0}, {5, 3}});
    if (by_elements && by_boxes) CHECK(*by_elements == *by_boxes);
  }
}

TEST_CASE("fsdp2 unpack drops the padding of an empty last shard") {
  using namespace verify;
  const Shape global{3, 2};
  readback::Fsdp2Param entry;
  entry.shard_dim = 0;
  entry.padded_shape = {1, 2};
  entry.unsharded_shape = {3, 2};
  std::vector<Fsdp2Member> members;
  for (std::int64_t k = 0; k < 4; ++k)
    members.push_back({k < 3 ? Box{{k, 0}, {1, 2}} : Box{{3, 0}, {0, 2}}, &entry});
  std::string why;
  const auto by_elements = fsdp2_unpack_elements(global, members, 3, why);
  REQUIRE(by_elements);
  CHECK(*by_elements == Box{{0, 0}, {3, 2}});
  const auto by_boxes = fsdp2_unpack_boxes(global, members, 3, why);
  REQUIRE(by_boxes);
  CHECK(*by_elements == *by_boxes);
  members[1].box.offset = {2, 0};  // two shards claim row 2
  CHECK_FALSE(fsdp2_unpack_elements(global, members, 0, why));
  CHECK_FALSE(fsdp2_unpack_boxes(global, members, 0, why));
}

TEST_CASE_FIXTURE(
    VerifyFixture,
    "verify of a missing OUTDIR says it does not exist, of a file that it is not a directory") {
  VerifyOptions options;
  options.out_dir = "nope";
  CHECK(run_verify(options, fs, out, err) == ExitCode::Usage);
  CHECK(err.str().find("cannot read 'nope': No such file or directory") != std::string::npos);
  err.str("");
  options.out_dir = "m.yaml";
  CHECK(run_verify(options, fs, out, err) == ExitCode::Usage);
  CHECK(err.str().find("cannot read 'm.yaml': not a directory") != std::string::npos);
}
