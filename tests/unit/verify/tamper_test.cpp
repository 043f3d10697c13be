// Every condition `shardc verify` checks on a buffer layout (verify/muon.cpp,
// verify/fsdp2.cpp, verify/flat.cpp, the owners and slice-back of
// verify/checks.cpp) can fail: a compiled OUTDIR with one value of a rank
// file perturbed (manifest.json re-signed, so the digests pass and the
// layout checks must catch it) makes verify exit 1 with a message naming the
// group, param and rank and both values. Conditions that could not fail on
// what the reader derives were removed (see the commit that added this file).
#include <doctest/doctest.h>

#include <functional>
#include <initializer_list>
#include <nlohmann/json.hpp>

#include "../driver/driver_fixture.hpp"
#include "buffer_outdir.hpp"
#include "outputs/readback.hpp"
#include "support/sha256.hpp"

using namespace shardc;
using nlohmann::json;

namespace {

const char* const kFlatRecipe = R"(format: shardc.recipe/v1
mesh:
  - {name: dp, size: 2}
  - {name: tp, size: 2}
rules:
  - match: ["emb.weight", "head.weight"]
    placements: {tp: Shard(0)}
  - match: "**"
    placements: {}
buffers:
  - {kind: megatron_distopt, bucket_size: 64}
training:
  optimizer: adamw
  distributed_optimizer: true
)";

struct Outdir : test::DriverFixture {
  explicit Outdir(const char* recipe) {
    fs.files["m.yaml"] = test::kBufferModel;
    fs.files["r.yaml"] = recipe;
    REQUIRE(run_compile(compile_opts(), fs, out, err) == ExitCode::Ok);
    REQUIRE(verify() == ExitCode::Ok);
  }
  [[nodiscard]] static std::string path(int rank) {
    return "out/ranks/rank-" + std::to_string(rank) + ".json";
  }
  json rank_file(int rank) { return json::parse(fs.files.at(path(rank))); }
  // Rewrites the rank files of `ranks` by `edit`, then re-signs manifest.json.
  void edit(std::initializer_list<int> ranks, const std::function<void(json&)>& change) {
    for (const int rank : ranks) {
      json file = rank_file(rank);
      change(file);
      fs.files[path(rank)] = file.dump();
    }
    json manifest = json::parse(fs.files.at("out/manifest.json"));
    for (json& entry : manifest["rank_files"]["files"]) {
      const std::string& bytes = fs.files.at("out/" + entry["path"].get<std::string>());
      entry["bytes"] = bytes.size();
      entry["sha256"] = sha256_hex(bytes);
    }
    fs.files["out/manifest.json"] = manifest.dump();
  }
  ExitCode verify() {
    out.str("");
    err.str("");
    VerifyOptions options;
    options.out_dir = "out";
    return run_verify(options, fs, out, err);
  }
  // verify exits 1 and says `says`; the rank files' digests still pass.
  void fails_with(const std::string& says) {
    CHECK(verify() == ExitCode::Invalid);
    INFO(out.str());
    CHECK(out.str().find(says) != std::string::npos);
    CHECK(out.str().find("changed after the compile") == std::string::npos);
  }
};

int param_index(const json& file, const std::string& name) {
  const json& params = file["params"];
  for (std::size_t i = 0; i < params.size(); ++i)
    if (params[i]["name"] == name) return static_cast<int>(i);
  FAIL("no param " << name);
  return -1;
}

json& param_entry(json& file, const std::string& name) {
  return file["params"][static_cast<std::size_t>(param_index(file, name))];
}

// The muon group (buffer 0) listing `name`.
json& muon_group(json& file, const std::string& name) {
  const int index = param_index(file, name);
  for (json& group : file["buffers"][0]["groups"])
    for (const json& entry : group["params"])
      if (entry["param"] == index) return group;
  FAIL("no muon group lists " << name);
  return file;
}

json& muon_param(json& file, const std::string& name) {
  const int index = param_index(file, name);
  for (json& entry : muon_group(file, name)["params"])
    if (entry["param"] == index) return entry;
  return file;
}

// The FSDP2 unit (buffer 1) and its entry of `name`.
json& fsdp2_unit(json& file) { return file["buffers"][1]["units"][0]; }

