// Hostile model and recipe inputs: each must give a diagnostic, never a
// crash, a hang or a huge allocation.
#include <doctest/doctest.h>

#include <string>

#include "frontend_test_util.hpp"

using shardc::DiagCode;

using shardc::test::model_from;
using shardc::test::recipe_from;

namespace {

std::string billion_laughs() {
  std::string text = "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n";
  for (int i = 1; i < 10; ++i) {
    std::string prev = "*a" + std::to_string(i - 1);
    text += "a" + std::to_string(i) + ": &a" + std::to_string(i) + " [";
    for (int k = 0; k < 10; ++k) text += (k > 0 ? ", " : "") + prev;
    text += "]\n";
  }
  return text + "params: *a9\n";
}

}  // namespace

TEST_CASE("YAML alias bombs stop at the node budget") {
  auto parsed = model_from(billion_laughs());
  CHECK_FALSE(parsed.model.has_value());
  REQUIRE(parsed.find("E-MODEL") != nullptr);
  CHECK(parsed.find("E-MODEL")->message.find("aliases") != std::string::npos);
  auto rr = recipe_from(billion_laughs());
  CHECK(rr.sink.has_code(DiagCode::ERecipe));
}

TEST_CASE("deep nesting is rejected") {
  SUBCASE("JSON") {
    std::string text = "{\"params\": " + std::string(100000, '[') + std::string(100000, ']') + "}";
    auto parsed = model_from(text, "m.json");
    CHECK_FALSE(parsed.model.has_value());
    CHECK(parsed.sink.has_code(DiagCode::EModel));
  }
  SUBCASE("YAML flow") {
    std::string text = "params: " + std::string(5000, '[') + std::string(5000, ']') + "\n";
    auto parsed = model_from(text);
    CHECK_FALSE(parsed.model.has_value());
    CHECK(parsed.sink.has_code(DiagCode::EModel));
  }
  SUBCASE("repeat groups") {
    std::string text = "params:\n";
    std::string indent = "  ";
    for (int i = 0; i < 70; ++i) {
      text += indent + "- repeat: {v" + std::to_string(i) + ": [0, 1]}\n" + indent + "  params:\n";
      indent += "    ";
    }
    text += indent + "- {name: w, shape: [1]}\n";
    auto parsed = model_from(text);
    CHECK_FALSE(parsed.model.has_value());
    CHECK(parsed.sink.has_code(DiagCode::EModel));
  }
}

TEST_CASE("huge repeat ranges are rejected before expansion") {
  SUBCASE("one range") {
    auto parsed = model_from(
        "params:\n  - repeat: {i: [0, 1000000000000]}\n    params:\n"
        "      - {name: \"w.{i}\", shape: [1]}\n");
    CHECK_FALSE(parsed.model.has_value());
    REQUIRE(parsed.find("E-MODEL") != nullptr);
    CHECK(parsed.find("E-MODEL")->loc.line == 2);
  }
  SUBCASE("a product of ranges") {
    auto parsed = model_from(
        "params:\n  - repeat: {i: [0, 100000], j: [0, 100000]}\n    params:\n"
        "      - {name: \"w.{i}.{j}\", shape: [1]}\n");
    CHECK_FALSE(parsed.model.has_value());
    CHECK(parsed.sink.has_code(DiagCode::EModel));
  }
  SUBCASE("the full int64 range does not overflow the count") {
    auto parsed = model_from(
        "params:\n  - repeat: {i: [-9223372036854775808, 9223372036854775807]}\n"
        "    params:\n      - {name: \"w.{i}\", shape: [1]}\n");
    CHECK_FALSE(parsed.model.has_value());
    CHECK(parsed.sink.has_code(DiagCode::EModel));
  }
}

TEST_CASE("junk and empty files give a diagnostic") {
  SUBCASE("empty") {
    CHECK(model_from("").sink.has_code(DiagCode::EModel));
    CHECK(model_from("  \n\n").sink.has_code(DiagCode::EModel));
    CHECK(recipe_from("").sink.has_code(DiagCode::ERecipe));
  }
  SUBCASE("binary junk") {
    std::string junk;
    unsigned state = 12345;
    for (int i = 0; i < 4096; ++i) {
      state = state * 1103515245u + 12345u;
      junk.push_back(static_cast<char>(state >> 16));
    }
    auto parsed = model_from(junk);
    CHECK_FALSE(parsed.model.has_value());
    CHECK(parsed.sink.has_code(DiagCode::EModel));
    for (const auto& d : parsed.sink.items()) CHECK(d.message.find('\xff') == std::string::npos);
    CHECK(recipe_from(junk).sink.has_code(DiagCode::ERecipe));
    CHECK(model_from("{" + junk, "m.json").sink.has_code(DiagCode::EModel));
  }
  SUBCASE("a scalar document") { CHECK(model_from("42\n").sink.has_code(DiagCode::EModel)); }
  SUBCASE("a list document") { CHECK(model_from("- a\n- b\n").sink.has_code(DiagCode::EModel)); }
  SUBCASE("non-UTF-8 names") {
    auto parsed = model_from("params:\n  - {name: \"a\xff.b\", shape: [1]}\n");
    CHECK_FALSE(parsed.model.has_value());
    REQUIRE(parsed.find("E-MODEL") != nullptr);
    CHECK(parsed.find("E-MODEL")->message.find("UTF-8") != std::string::npos);
  }
  SUBCASE("wrong types everywhere") {
    auto parsed = model_from("params: {a: 1}\nattributes: [1]\ntied: 3\ndtype: [x]\n");
    CHECK_FALSE(parsed.model.has_value());
    CHECK(parsed.sink.error_count() >= 3);
  }
}
