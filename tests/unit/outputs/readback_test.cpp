// The readback parsers (simdjson fast path) against their reference reader
// (nlohmann, JSON paths in errors): same results, same error messages.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "../driver/driver_fixture.hpp"
#include "outputs/readback.hpp"

using namespace shardc;

namespace {

// Muon and FSDP2 buffers, an uneven split, an alias, a 1-d param, a pipeline.
const char* const kModel = R"(format: shardc.model/v1
name: rb
dtype: bfloat16
params:
  - {name: emb.weight, shape: [10, 7]}
  - {name: layers.0.w.weight, shape: [3, 8]}
  - {name: layers.1.w.weight, shape: [3, 8]}
  - {name: n.weight, shape: [4], dtype: float32}
  - {name: head.weight, shape: [10, 7]}
tied: [[emb.weight, head.weight]]
)";

const char* const kRecipe = R"(format: shardc.recipe/v1
mesh:
  - {name: pp, size: 2}
  - {name: dp_shard, size: 2}
  - {name: tp, size: 2}
rules:
  - match: ["emb.weight", "head.weight"]
    placements: {tp: Shard(0)}
  - match: "**"
    placements: {}
pipeline: {axis: pp, stages: auto}
fsdp: {shard: dp_shard}
buffers:
  - {kind: muon_allgather, alignment_bytes: 64}
  - {kind: fsdp2_allgather, units: ["**"]}
)";

// The parser's and the reference's results for `text` agree; returns
// whether it parsed.
template <typename T>
bool agree(std::string_view text, std::optional<T> (*parse)(std::string_view, std::string&),
           std::optional<T> (*reference)(std::string_view, std::string&)) {
  std::string error;
  std::string ref_error;
  const std::optional<T> got = parse(text, error);
  const std::optional<T> want = reference(text, ref_error);
  CHECK(got.has_value() == want.has_value());
  CHECK(error == ref_error);
  if (got && want) CHECK(*got == *want);
  return got.has_value();
}

// Which files parse as which kinds (each text is tried as all three).
struct Parsed {
  int plans = 0;
  int ranks = 0;
  int manifests = 0;
  int memories = 0;  ///< as a rank file's memory (parse_rank_memory_file)
};

Parsed agree_all(std::string_view text) {
  Parsed parsed;
  parsed.plans += agree(text, &readback::parse_plan_file, &readback::parse_plan_file_reference);
  parsed.ranks += agree(text, &readback::parse_rank_file, &readback::parse_rank_file_reference);
  parsed.manifests +=
      agree(text, &readback::parse_manifest_file, &readback::parse_manifest_file_reference);
  parsed.memories +=
      agree(text, &readback::parse_rank_memory_file, &readback::parse_rank_memory_file_reference);
  return parsed;
}

struct Compiled : test::DriverFixture {
  Compiled() {
    fs.files["m.yaml"] = kModel;
    fs.files["r.yaml"] = kRecipe;
    REQUIRE(run_compile(compile_opts(), fs, out, err) == ExitCode::Ok);
  }
  const std::string& file(const std::string& rel) { return fs.files.at("out/" + rel); }
};

// `text` with the first `from` replaced by `to`.
std::string edit(std::string text, std::string_view from, std::string_view to) {
  const auto at = text.find(from);
  REQUIRE(at != std::string::npos);
  return text.replace(at, from.size(), to);
}

}  // namespace

TEST_CASE_FIXTURE(Compiled, "readback parsers read compiled outputs as the reference does") {
  const Parsed plan = agree_all(file("plan.json"));
  CHECK(plan.plans == 1);
  const Parsed manifest = agree_all(file("manifest.json"));
  CHECK(manifest.manifests == 1);
  for (int r = 0; r < 8; ++r) {
    const Parsed rank = agree_all(file("ranks/rank-" + std::to_string(r) + ".json"));
    CHECK(rank.ranks == 1);
    CHECK(rank.memories == 1);
  }
  std::string error;
  const auto plan_file = readback::parse_plan_file(file("plan.json"), error);
  REQUIRE(plan_file);
  REQUIRE(plan_file->per_rank_memory);  // compile writes summary.per_rank_memory
  CHECK(plan_file->per_rank_memory->kinds.back().first == "total");
  CHECK_FALSE(plan_file->params.front().rule.empty());
  const auto memory = readback::parse_rank_memory_file(file("ranks/rank-0.json"), error);
  REQUIRE(memory);
  CHECK(memory->rank == 0);
  CHECK(memory->world_size == 8);
  CHECK(memory->total > 0);
  const auto rank_file = readback::parse_rank_file(file("ranks/rank-0.json"), error);
  REQUIRE(rank_file);
  CHECK(rank_file->buffers.size() == 2);
  CHECK_FALSE(rank_file->buffers[0].groups.empty());
  CHECK_FALSE(rank_file->buffers[1].units.empty());
}

