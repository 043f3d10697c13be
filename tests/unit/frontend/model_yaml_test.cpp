// Tests for the shardc.model/v1 reader (src/frontend/model_*.cpp, contract §3).
#include <doctest/doctest.h>

#include "frontend_test_util.hpp"

using shardc::DType;
using shardc::test::check_error_at;
using shardc::test::model_from;

namespace {

// Mirrors shared/cases/29_repeat_nested/model.yaml.
constexpr const char* kNested = R"(format: shardc.model/v1
name: repeat-nested
dtype: bfloat16
params:
  - {name: embed.weight, shape: [6, 4]}
  - repeat: {L: [0, 2]}
    params:
      - {name: "blk.{L}.attn.weight", shape: [4, 4]}
      - repeat: {E: [1, 3], P: [0, 2]}
        params:
          - {name: "blk.{L}.e{E}.p{P}.weight", shape: [3, 4], dtype: float32}
      - {name: "blk.{L}.norm.weight", shape: [4]}
)";

}  // namespace

TEST_CASE("nested repeats expand in module order with the first variable slowest") {
  auto parsed = model_from(kNested);
  INFO(parsed.all_messages());
  REQUIRE(parsed.model.has_value());
  const auto& params = parsed.model->params;
  std::vector<std::string> names;
  for (const auto& param : params) names.push_back(param.name);
  std::vector<std::string> expected{"embed.weight"};
  for (int l = 0; l < 2; ++l) {
    expected.push_back("blk." + std::to_string(l) + ".attn.weight");
    for (int e = 1; e < 3; ++e) {
      for (int p = 0; p < 2; ++p) {
        expected.push_back("blk." + std::to_string(l) + ".e" + std::to_string(e) + ".p" +
                           std::to_string(p) + ".weight");
      }
    }
    expected.push_back("blk." + std::to_string(l) + ".norm.weight");
  }
  CHECK(names == expected);
  CHECK(parsed.model->name == "repeat-nested");
  CHECK(params[0].dtype == DType::BFloat16);
  CHECK(params[2].dtype == DType::Float32);
  CHECK(params[2].shape == shardc::Shape{3, 4});
  CHECK(params[2].loc.line == 11);
  CHECK(params[2].loc.column == 13);
  CHECK(params[0].requires_grad);
  CHECK(parsed.model->sha256.size() == 64);
}

TEST_CASE("a model reads attributes, requires_grad, scalars and explicit ties") {
  auto parsed = model_from(R"(format: shardc.model/v1
name: tiny
dtype: bf16
attributes: {num_attention_heads: 32, num_key_value_heads: 8, num_experts: 0,
             tie_word_embeddings: true, rope_theta: 500000.0}
params:
  - {name: model.embed_tokens.weight, shape: [10, 4]}
  - {name: scale, shape: [], dtype: torch.float32, requires_grad: false}
  - {name: lm_head.weight, shape: [10, 4]}
tied: [[model.embed_tokens.weight, lm_head.weight]]
)");
  INFO(parsed.all_messages());
  REQUIRE(parsed.model.has_value());
  const auto& model = *parsed.model;
  CHECK(model.attributes.num_attention_heads == 32);
  CHECK(model.attributes.num_key_value_heads == 8);
  CHECK(model.attributes.num_experts == 0);
  CHECK(model.attributes.num_experts_loc.line == 4);
  CHECK(model.attributes.tie_word_embeddings == true);
  CHECK(model.params[1].shape.empty());
  CHECK_FALSE(model.params[1].requires_grad);
  CHECK(model.params[1].dtype == DType::Float32);
  REQUIRE(model.tied.size() == 1);
  CHECK(model.tied[0].source == "model.embed_tokens.weight");
  CHECK(model.tied[0].alias == "lm_head.weight");
}

