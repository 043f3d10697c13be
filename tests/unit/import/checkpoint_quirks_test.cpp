// What a checkpoint says beyond its parameters (issue 27 items 3, 6, 8; docs/import.md):
// config precedence of tie_word_embeddings, sub-configs, buffers left out, integer tensors
// frozen, head-indexed params, and the compact model carrying sub-models, head_indexed and
// module_order through the front end unchanged.
#include <doctest/doctest.h>

#include <string>

#include "../driver/fake_file_system.hpp"
#include "core/fused.hpp"
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

bool has(const shardc::DiagnosticSink& sink, shardc::DiagCode code, const std::string& text) {
  for (const shardc::Diagnostic& d : sink.items())
    if (d.code == code && d.message.find(text) != std::string::npos) return true;
  return false;
}

}  // namespace

TEST_CASE("config.json: tie_word_embeddings from the top level, sub-configs with their aliases") {
  shardc::DiagnosticSink sink;
  const auto c = shardc::parse_hf_config(
      R"({"architectures": ["Qwen2_5_VLForConditionalGeneration"], "tie_word_embeddings": false,
          "text_config": {"num_attention_heads": 28, "num_key_value_heads": 4, "hidden_size": 3584,
                          "tie_word_embeddings": true},
          "vision_config": {"num_heads": 16, "hidden_size": 1280, "depth": 32}})",
      "config.json", sink);
  REQUIRE(c.has_value());
  CHECK(c->attributes.tie_word_embeddings == false);  // transformers ties by the top level
  CHECK(c->text_tie_word_embeddings == true);
  CHECK(c->tie_stated);
  CHECK(c->attributes.num_attention_heads == 28);  // text_config first
  REQUIRE(c->subconfigs.size() == 1);
  CHECK(c->subconfigs[0].config == "vision_config");
  CHECK(c->subconfigs[0].attributes.num_attention_heads == 16);  // `num_heads` (Qwen2.5-VL)
  CHECK(c->subconfigs[0].attributes.hidden_size == 1280);
}

TEST_CASE("known_head_indexed: gpt-oss sinks and Cohere per-head norms, not Qwen3's 1-D q_norm") {
  shardc::ModelAttributes a;
  a.num_attention_heads = 64;
  a.num_key_value_heads = 8;
  const auto sinks = shardc::known_head_indexed("model.layers.3.self_attn.sinks", {64}, a, "");
  REQUIRE(sinks);
  CHECK(sinks->dim == 0);
  CHECK_FALSE(sinks->kv);
  CHECK_FALSE(shardc::known_head_indexed("model.layers.3.self_attn.sinks", {32}, a, ""));
  const auto k = shardc::known_head_indexed("model.layers.0.self_attn.k_norm.weight", {8, 128}, a,
                                            "CohereForCausalLM");
  REQUIRE(k);
  CHECK(k->kv);
  CHECK_FALSE(shardc::known_head_indexed("model.layers.0.self_attn.q_norm.weight", {128}, a, ""));
  CHECK_FALSE(
      shardc::known_head_indexed("model.layers.0.self_attn.q_proj.weight", {64, 64}, a, ""));
}