json& fsdp2_param(json& file, const std::string& name) {
  const int index = param_index(file, name);
  for (json& entry : fsdp2_unit(file)["params"])
    if (entry["param"] == index) return entry;
  FAIL("the unit does not list " << name);
  return file;
}

// The stage totals the reader derives for a batch, from the file's split
// sizes (what a tool rewriting the file consistently would write).
void retotal(json& file) {
  std::string error;
  const auto parsed = readback::parse_rank_file(file.dump(), error);
  REQUIRE_MESSAGE(parsed, error);
  json& groups = file["buffers"][0]["groups"];
  for (std::size_t g = 0; g < groups.size(); ++g)
    for (std::size_t b = 0; b < groups[g]["batches"].size(); ++b) {
      const auto& stages = parsed->buffers[0].groups[g].batches[b].stages;
      json totals = json::array();
      for (const auto& stage : stages) {
        std::int64_t sum = 0;
        for (const auto& entry : stage.params) sum += entry.padded_numel;
        totals.push_back(sum);
      }
      groups[g]["batches"][b]["total_numel"] = totals;
    }
}

}  // namespace

// ------------------------------------------------------------------ muon --

TEST_CASE("muon: a tensor_dim outside the param's dims fails") {
  Outdir outdir(test::kBufferRecipe);
  outdir.edit({1},
              [](json& file) { muon_group(file, "emb.weight")["stages"][1]["tensor_dim"] = 2; });
  outdir.fails_with(
      "rank 1 stage 1 param emb.weight: tensor_dim 2 outside the 2 dims of global_shape "
      "[10, 7]");
}

TEST_CASE("muon: split_sizes with another count than the stage's members fails") {
  Outdir outdir(test::kBufferRecipe);
  outdir.edit({1}, [](json& file) {
    muon_param(file, "emb.weight")["split_sizes"][1] = json::parse("[[5, 1]]");
  });
  outdir.fails_with(
      "rank 1 stage 1 param emb.weight: split_sizes [5] has 1 sizes, the stage 2 members "
      "[0, 1]");
}

TEST_CASE("muon: a local shape with other dims than plan.json's fails") {
  Outdir outdir(test::kBufferRecipe);
  outdir.edit({1}, [](json& file) {
    json& entry = param_entry(file, "v.weight");
    entry["local_shape"] = json::array({entry["local_shape"][0]});
  });
  outdir.fails_with(
      "param v.weight: local_shape [3] has 1 dims, plan.json's global_shape [6, 8] 2");
}

TEST_CASE("muon: a stage index that is not the rank fails") {
  Outdir outdir(test::kBufferRecipe);
  outdir.edit({1}, [](json& file) { muon_group(file, "emb.weight")["stages"][0]["index"] = 1; });
  outdir.fails_with("rank 1 stage 0: index 1 is not rank 1 in [1, 3]");
}

TEST_CASE("muon: a batch dtype other than plan.json's fails") {
  Outdir outdir(test::kBufferRecipe);
  outdir.edit({2},
              [](json& file) { muon_group(file, "w.weight")["batches"][0]["dtype"] = "float32"; });
  outdir.fails_with(
      "rank 2 stage 0 param w.weight: dtype bfloat16 in plan.json, its batch's float32");
}

TEST_CASE("muon: a total_numel other than the params' padded sizes fails") {
  Outdir outdir(test::kBufferRecipe);
  std::int64_t total = 0;
  outdir.edit({3}, [&](json& file) {
    json& stated = muon_group(file, "w.weight")["batches"][0]["total_numel"][0];
    total = stated.get<std::int64_t>();
    stated = total + 32;
  });
  outdir.fails_with("rank 3 stage 0: total_numel " + std::to_string(total + 32) +
                    " but its params' padded_numel sum to " + std::to_string(total));
}

TEST_CASE("muon: members listing a batch's params in other orders fail") {
  Outdir outdir(test::kBufferRecipe);
  outdir.edit({2}, [](json& file) {
    json& params = muon_group(file, "w.weight")["batches"][0]["params"];
    REQUIRE(params.size() == 2);
    std::swap(params[0], params[1]);
  });
  outdir.fails_with("param w.weight: member 2 does not list it at batch 0 position 0 of the stage");
}