TEST_CASE_FIXTURE(Compiled, "readback parsers word hostile texts as the reference does") {
  const std::string rank = file("ranks/rank-0.json");
  const std::string plan = file("plan.json");
  const std::vector<std::string> texts = {
      // duplicate keys: nlohmann keeps the last
      edit(rank, "\"rank\":0,", "\"rank\":0,\"rank\":1,"),
      edit(rank, "\"rank\":0,", "\"rank\":\"x\",\"rank\":0,"),
      edit(rank, "\"tp\":0", "\"tp\":0,\"tp\":1"),
      edit(plan, "\"world_size\":8,", "\"world_size\":8,\"world_size\":8,"),
      // escapes and non-ASCII bytes (the reference reads these)
      edit(rank, "\"rank\":0,", "\"r\\u0061nk\":0,"),
      edit(rank, "emb.weight", "emb.w\\u00e9ight"),
      edit(rank, "emb.weight", "emb.w\xc3\xa9ight"),
      edit(rank, "emb.weight", "emb.w\\ud800ight"),
      "\xEF\xBB\xBF" + rank,
      // numbers
      edit(rank, "\"rank\":0,", "\"rank\":-0,"),
      edit(rank, "\"rank\":0,", "\"rank\":0.0,"),
      edit(rank, "\"rank\":0,", "\"rank\":0e0,"),
      edit(rank, "\"rank\":0,", "\"rank\":9223372036854775808,"),
      edit(rank, "\"rank\":0,", "\"rank\":18446744073709551616,"),
      edit(rank, "\"rank\":0,", "\"rank\":-9223372036854775809,"),
      edit(rank, "\"rank\":0,", "\"rank\":1e400,"),
      edit(rank, "\"stage\":0", "\"stage\":4294967296"),
      // syntax
      rank + " {}",
      rank + "x",
      edit(rank, "\"rank\":0,", "\"rank\":0,,"),
      edit(rank, "null", "nul"),
      rank.substr(0, rank.size() / 2),
      edit(rank, "\"rank\":0,", "\"rank\":0,\t\r"),
      edit(rank, "\"rank\":0,", "\"rank\":0,\x01"),
      edit(rank, "emb.weight", "emb.\tweight"),
      "",
      "[]",
      "5",
      std::string(2000, '[') + std::string(2000, ']'),
      // structure
      edit(rank, "\"params\":[", "\"params\":[],\"x\":["),
      edit(rank, "\"buffers\":[", "\"buffers\":{},\"y\":["),
  };
  int parsed = 0;
  for (const std::string& text : texts) {
    CAPTURE(text.substr(0, 120));
    parsed += agree_all(text).ranks;
  }
  CHECK(parsed > 0);  // duplicate keys that leave a valid file, -0, an escaped key
}

