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