TEST_CASE("muon: a member listing another group for a stage fails") {
  Outdir outdir(test::kBufferRecipe);
  // Rank 1 claims its tp stage is {1, 3} at index 0: its own file is consistent.
  outdir.edit({1}, [](json& file) {
    json& stage = muon_group(file, "emb.weight")["stages"][1];
    stage["ranks"] = "1,3";
    stage["index"] = 0;
  });
  outdir.fails_with(
      "stage 1 param emb.weight: member 1 lists the group [1, 3] at index 0, this rank "
      "[0, 1] at index 1");
}

TEST_CASE("muon: a rank listed twice in a stage fails") {
  Outdir outdir(test::kBufferRecipe);
  outdir.edit({0},
              [](json& file) { muon_group(file, "emb.weight")["stages"][1]["ranks"] = "0,0"; });
  outdir.fails_with(
      "stage 1 param emb.weight: member 0 lists the group [0, 0] at index 0, this rank "
      "[0, 0] at index 1");
}

TEST_CASE("muon: a member with other split sizes fails") {
  Outdir outdir(test::kBufferRecipe);
  outdir.edit({1}, [](json& file) {
    muon_param(file, "emb.weight")["split_sizes"][1] = json::parse("[[4, 1], [5, 1]]");
    retotal(file);
  });
  outdir.fails_with("stage 1 param emb.weight: member 1 has split_sizes [4, 5], this rank [5, 5]");
}

TEST_CASE("muon: a member with another alignment packs at other offsets and sizes") {
  Outdir outdir(test::kBufferRecipe);
  outdir.edit({2}, [](json& file) {
    file["buffers"][0]["alignment_bytes"] = 128;  // 64 bf16 elements instead of 32
    retotal(file);
  });
  outdir.fails_with("member 2 packs it at offset 0 in padded_numel 64, this rank at 0 in 32");
}

TEST_CASE("muon: split sizes that all members agree on but no member holds fail") {
  Outdir outdir(test::kBufferRecipe);
  outdir.edit({0, 1, 2, 3}, [](json& file) {
    muon_param(file, "emb.weight")["split_sizes"][1] = json::parse("[[6, 1], [4, 1]]");
    retotal(file);
  });
  outdir.fails_with("split_sizes[0] gives member 0 the shape [6, 7] but it holds [5, 7]");
}

TEST_CASE("muon: a param in the group but in none of its batches fails") {
  Outdir outdir(test::kBufferRecipe);
  outdir.edit({0, 1, 2, 3}, [](json& file) {
    json& params = muon_group(file, "w.weight")["batches"][0]["params"];
    const int dropped = param_index(file, "w.weight");
    json kept = json::array();
    for (const json& listed : params)
      if (listed != dropped) kept.push_back(listed);
    params = kept;
    retotal(file);
  });
  outdir.fails_with("param w.weight: in the group's params but in none of its batches");
}

TEST_CASE("muon: a member missing a group or with other params fails") {
  Outdir outdir(test::kBufferRecipe);
  outdir.edit({3}, [](json& file) { muon_group(file, "emb.weight")["key"] = "renamed"; });
  outdir.fails_with("rank 3: group missing from the rank file of a member");
}

TEST_CASE("muon: pieces that gather to less than the global tensor fail") {
  Outdir outdir(test::kBufferRecipe);
  // v.weight's second FSDP piece one row short, with split sizes to match.
  outdir.edit({0, 1, 2, 3}, [](json& file) {
    muon_param(file, "v.weight")["split_sizes"][0] = json::parse("[[3, 1], [2, 1]]");
    if (file["rank"].get<int>() >= 2) param_entry(file, "v.weight")["local_shape"][0] = 2;
    retotal(file);
  });
  outdir.fails_with(
      "param v.weight: after the last stage holds [0, 0] + [5, 8], not the global tensor "
      "[6, 8]");
}

TEST_CASE("muon: an owner other than the greedy assignment's fails") {
  Outdir outdir(test::kBufferRecipe);
  outdir.edit({0}, [](json& file) { muon_param(file, "v.weight")["owner"] = json::array({1}); });
  outdir.fails_with("rank 0 muon group");
  CHECK(outdir.out.str().find("param v.weight: owner [1], expected [0]") != std::string::npos);
}