// Hostile muon sizes that pass every per-field bound but whose derived arithmetic would
// wrap int64 (UBSan caught none of these before the reader checked them): both readers
// refuse the file naming the field, no number wraps.
TEST_CASE_FIXTURE(Compiled, "readback refuses muon sizes whose derived numels wrap int64") {
  using nlohmann::json;
  json rank = json::parse(file("ranks/rank-0.json"));
  std::size_t emb = 0;
  while (rank["params"][emb]["name"] != "emb.weight") ++emb;
  const auto refused = [&](const json& tampered, const std::string& says) {
    std::string error;
    CHECK_FALSE(
        agree(tampered.dump(), &readback::parse_rank_file, &readback::parse_rank_file_reference));
    CHECK_FALSE(readback::parse_rank_file(tampered.dump(), error));
    CHECK_MESSAGE(error.find(says) != std::string::npos, error);
  };
  json& muon = rank["buffers"][0];
  REQUIRE(muon["kind"] == "muon_allgather");
  json* entry = nullptr;
  for (json& group : muon["groups"])
    for (json& param : group["params"])
      if (param["param"] == emb) entry = &param;
  REQUIRE(entry != nullptr);
  REQUIRE(entry->at("split_sizes").size() == 2);
  {
    // 2 x 2^40 rows gathered at stage 0, times a local width of 2^40: 2^81 elements.
    json tampered = rank;
    tampered["params"][emb]["local_shape"] = json::array({5, std::int64_t{1} << 40});
    for (json& group : tampered["buffers"][0]["groups"])
      for (json& param : group["params"])
        if (param["param"] == emb)
          param["split_sizes"][0] = json::array({json::array({std::int64_t{1} << 40, 2})});
    refused(tampered, "emb.weight to a shape of 2^62 elements or more");
  }
  {
    json tampered = rank;
    tampered["buffers"][0]["alignment_bytes"] = std::int64_t{1} << 62;
    refused(tampered, "must be in [1, 2^40]");
  }
  {
    json tampered = rank;
    tampered["buffers"][0]["groups"][0]["batches"][0]["total_numel"][0] = std::int64_t{1} << 62;
    refused(tampered, "times the stage's ranks passes 2^63 elements");
  }
  {
    // A stage tensor_dim outside the param's dims (verify reports it) is not gathered, so
    // no gathered shape bounds its split sizes; the slice-back start still sums them up to
    // the rank's index: 2^23 members of 2^40 rows sum to 2^63.
    json tampered = rank;
    for (json& group : tampered["buffers"][0]["groups"])
      for (json& param : group["params"])
        if (param["param"] == emb) {
          group["stages"][0]["tensor_dim"] = 7;
          group["stages"][0]["index"] = std::int64_t{1} << 23;
          param["split_sizes"][0] =
              json::array({json::array({std::int64_t{1} << 40, std::int64_t{1} << 23})});
        }
    refused(tampered, "split_sizes[0][0]: the split sizes sum to more than 2^62 elements");
  }
}

// Hostile shapes of an FSDP2 member (the held param's, which verify multiplies out in
// elements and in bytes): both readers refuse the file naming the member, no product wraps.
TEST_CASE_FIXTURE(Compiled, "readback refuses FSDP2 member shapes whose numels wrap int64") {
  using nlohmann::json;
  const json rank = json::parse(file("ranks/rank-0.json"));
  std::size_t emb = 0;
  while (rank["params"][emb]["name"] != "emb.weight") ++emb;
  REQUIRE(rank["buffers"][1]["kind"] == "fsdp2_allgather");
  const auto refused = [&](const char* field, const json& value, const std::string& says) {
    json tampered = rank;
    tampered["params"][emb][field] = value;
    std::string error;
    CHECK_FALSE(
        agree(tampered.dump(), &readback::parse_rank_file, &readback::parse_rank_file_reference));
    CHECK_FALSE(readback::parse_rank_file(tampered.dump(), error));
    CHECK_MESSAGE(error.find(says) != std::string::npos, error);
  };
  // 3037000500^2 > 2^63: numel(padded_shape) wrapped in verify's unit check.
  const json huge = json::array({std::int64_t{3037000500}, std::int64_t{3037000500}});
  refused("padded_shape", huge, "or padded_shape [3037000500, 3037000500] has a negative extent");
  // The FSDP2 simulator multiplied the local shape out.
  refused("local_shape", huge, "has a negative extent or 2^62 or more elements");
  // 2^61 elements are 2^64 bytes of float64: the unit's byte total wrapped.
  refused("padded_shape", json::array({std::int64_t{1} << 61}),
          "emb.weight: the unit's padded members pass 2^62 bytes");
}

TEST_CASE("readback parsers agree with the reference on the fuzz corpus") {
  const std::filesystem::path dir =
      std::filesystem::path(SHARDC_SOURCE_DIR) / "tests" / "fuzz" / "corpus" / "outputs";
  Parsed total;
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    std::ifstream in(entry.path(), std::ios::binary);
    std::ostringstream bytes;
    bytes << in.rdbuf();
    const std::string all = bytes.str();
    CAPTURE(entry.path().filename().string());
    // As the fuzz entry reads it: the whole input, and the file after the selector byte.
    for (const std::string_view text :
         {std::string_view(all), std::string_view(all).substr(all.empty() ? 0 : 1)}) {
      const Parsed parsed = agree_all(text);
      total.plans += parsed.plans;
      total.ranks += parsed.ranks;
      total.manifests += parsed.manifests;
    }
    ++files;
  }
  CHECK(files > 100);
  CHECK(total.plans > 10);
  CHECK(total.ranks > 10);
}
