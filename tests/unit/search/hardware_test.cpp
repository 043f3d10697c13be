// Hardware files and presets for `shardc search --hardware` (src/search/hardware.cpp).
#include <doctest/doctest.h>

#include <string>

#include "search/search.hpp"

using shardc::parse_hardware_text;

namespace {

// The error parse_hardware_text gives `text` ("" when it parses).
std::string error_of(const std::string& text) {
  std::string error;
  const auto hw = parse_hardware_text(text, error);
  return hw ? std::string() : error;
}

}  // namespace

TEST_CASE("a hardware file overrides a preset's fields") {
  std::string error;
  const auto hw = parse_hardware_text("preset: h800\npeak_tflops: 900  # measured\n", error);
  REQUIRE(hw.has_value());
  CHECK(hw->peak_flops == doctest::Approx(900e12));
  CHECK(hw->gpus_per_node == 8);
}

TEST_CASE("hardware files a fresh user wrote wrong get the reason, per key") {
  // Each was accepted, or refused as "unknown key or value out of range", before.
  CHECK(error_of("").find("holds no `key: value` line") != std::string::npos);
  CHECK(error_of("# only a comment\n").find("holds no") != std::string::npos);
  CHECK(error_of("preset: h100\npeak_tflops: 5\npeak_tflops: 900\n") ==
        "line 3: `peak_tflops` is given twice (first on line 2)");
  CHECK(error_of("preset: h100\ngemm_efficiency: 2\n").find("a fraction of the peak in (0, 1]") !=
        std::string::npos);
  CHECK(error_of("preset: h100\ngpus_per_node: 2.5\n").find("a whole number from 1 to 1024") !=
        std::string::npos);
  CHECK(error_of("this is not yaml ::::\n").find("unknown key `this is not yaml`") !=
        std::string::npos);
  CHECK(error_of("preset: h100\nhbm_gb: -1\n").find("needs a positive number") !=
        std::string::npos);
}

TEST_CASE("preset names are case-insensitive") {
  CHECK(shardc::hardware_preset("H100").has_value());
  CHECK(shardc::hardware_preset("MI300X").has_value());
  CHECK_FALSE(shardc::hardware_preset("h1000").has_value());
}

TEST_CASE("hardware file errors name the closest key, the presets, and the first bad line") {
  // Fresh-user findings (2026-12-05): a typo listed the keys twice with no suggestion; an
  // unknown preset's hint listed the keys; a model file given as --hardware was refused at
  // a repeated key on line 21; gpus_per_node 0 and 4.5 got two different ranges.
  CHECK(error_of("preset: h100\ngpus_per_nod: 4\n") ==
        "line 2: unknown key `gpus_per_nod`: did you mean `gpus_per_node`?");
  std::string error;
  std::string hint;
  CHECK_FALSE(parse_hardware_text("preset: h10\n", error, &hint).has_value());
  CHECK(error == "line 1: unknown preset `h10`");
  CHECK(hint == "presets: a100, h100, h800, h200, b200, mi300x");
  CHECK_FALSE(parse_hardware_text("peak_tflop: 900\n", error, &hint).has_value());
  CHECK(hint.rfind("keys: preset, name, peak_tflops", 0) == 0);
  CHECK(error_of("format: shardc.model/v1\nname: x\nparams:\nparams:\n") ==
        "line 1: unknown key `format`");
  CHECK(error_of("gpus_per_node: 0\n") ==
        "line 1: `gpus_per_node` needs a whole number from 1 to 1024, got `0`");
  CHECK(error_of("gpus_per_node: 4.5\n").find("a whole number from 1 to 1024") !=
        std::string::npos);
}
