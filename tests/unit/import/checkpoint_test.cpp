// import_checkpoint on an in-memory directory: index, config, ties, order,
// cross-file problems.
#include <doctest/doctest.h>

#include <string>

#include "../driver/fake_file_system.hpp"
#include "frontend/frontend.hpp"
#include "import/import.hpp"

namespace {

std::string st_file(const std::string& json) {
  std::string len(8, '\0');
  for (int i = 0; i < 8; ++i) {
    len[static_cast<std::size_t>(i)] = static_cast<char>((json.size() >> (8 * i)) & 0xff);
  }
  return len + json;
}

void tied_checkpoint(shardc::test::FakeFileSystem& fs) {
  fs.dirs.insert("ck");
  fs.files["ck/config.json"] =
      R"({"architectures": ["Qwen2ForCausalLM"], "_name_or_path": "Qwen/Tiny", "tie_word_embeddings": true,
          "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 16, "hidden_size": 8})";
  fs.files["ck/model-00001-of-00002.safetensors"] = st_file(
      R"({"model.norm.weight": {"dtype": "BF16", "shape": [8], "data_offsets": [0, 16]},
          "model.embed_tokens.weight": {"dtype": "BF16", "shape": [16, 8], "data_offsets": [16, 272]}})");
  fs.files["ck/model-00002-of-00002.safetensors"] = st_file(
      R"({"model.layers.0.self_attn.q_proj.bias": {"dtype": "BF16", "shape": [8], "data_offsets": [0, 16]},
          "model.layers.0.self_attn.q_proj.weight": {"dtype": "BF16", "shape": [8, 8], "data_offsets": [16, 144]}})");
  fs.files["ck/model.safetensors.index.json"] = R"({"metadata": {}, "weight_map": {
      "model.embed_tokens.weight": "model-00001-of-00002.safetensors",
      "model.norm.weight": "model-00001-of-00002.safetensors",
      "model.layers.0.self_attn.q_proj.bias": "model-00002-of-00002.safetensors",
      "model.layers.0.self_attn.q_proj.weight": "model-00002-of-00002.safetensors"}})";
  // the data (zeros): exactly what the offsets cover, as safetensors requires
  for (const auto& [file, data] : {std::pair{"ck/model-00001-of-00002.safetensors", 272},
                                   std::pair{"ck/model-00002-of-00002.safetensors", 144}}) {
    fs.sparse_sizes[file] = static_cast<std::int64_t>(fs.files[file].size()) + data;
  }
}

}  // namespace

TEST_CASE("a sharded, tied checkpoint: module order, lm_head alias, attributes, name") {
  shardc::test::FakeFileSystem fs;
  tied_checkpoint(fs);
  shardc::DiagnosticSink sink;
  auto im = shardc::import_checkpoint(fs, "ck", sink);
  REQUIRE(im.has_value());
  CHECK(sink.items().empty());
  const auto& model = im->model;
  CHECK(model.name == "Tiny");
  REQUIRE(model.params.size() == 5);
  CHECK(model.params[0].name == "model.embed_tokens.weight");
  CHECK(model.params[1].name == "model.layers.0.self_attn.q_proj.weight");
  CHECK(model.params[2].name == "model.layers.0.self_attn.q_proj.bias");
  CHECK(model.params[3].name == "model.norm.weight");
  CHECK(model.params[4].name == "lm_head.weight");
  CHECK(model.params[4].shape == shardc::Shape{16, 8});
  REQUIRE(model.tied.size() == 1);
  CHECK(model.tied[0].source == "model.embed_tokens.weight");
  CHECK(model.tied[0].alias == "lm_head.weight");
  CHECK(model.attributes.num_attention_heads == 4);
  CHECK(model.attributes.vocab_size == 16);
  CHECK(model.attributes.tie_word_embeddings == true);  // transformers' default
  CHECK(model.sha256 == shardc::sha256_hex(shardc::render_model_yaml(*im)));
}