TEST_CASE("GPT-2's config names n_embd, n_head, n_layer and n_inner read as the standard sizes") {
  // transformers' GPT2Config.attribute_map; search counted no activations for gpt2 (its
  // model file has n_embd, not hidden_size) and ranked layouts by a peak without them.
  auto parsed = model_from(R"(format: shardc.model/v1
name: gpt2
dtype: float32
attributes: {n_embd: 768, n_head: 12, n_layer: 12, n_inner: 3072}
params:
  - {name: w, shape: [2]}
)");
  INFO(parsed.all_messages());
  REQUIRE(parsed.model.has_value());
  CHECK(parsed.model->attributes.hidden_size == 768);
  CHECK(parsed.model->attributes.num_attention_heads == 12);
  CHECK(parsed.model->attributes.num_hidden_layers == 12);
  CHECK(parsed.model->attributes.intermediate_size == 3072);
  // The standard name wins when both are written, in either order.
  auto both = model_from(R"(format: shardc.model/v1
name: both
attributes: {n_embd: 1, hidden_size: 64, num_attention_heads: 4, n_head: 2}
params:
  - {name: w, shape: [2]}
)");
  REQUIRE(both.model.has_value());
  CHECK(both.model->attributes.hidden_size == 64);
  CHECK(both.model->attributes.num_attention_heads == 4);
}

TEST_CASE("a model without a dtype defaults to float32") {
  auto parsed = model_from("params:\n  - {name: w, shape: [2]}\n");
  REQUIRE(parsed.model.has_value());
  CHECK(parsed.model->params[0].dtype == DType::Float32);
}

TEST_CASE("model errors carry the line and column of the offending node") {
  SUBCASE("negative extent") {
    check_error_at(model_from("params:\n  - {name: w, shape: [4, -1]}\n"), "E-MODEL", 2, 26);
  }
  SUBCASE("non-integer extent") {
    check_error_at(model_from("params:\n  - {name: w, shape: [1.5]}\n"), "E-MODEL", 2, 23);
  }
  SUBCASE("quoted extent") {
    check_error_at(model_from("params:\n  - {name: w, shape: [\"4\"]}\n"), "E-MODEL", 2, 23);
  }
  SUBCASE("unknown dtype") {
    auto parsed = model_from("params:\n  - name: w\n    shape: [4]\n    dtype: float128\n");
    check_error_at(parsed, "E-MODEL", 4, 12);
    CHECK(parsed.find("E-MODEL")->hint.find("bfloat16") != std::string::npos);
  }
  SUBCASE("unknown key in a param entry") {
    auto parsed = model_from("params:\n  - name: w\n    shape: [4]\n    shapes: [4]\n");
    check_error_at(parsed, "E-MODEL", 4, 5);
    CHECK(parsed.find("E-MODEL")->hint.find("requires_grad") != std::string::npos);
  }
  SUBCASE("duplicate FQN names both locations") {
    auto parsed = model_from("params:\n  - {name: w, shape: [4]}\n  - {name: w, shape: [4]}\n");
    check_error_at(parsed, "E-MODEL", 3, 5);
    CHECK(parsed.find("E-MODEL")->hint.find("model.yaml:2:5") != std::string::npos);
  }
  SUBCASE("unsupported format") {
    check_error_at(model_from("format: shardc.model/v9\nparams: []\n"), "E-MODEL", 1, 9);
  }
  SUBCASE("missing params") { check_error_at(model_from("name: x\n"), "E-MODEL", 1, 1); }
}