TEST_CASE("muon: a replicate_coord that is not the rank's fails") {
  Outdir outdir(test::kBufferRecipe);
  outdir.edit(
      {0}, [](json& file) { muon_group(file, "w.weight")["replicate_coord"] = json::array({1}); });
  outdir.fails_with("replicate_coord [1], expected [0]");
}

TEST_CASE("muon: a replicate axis the mesh lacks fails") {
  Outdir outdir(test::kBufferRecipe);
  outdir.edit({0}, [](json& file) {
    json& group = muon_group(file, "w.weight");
    group["replicate_axes"] = json::array({"pp"});
  });
  outdir.fails_with("replicate axis pp not in the mesh");
}

TEST_CASE("muon: split sizes that cut the rank's piece elsewhere fail the slice-back") {
  Outdir outdir(test::kBufferRecipe);
  // emb over dp_shard: rows 0..2 and 3..4 of each tp half; swapping the sizes everywhere
  // keeps the members in agreement but cuts rank 0's piece at the wrong rows.
  outdir.edit({0, 1, 2, 3}, [](json& file) {
    muon_param(file, "emb.weight")["split_sizes"][0] = json::parse("[[2, 1], [3, 1]]");
    retotal(file);
  });
  outdir.fails_with("param emb.weight slice_back: gives");
}

TEST_CASE("a param both communicated and not fails the coverage") {
  Outdir outdir(test::kBufferRecipe);
  outdir.edit({0}, [](json& file) {
    file["buffers"][0]["not_communicated"].push_back(param_index(file, "w.weight"));
  });
  outdir.fails_with(
      "rank 0 buffer 0 param w.weight: listed 2 times in groups/units and not_communicated");
}

// ----------------------------------------------------------------- fsdp2 --

TEST_CASE("fsdp2: a unit index that is not the rank fails") {
  Outdir outdir(test::kBufferRecipe);
  outdir.edit({0}, [](json& file) { fsdp2_unit(file)["index"] = 1; });
  outdir.fails_with("rank 0: index 1 is not rank 0 in [0, 2]");
}

TEST_CASE("fsdp2: a unit naming ranks that agree with each other but not with this rank") {
  Outdir outdir(test::kBufferRecipe);
  // Rank 0 claims the unit of ranks 1 and 3 (whose files agree), at index 0.
  outdir.edit({0}, [](json& file) { fsdp2_unit(file)["ranks"] = "1,3"; });
  outdir.fails_with("rank 0: index 0 is not rank 0 in [1, 3]");
}

TEST_CASE("fsdp2: a member whose unit differs fails") {
  Outdir outdir(test::kBufferRecipe);
  outdir.edit({2}, [](json& file) { fsdp2_unit(file)["units"] = "elements"; });
  outdir.fails_with("rank 2: units elements, rank 0's bytes");
}

TEST_CASE("fsdp2: a member with another offset fails") {
  Outdir outdir(test::kBufferRecipe);
  outdir.edit({3}, [](json& file) { fsdp2_param(file, "v.weight")["offset"] = 1; });
  outdir.fails_with("rank 3 param v.weight: offset 1 padded_numel");
}

TEST_CASE("fsdp2: offsets every member agrees on but that overlap fail") {
  Outdir outdir(test::kBufferRecipe);
  outdir.edit({0, 2}, [](json& file) {
    json& params = fsdp2_unit(file)["params"];
    params[1]["offset"] = params[1]["offset"].get<std::int64_t>() + 1;
  });
  outdir.fails_with("(previous params end there)");
}

TEST_CASE("fsdp2: a padded_numel other than the padded shape's fails") {
  Outdir outdir(test::kBufferRecipe);
  std::int64_t padded = 0;
  outdir.edit({0, 2}, [&](json& file) {
    json& params = fsdp2_unit(file)["params"];
    json& last = params[params.size() - 1];
    padded = last["padded_numel"].get<std::int64_t>();
    last["padded_numel"] = padded + 1;
    fsdp2_unit(file)["total"] = fsdp2_unit(file)["total"].get<std::int64_t>() + 1;
  });
  outdir.fails_with("padded_numel " + std::to_string(padded + 1) + " != numel(");
  CHECK(outdir.out.str().find(" = " + std::to_string(padded)) != std::string::npos);
}

