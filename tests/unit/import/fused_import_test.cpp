// import_checkpoint writes `fused:` where the architecture decides a layout the
// name does not (gpt-oss's interleaved gate|up), and import --format json lists it.
#include <doctest/doctest.h>

#include <string>

#include "../driver/fake_file_system.hpp"
#include "import/import.hpp"

namespace {

std::string st_file(const std::string& json) {
  std::string len(8, '\0');
  for (int i = 0; i < 8; ++i) {
    len[static_cast<std::size_t>(i)] = static_cast<char>((json.size() >> (8 * i)) & 0xff);
  }
  return len + json;
}

}  // namespace

TEST_CASE("a gpt-oss checkpoint: gate_up_proj and its bias are interleaved gate|up") {
  shardc::test::FakeFileSystem fs;
  fs.dirs.insert("ck");
  fs.files["ck/config.json"] =
      R"({"architectures": ["GptOssForCausalLM"], "model_type": "gpt_oss", "hidden_size": 64,
          "num_attention_heads": 4, "num_key_value_heads": 1, "head_dim": 16,
          "num_local_experts": 4, "intermediate_size": 48, "tie_word_embeddings": false})";
  fs.files["ck/model.safetensors"] = st_file(
      R"({"model.layers.0.mlp.experts.gate_up_proj": {"dtype": "BF16", "shape": [4, 64, 96], "data_offsets": [0, 49152]},
          "model.layers.0.mlp.experts.gate_up_proj_bias": {"dtype": "BF16", "shape": [4, 96], "data_offsets": [49152, 49920]},
          "model.layers.0.mlp.experts.down_proj": {"dtype": "BF16", "shape": [4, 48, 64], "data_offsets": [49920, 74496]}})");
  fs.sparse_sizes["ck/model.safetensors"] =
      static_cast<std::int64_t>(fs.files["ck/model.safetensors"].size()) + 74496;
  shardc::DiagnosticSink sink;
  auto im = shardc::import_checkpoint(fs, "ck", sink);
  REQUIRE(im.has_value());
  int fused = 0;
  for (const shardc::Param& param : im->model.params) {
    if (param.name.ends_with("down_proj")) {
      CHECK_FALSE(param.fused);
      continue;
    }
    REQUIRE(param.fused);
    CHECK(param.fused->groups == 48);
    CHECK(param.fused->dim == static_cast<int>(param.shape.size()) - 1);
    ++fused;
  }
  CHECK(fused == 2);
  const std::string yaml = shardc::render_model_yaml(*im);
  CHECK(yaml.find(
            "shape: [4, 64, 96], fused: {parts: 2, dim: 2, interleave: 1, names: [gate, up]}") !=
        std::string::npos);
  const std::string json = shardc::render_model_json(*im);
  CHECK(json.find(R"("order": "interleaved")") != std::string::npos);
  // The experts stay pre-stacked; the header names the recipe entry that places them.
  CHECK(yaml.find("# experts: pre-stacked [4, ...] expert tensors; a recipe places them with "
                  "`experts: [{match: \"model.layers.*.mlp.experts.*\", stacked_dim: 0, "
                  "placements: {ep: Shard(0)}}]` (docs/experts.md)\n") != std::string::npos);
}

TEST_CASE("an inventory of transformers 5's fused Mixtral experts gets the experts entry") {
  // MixtralExperts (transformers/models/mixtral/modeling_mixtral.py): gate_up_proj
  // [E, 2 x inter, hidden], down_proj [E, hidden, inter]; the router's [E, hidden] is no
  // `experts.<tensor>` and gets no entry.
  shardc::DiagnosticSink sink;
  auto im =
      shardc::import_model_file("mixtral.params.json",
                                R"({"model": "mixtral-fused", "architecture": "MixtralForCausalLM",
          "attributes": {"hidden_size": 64, "num_experts": 8},
          "params": [
           {"name": "model.layers.0.mlp.gate.weight", "shape": [8, 64], "dtype": "bfloat16"},
           {"name": "model.layers.0.mlp.experts.gate_up_proj", "shape": [8, 256, 64], "dtype": "bfloat16"},
           {"name": "model.layers.0.mlp.experts.down_proj", "shape": [8, 64, 128], "dtype": "bfloat16"}]})",
                                sink);
  REQUIRE(im.has_value());
  std::size_t entries = 0;
  for (const auto& [key, value] : im->comments)
    if (key == "experts") {
      ++entries;
      CHECK(value.find(R"({match: "model.layers.*.mlp.experts.*", stacked_dim: 0)") !=
            std::string::npos);
    }
  CHECK(entries == 1);
}