TEST_CASE("bad repeat groups are reported") {
  SUBCASE("unused variable") {
    check_error_at(model_from("params:\n  - repeat: {i: [0, 2], j: [0, 2]}\n    params:\n"
                              "      - {name: \"a.{i}\", shape: [1]}\n"),
                   "E-MODEL", 2, 25);
  }
  SUBCASE("unbound variable") {
    auto parsed = model_from(
        "params:\n  - repeat: {i: [0, 2]}\n    params:\n"
        "      - {name: \"a.{i}.{k}\", shape: [1]}\n");
    check_error_at(parsed, "E-MODEL", 4, 16);
    CHECK(parsed.find("E-MODEL")->message.find("{k}") != std::string::npos);
  }
  SUBCASE("empty range") {
    check_error_at(model_from("params:\n  - repeat: {i: [3, 3]}\n    params:\n"
                              "      - {name: \"a.{i}\", shape: [1]}\n"),
                   "E-MODEL", 2, 17);
  }
  SUBCASE("inverted range") {
    auto parsed = model_from(
        "params:\n  - repeat: {i: [5, 2]}\n    params:\n"
        "      - {name: \"a.{i}\", shape: [1]}\n");
    REQUIRE(parsed.find("E-MODEL") != nullptr);
    CHECK(parsed.find("E-MODEL")->message.find("inverted") != std::string::npos);
  }
  SUBCASE("range that is not a pair") {
    CHECK_FALSE(model_from("params:\n  - repeat: {i: 4}\n    params:\n"
                           "      - {name: \"a.{i}\", shape: [1]}\n")
                    .model.has_value());
  }
  SUBCASE("shadowed variable") {
    auto parsed = model_from(
        "params:\n  - repeat: {i: [0, 2]}\n    params:\n"
        "      - repeat: {i: [0, 2]}\n        params:\n"
        "          - {name: \"a.{i}\", shape: [1]}\n");
    REQUIRE(parsed.find("E-MODEL") != nullptr);
    CHECK(parsed.find("E-MODEL")->message.find("already bound") != std::string::npos);
  }
  SUBCASE("braces outside a repeat") {
    CHECK_FALSE(model_from("params:\n  - {name: \"a.{i}\", shape: [1]}\n").model.has_value());
  }
}

TEST_CASE("several model errors are reported in one run") {
  auto parsed = model_from(
      "params:\n  - {name: a, shape: [-1]}\n  - {name: b, shape: [2], dtype: x}\n"
      "  - {name: c, shape: [2], colour: red}\n");
  CHECK_FALSE(parsed.model.has_value());
  CHECK(parsed.sink.error_count() == 3);
}

namespace {

// A flat YAML model: `plain` params one by one, then one `repeat` group of `grouped`.
std::string flat_yaml(int plain, int grouped) {
  std::string text = "format: shardc.model/v1\nname: flat\ndtype: bfloat16\nparams:\n";
  for (int i = 0; i < plain; ++i) {
    text += "  - {name: \"layers." + std::to_string(i) + ".w\", shape: [4, 4]}\n";
  }
  text += "  - repeat: {i: [0, " + std::to_string(grouped) + "]}\n";
  text += "    params:\n      - {name: \"g.{i}.w\", shape: [4]}\n";
  return text;
}

}  // namespace

TEST_CASE("a YAML model with more than 10,000 plain params gets W-FLAT-YAML at `params`") {
  auto big = model_from(flat_yaml(10'001, 2));
  INFO(big.all_messages());
  REQUIRE(big.model.has_value());
  CHECK(big.model->params.size() == 10'003);
  const shardc::Diagnostic* d = big.find("W-FLAT-YAML");
  REQUIRE(d != nullptr);
  CHECK(d->loc.line == 4);
  CHECK(d->loc.column == 1);
  CHECK(d->message.find("10001 params one by one") != std::string::npos);
  CHECK(d->hint.find("repeat") != std::string::npos);
  // At the threshold, or with the params in `repeat` groups, no warning.
  CHECK(model_from(flat_yaml(10'000, 50'000)).find("W-FLAT-YAML") == nullptr);
  // JSON inventories are read fast: no warning for them.
  std::string json = "{\"params\": [";
  for (int i = 0; i < 10'001; ++i) {
    json +=
        std::string(i ? ", " : "") + "{\"name\": \"l" + std::to_string(i) + "\", \"shape\": [4]}";
  }
  json += "]}";
  auto inventory = model_from(json, "m.json");
  REQUIRE(inventory.model.has_value());
  CHECK(inventory.find("W-FLAT-YAML") == nullptr);
}