TEST_CASE("fsdp2: a shard_dim outside the param's dims fails") {
  Outdir outdir(test::kBufferRecipe);
  outdir.edit({0, 2}, [](json& file) { fsdp2_param(file, "w.weight")["shard_dim"] = 2; });
  outdir.fails_with("w.weight: shard_dim 2 outside the 2 dims of global_shape [3, 8]");
}

TEST_CASE("fsdp2: a total other than the params' sum fails") {
  Outdir outdir(test::kBufferRecipe);
  std::int64_t total = 0;
  outdir.edit({0, 2}, [&](json& file) {
    total = fsdp2_unit(file)["total"].get<std::int64_t>();
    fsdp2_unit(file)["total"] = total + 8;
  });
  outdir.fails_with("total " + std::to_string(total + 8) + " / total_bytes");
  CHECK(outdir.out.str().find("!= sums " + std::to_string(total)) != std::string::npos);
}

TEST_CASE("fsdp2: an unsharded shape the pieces do not rebuild fails") {
  Outdir outdir(test::kBufferRecipe);
  outdir.edit({0, 2}, [](json& file) {
    // w.weight: 3 rows in chunks of 2 over 2 ranks; 4 rows would read a padding row.
    fsdp2_param(file, "w.weight")["unsharded_shape"] = json::array({4, 8});
  });
  outdir.fails_with("param w.weight: rebuilds [0, 0] + [3, 8]");
}

// ------------------------------------------------------------------ flat --

namespace {

// The bf16 flat buffer (emb, w, v; n.weight is float32, in a buffer of its own).
json& flat_buffer(json& file) {
  for (json& buffer : file["buffers"][0]["flat"])
    if (buffer["param_dtype"] == "bfloat16") return buffer;
  FAIL("no bfloat16 flat buffer");
  return file;
}

}  // namespace

TEST_CASE("flat: a buffer index that is not the rank fails") {
  Outdir outdir(kFlatRecipe);
  outdir.edit({0}, [](json& file) { flat_buffer(file)["index"] = 1; });
  outdir.fails_with("rank 0: index 1 is not rank 0 in [0, 2]");
}

TEST_CASE("flat: members whose buffers differ fail") {
  Outdir outdir(kFlatRecipe);
  std::int64_t numel = 0;
  outdir.edit({2}, [&](json& file) {
    numel = flat_buffer(file)["numel"].get<std::int64_t>();
    flat_buffer(file)["numel"] = numel + 128;
  });
  outdir.fails_with("rank 2: numel " + std::to_string(numel + 128) + ", rank 0's " +
                    std::to_string(numel));
}

TEST_CASE("flat: members whose pieces differ fail") {
  Outdir outdir(kFlatRecipe);
  outdir.edit({2}, [](json& file) { flat_buffer(file)["params"][0][3] = 64; });
  outdir.fails_with("piece 0 at 64");
}

TEST_CASE("flat: buckets that do not tile the buffer fail") {
  Outdir outdir(kFlatRecipe);
  outdir.edit({0, 2}, [](json& file) {
    json& buckets = flat_buffer(file)["buckets"];
    REQUIRE(buckets.size() >= 2);
    buckets[1][0] = buckets[1][0].get<std::int64_t>() + 2;
  });
  outdir.fails_with("bucket 1 [");
  CHECK(outdir.out.str().find("does not follow at") != std::string::npos);
}

TEST_CASE("flat: a numel other than the last bucket's end fails") {
  Outdir outdir(kFlatRecipe);
  outdir.edit({0, 2}, [](json& file) {
    flat_buffer(file)["numel"] = flat_buffer(file)["numel"].get<std::int64_t>() + 128;
  });
  outdir.fails_with("!= last bucket end");
}

TEST_CASE("flat: a piece in a bucket that does not exist fails") {
  Outdir outdir(kFlatRecipe);
  outdir.edit({0, 2}, [](json& file) { flat_buffer(file)["params"][0][4] = 99; });
  outdir.fails_with(": bucket 99 out of range");
}

TEST_CASE("flat: overlapping pieces fail") {
  Outdir outdir(kFlatRecipe);
  outdir.edit({0, 2}, [](json& file) {
    json& pieces = flat_buffer(file)["params"];
    REQUIRE(pieces.size() >= 2);
    pieces[1][3] = pieces[0][3];  // the second piece starts where the first does
  });
  outdir.fails_with("overlaps the previous one or leaves bucket");
}