TEST_CASE("import: buffers left out with a note, integer tensors frozen, sub-models by prefix") {
  shardc::test::FakeFileSystem fs;
  fs.dirs.insert("ck");
  fs.files["ck/config.json"] =
      R"({"architectures": ["Llama4ForConditionalGeneration"], "tie_word_embeddings": false,
          "text_config": {"num_attention_heads": 4, "num_key_value_heads": 2, "hidden_size": 8},
          "vision_config": {"num_attention_heads": 2, "hidden_size": 8},
          "quantization_config": {"quant_method": "bitsandbytes"}})";
  fs.files["ck/model.safetensors"] = st_file(
      R"({"language_model.model.layers.0.self_attn.rotary_emb.inv_freq": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
          "language_model.model.layers.0.self_attn.q_proj.weight": {"dtype": "I8", "shape": [8, 8], "data_offsets": [8, 72]},
          "language_model.model.layers.0.self_attn.q_proj.SCB": {"dtype": "F32", "shape": [8], "data_offsets": [72, 104]},
          "language_model.model.layers.0.self_attn.q_proj.weight_format": {"dtype": "U8", "shape": [], "data_offsets": [104, 105]},
          "vision_model.model.layers.0.self_attn.q_proj.weight": {"dtype": "BF16", "shape": [8, 8], "data_offsets": [105, 233]}})");
  fs.sparse_sizes["ck/model.safetensors"] =
      static_cast<std::int64_t>(fs.files["ck/model.safetensors"].size()) + 233;
  shardc::DiagnosticSink sink;
  auto im = shardc::import_checkpoint(fs, "ck", sink);
  REQUIRE(im.has_value());
  std::vector<std::string> names;
  for (const shardc::Param& p : im->model.params) {
    names.push_back(p.name);
    if (p.name.ends_with("q_proj.weight") && p.name.starts_with("language_model"))
      CHECK_FALSE(p.requires_grad);                              // int8
    if (p.name.ends_with(".SCB")) CHECK_FALSE(p.requires_grad);  // bitsandbytes state
  }
  CHECK(names.size() == 3);
  for (const std::string& n : names) {
    CHECK(n.find("inv_freq") == std::string::npos);
    CHECK(n.find("weight_format") == std::string::npos);
  }
  CHECK(has(sink, shardc::DiagCode::WCheckpoint, "left out 1 rotary inv_freq"));
  CHECK(has(sink, shardc::DiagCode::WCheckpoint, "left out 1 bitsandbytes weight_format"));
  REQUIRE(im->model.submodels.size() == 1);
  CHECK(im->model.submodels[0].prefix == "vision_model");
  CHECK(im->model.attributes_of("vision_model.model.layers.0.self_attn.q_proj.weight")
            .num_attention_heads == 2);
  CHECK(im->model.attributes_of("language_model.model.layers.0.self_attn.q_proj.weight")
            .num_attention_heads == 4);
  CHECK(im->model.module_order == "natural");  // no Llama-4 order rules

  // The compact model carries it all through the front end.
  const std::string yaml = shardc::render_model_yaml(*im);
  CHECK(yaml.find("module_order: natural\n") != std::string::npos);
  CHECK(yaml.find("submodels:\n  - {prefix: vision_model, config: vision_config, attributes: "
                  "{num_attention_heads: 2, hidden_size: 8}}\n") != std::string::npos);
  shardc::DiagnosticSink parse_sink;
  const auto back = shardc::parse_model(shardc::SourceFile{"m.yaml", yaml}, parse_sink);
  REQUIRE(back.has_value());
  CHECK(back->module_order == "natural");
  CHECK(has(parse_sink, shardc::DiagCode::WModuleOrder, "module_order: natural"));
  REQUIRE(back->submodels.size() == 1);
  CHECK(back->submodels[0].attributes.num_attention_heads == 2);
  CHECK(back->params.size() == im->model.params.size());
}

TEST_CASE("the model's head_indexed: entry is read and written back") {
  const std::string yaml =
      "format: shardc.model/v1\nname: m\nmodule_order: module\nparams:\n"
      "  - {name: a.self_attn.attn_bias, shape: [8, 2], head_indexed: {dim: 0, heads: kv}}\n";
  shardc::DiagnosticSink sink;
  const auto m = shardc::parse_model(shardc::SourceFile{"m.yaml", yaml}, sink);
  REQUIRE(m.has_value());
  CHECK_FALSE(sink.has_code(shardc::DiagCode::WModuleOrder));
  REQUIRE(m->params[0].head_indexed);
  CHECK(m->params[0].head_indexed->kv);
  shardc::ImportedModel im;
  im.model = *m;
  CHECK(shardc::render_model_yaml(im).find("head_indexed: {dim: 0, heads: kv}") !=
        std::string::npos);
  shardc::DiagnosticSink bad;
  CHECK_FALSE(shardc::parse_model(
      shardc::SourceFile{"m.yaml",
                         "format: shardc.model/v1\nparams:\n  - {name: a, shape: [4], "
                         "head_indexed: {dim: 1}}\n"},
      bad));
  CHECK(bad.has_errors());
}