TEST_CASE("an index naming a missing file, and names repeated across files") {
  SUBCASE("missing file") {
    shardc::test::FakeFileSystem fs;
    tied_checkpoint(fs);
    fs.files.erase("ck/model-00002-of-00002.safetensors");
    shardc::DiagnosticSink sink;
    CHECK_FALSE(shardc::import_checkpoint(fs, "ck", sink).has_value());
    REQUIRE(sink.has_code(shardc::DiagCode::ECheckpoint));
    CHECK(sink.items()[0].message.find("model-00002-of-00002.safetensors") != std::string::npos);
    CHECK(sink.items()[0].param == "model.layers.0.self_attn.q_proj.bias");
  }
  SUBCASE("duplicate across files (no index)") {
    shardc::test::FakeFileSystem fs;
    tied_checkpoint(fs);
    fs.files.erase("ck/model.safetensors.index.json");
    fs.files["ck/model-00003-of-00003.safetensors"] =
        fs.files["ck/model-00001-of-00002.safetensors"];
    fs.sparse_sizes["ck/model-00003-of-00003.safetensors"] =
        fs.sparse_sizes["ck/model-00001-of-00002.safetensors"];
    shardc::DiagnosticSink sink;
    CHECK_FALSE(shardc::import_checkpoint(fs, "ck", sink).has_value());
    REQUIRE(sink.has_code(shardc::DiagCode::ECheckpoint));
    CHECK(sink.items()[0].message.find("also stored in") != std::string::npos);
  }
  SUBCASE("absurd head count in config.json") {
    shardc::test::FakeFileSystem fs;
    tied_checkpoint(fs);
    fs.files["ck/config.json"] = R"({"num_attention_heads": 4611686018427387904})";
    shardc::DiagnosticSink sink;
    CHECK_FALSE(shardc::import_checkpoint(fs, "ck", sink).has_value());
    CHECK(sink.has_code(shardc::DiagCode::ECheckpoint));
    CHECK(sink.items()[0].loc.file == "ck/config.json");
  }
}

TEST_CASE("the compact writer folds repeated blocks and round-trips") {
  shardc::ImportedModel im;
  im.model.name = "t";
  im.source = "t.json";
  for (int i = 0; i < 3; ++i) {
    im.model.params.push_back(
        {"layers." + std::to_string(i) + ".w", {4, 4}, shardc::DType::BFloat16, true, {}});
  }
  im.model.params.push_back({"norm", {4}, shardc::DType::Float32, false, {}});
  const std::string yaml = shardc::render_model_yaml(im);
  CHECK(yaml.find("- repeat: {i: [0, 3]}\n    params:\n      - {name: \"layers.{i}.w\", shape: [4, "
                  "4]}\n") != std::string::npos);
  CHECK(yaml.find("- {name: norm, shape: [4], dtype: float32, requires_grad: false}") !=
        std::string::npos);
  CHECK(yaml == shardc::render_model_yaml(im));
}

TEST_CASE("the compact writer keeps the indices of nested lone blocks in place") {
  // fuzz_import (tests/fuzz/corpus/import/crash-6e74ae2f): two lone numbered blocks nested
  // in one name came back with their indices swapped (a.5120.b.0 for a.0.b.5120).
  shardc::ImportedModel im;
  im.model.name = "t";
  im.source = "t.json";
  for (const char* name : {"modelayers.0.mlp.u7.5120", "a.3.b.7.c.11.w", "a.3.b.8.c.11.w"})
    im.model.params.push_back({name, {2, 2}, shardc::DType::BFloat16, true, {}});
  const std::string yaml = shardc::render_model_yaml(im);
  shardc::DiagnosticSink sink;
  const auto back = shardc::parse_model(shardc::SourceFile{"m.yaml", yaml}, sink);
  REQUIRE(back);
  REQUIRE(back->params.size() == im.model.params.size());
  for (std::size_t i = 0; i < im.model.params.size(); ++i)
    CHECK(back->params[i].name == im.model.params[i].name);
}
