// Tests for JSON model descriptions and plain inventories (contract §3,
// shared/models/README.md): nlohmann/json with positions from the byte offsets.
#include <doctest/doctest.h>

#include "frontend_test_util.hpp"

using shardc::DiagCode;

using shardc::DType;
using shardc::test::check_error_at;
using shardc::test::model_from;

namespace {

// The shape of shared/models/*.params.json, cut down (gpt2's tie included).
constexpr const char* kInventory = R"({
 "model": "gpt2",
 "hf_repo": "openai-community/gpt2",
 "architecture": "GPT2LMHeadModel",
 "dtype": "float32",
 "tie_word_embeddings": true,
 "tied_weights": {
  "lm_head.weight": "transformer.wte.weight"
 },
 "param_count": 124439808,
 "num_tensors": 4,
 "attributes": {
  "vocab_size": 50257,
  "n_head": 12,
  "num_attention_heads": 12,
  "rope_scaling": null,
  "layer_norm_epsilon": 1e-05
 },
 "params": [
  {"name": "transformer.wte.weight", "shape": [50257, 768], "dtype": "float32"},
  {"name": "transformer.h.0.ln_1.weight", "shape": [768], "dtype": "F32"},
  {"name": "transformer.h.0.attn.c_attn.weight", "shape": [768, 2304], "dtype": "bfloat16"},
  {"name": "lm_head.weight", "shape": [50257, 768], "dtype": "float32"}
 ]
}
)";

}  // namespace

TEST_CASE("a plain inventory reads names, shapes, dtypes, ties and attributes") {
  auto parsed = model_from(kInventory, "gpt2.params.json");
  INFO(parsed.all_messages());
  REQUIRE(parsed.model.has_value());
  const auto& model = *parsed.model;
  CHECK(model.name == "gpt2");
  REQUIRE(model.params.size() == 4);
  CHECK(model.params[0].name == "transformer.wte.weight");
  CHECK(model.params[0].shape == shardc::Shape{50257, 768});
  CHECK(model.params[1].dtype == DType::Float32);
  CHECK(model.params[2].dtype == DType::BFloat16);
  CHECK(model.attributes.tie_word_embeddings == true);
  CHECK(model.attributes.num_attention_heads == 12);
  CHECK_FALSE(model.attributes.num_key_value_heads.has_value());
  REQUIRE(model.tied.size() == 1);
  CHECK(model.tied[0].source == "transformer.wte.weight");
  CHECK(model.tied[0].alias == "lm_head.weight");
  SUBCASE("locations point at each param object") {
    CHECK(model.params[0].loc.file == "gpt2.params.json");
    CHECK(model.params[0].loc.line == 20);
    CHECK(model.params[0].loc.column == 3);
    CHECK(model.params[3].loc.line == 23);
    CHECK(model.tied[0].loc.line == 8);
    CHECK(model.tied[0].loc.column == 3);
  }
}

TEST_CASE("a JSON shardc.model/v1 file may use repeat groups") {
  auto parsed = model_from(R"({"format": "shardc.model/v1", "dtype": "bf16",
  "params": [{"repeat": {"i": [0, 3]}, "params": [{"name": "l.{i}.w", "shape": [2]}]}]})",
                           "m.json");
  INFO(parsed.all_messages());
  REQUIRE(parsed.model.has_value());
  REQUIRE(parsed.model->params.size() == 3);
  CHECK(parsed.model->params[2].name == "l.2.w");
}

TEST_CASE("JSON errors carry exact line and column") {
  SUBCASE("syntax error") {
    check_error_at(model_from("{\n \"params\": [\n  {\"name\": \"a\", \"shape\": [2]}\n"
                              "  {\"name\": \"b\"}\n ]\n}\n",
                              "m.json"),
                   "E-MODEL", 4, 3);
  }
  SUBCASE("negative extent") {
    check_error_at(
        model_from("{\n \"params\": [\n  {\"name\": \"b\", \"shape\": [2, -3]}\n ]\n}", "m.json"),
        "E-MODEL", 3, 30);
  }
  SUBCASE("non-integer extents") {
    check_error_at(model_from("{\"params\": [{\"name\": \"b\", \"shape\": [1.5]}]}", "m.json"),
                   "E-MODEL", 1, 37);
    check_error_at(model_from("{\"params\": [{\"name\": \"b\", \"shape\": [\"4\"]}]}", "m.json"),
                   "E-MODEL", 1, 37);
  }
  SUBCASE("unknown key inside a param entry") {
    auto parsed =
        model_from("{\"params\": [{\"name\": \"b\", \"shape\": [1], \"bias\": true}]}", "m.json");
    check_error_at(parsed, "E-MODEL", 1, 41);
  }
  SUBCASE("truncated file") {
    CHECK_FALSE(model_from("{\"params\": [", "m.json").model.has_value());
  }
}

TEST_CASE("unknown top-level keys are ignored") {
  auto parsed = model_from(
      R"({"whatever": {"deep": [1, 2]}, "params": [{"name": "w", "shape": [1]}]})", "m.json");
  CHECK(parsed.model.has_value());
  CHECK(parsed.sink.items().empty());
}

TEST_CASE("extents beyond 64 bits and products of 2^62 are rejected") {
  SUBCASE("extent above int64") {
    auto parsed =
        model_from(R"({"params": [{"name": "w", "shape": [18446744073709551615]}]})", "m.json");
    CHECK_FALSE(parsed.model.has_value());
    CHECK(parsed.sink.has_code(DiagCode::EModel));
  }
  SUBCASE("product overflows") {
    auto parsed =
        model_from(R"({"params": [{"name": "w", "shape": [4294967296, 4294967296]}]})", "m.json");
    CHECK_FALSE(parsed.model.has_value());
    REQUIRE(parsed.find("E-MODEL") != nullptr);
    CHECK(parsed.find("E-MODEL")->message.find("2^62") != std::string::npos);
  }
  SUBCASE("just below the bound is fine") {
    auto parsed = model_from(R"({"params": [{"name": "w", "shape": [2147483648, 2147483647, 0]}]})",
                             "m.json");
    CHECK(parsed.model.has_value());
  }
}