TEST_CASE("flat: a piece off Megatron's 64-element starts fails") {
  Outdir outdir(kFlatRecipe);
  outdir.edit({0, 2}, [](json& file) {
    json& pieces = flat_buffer(file)["params"];
    json& last = pieces[pieces.size() - 1];
    last[3] = last[3].get<std::int64_t>() + 1;
  });
  outdir.fails_with("not on 64 elements (Megatron's pad_param_start)");
}

TEST_CASE("flat: a numel_unpadded other than the last piece's end fails") {
  Outdir outdir(kFlatRecipe);
  outdir.edit({0, 2}, [](json& file) { flat_buffer(file)["buckets"][0][2] = 1; });
  outdir.fails_with("bucket 0: numel_unpadded 1 is not its last piece's end - start");
}

TEST_CASE("flat: a bucket end other than the padding rule's fails") {
  Outdir outdir(kFlatRecipe);
  outdir.edit({0, 2}, [](json& file) {
    json& buckets = flat_buffer(file)["buckets"];
    json& last = buckets[buckets.size() - 1];
    last[1] = last[1].get<std::int64_t>() + 256;
    flat_buffer(file)["numel"] = last[1];
  });
  outdir.fails_with(", padding gives ");
}

TEST_CASE("flat: an owned range other than the rank's shard fails") {
  Outdir outdir(kFlatRecipe);
  outdir.edit({2}, [](json& file) {
    json& owned = flat_buffer(file)["owned"][0];
    owned[2] = owned[2].get<std::int64_t>() - 1;
  });
  outdir.fails_with("its shard of each bucket gives");
}

TEST_CASE("flat: an owned_numel other than its ranges' sum fails") {
  Outdir outdir(kFlatRecipe);
  std::int64_t owned = 0;
  outdir.edit({2}, [&](json& file) {
    owned = flat_buffer(file)["owned_numel"].get<std::int64_t>();
    flat_buffer(file)["owned_numel"] = owned + 1;
  });
  outdir.fails_with("owned_numel " + std::to_string(owned + 1) + " != the sum of its ranges " +
                    std::to_string(owned));
}

TEST_CASE("flat: pieces of a param that overlap in the param fail") {
  Outdir outdir(kFlatRecipe);
  // The param_offset of each piece shifted by one: every member agrees, every
  // buffer element is owned once, but the param's element 0 by no rank.
  outdir.edit({0, 2}, [](json& file) {
    json& buffer = flat_buffer(file);
    for (json& piece : buffer["params"]) piece[1] = piece[1].get<std::int64_t>() + 1;
    for (json& owned : buffer["owned"]) owned[1] = owned[1].get<std::int64_t>() + 1;
  });
  outdir.fails_with("elements 0..1 owned by no rank");
}

TEST_CASE("flat: pieces that do not cover the param fail") {
  Outdir outdir(kFlatRecipe);
  // The first piece one element shorter everywhere, the owned range holding
  // its last element too: a consistent buffer that leaves the param's last
  // element unowned.
  outdir.edit({0, 2}, [](json& file) {
    json& buffer = flat_buffer(file);
    json& piece = buffer["params"][0];
    const std::int64_t end = piece[1].get<std::int64_t>() + piece[2].get<std::int64_t>();
    piece[2] = piece[2].get<std::int64_t>() - 1;
    for (json& owned : buffer["owned"])
      if (owned[0] == 0 && owned[1].get<std::int64_t>() + owned[2].get<std::int64_t>() == end) {
        owned[2] = owned[2].get<std::int64_t>() - 1;
        buffer["owned_numel"] = buffer["owned_numel"].get<std::int64_t>() - 1;
      }
  });
  outdir.fails_with("the group owns 47 elements, the param has 48");
}

TEST_CASE("flat: a param in two flat buffers of a rank fails") {
  Outdir outdir(kFlatRecipe);
  outdir.edit({0}, [](json& file) {
    json& flat = file["buffers"][0]["flat"];
    flat.push_back(flat[0]);
    flat[1]["model_chunk"] = 1;
  });
  outdir.fails_with("flat buffers");
}
