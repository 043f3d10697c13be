// Tests for src/support/limits.hpp: docs/limits.md states each limit with
// the header's value (rendered here from the value itself, so a changed
// constant fails until the page says the same).
#include <doctest/doctest.h>

#include <bit>
#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "support/limits.hpp"

namespace {

// The page docs/limits.md (one table of limits and its notes).
std::string limits_table() {
  std::ifstream in(std::string(SHARDC_SOURCE_DIR) + "/docs/limits.md");
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  REQUIRE(text.rfind("# Input limits\n", 0) == 0);
  return text;
}

// The docs/limits.md row whose last cell names `constant`.
std::string row_of(const std::string& table, const std::string& constant) {
  const auto at = table.find("`" + constant + "`");
  REQUIRE_MESSAGE(at != std::string::npos, constant << " is not in docs/limits.md");
  const auto begin = table.rfind('\n', at) + 1;
  return table.substr(begin, table.find('\n', at) - begin);
}

// 8000000 -> "8,000,000".
std::string grouped(std::uint64_t value) {
  std::string digits = std::to_string(value);
  for (int i = static_cast<int>(digits.size()) - 3; i > 0; i -= 3) {
    digits.insert(static_cast<std::size_t>(i), ",");
  }
  return digits;
}

// 2^k -> "2^k", 2^k - 1 -> "2^k - 1".
std::string power(std::uint64_t value) {
  if (std::has_single_bit(value)) return "2^" + std::to_string(std::countr_zero(value));
  REQUIRE(std::has_single_bit(value + 1));
  return "2^" + std::to_string(std::countr_zero(value + 1)) + " - 1";
}

template <typename T>
std::uint64_t u(T value) {
  return static_cast<std::uint64_t>(value);
}

// Every `inline constexpr ... kName` of src/support/limits.hpp.
std::vector<std::string> header_constants() {
  std::ifstream in(std::string(SHARDC_SOURCE_DIR) + "/src/support/limits.hpp");
  std::vector<std::string> names;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("inline constexpr", 0) != 0) continue;
    const auto k = line.find(" k");
    const auto end = line.find_first_of(" =", k + 1);
    if (k != std::string::npos && end != std::string::npos)
      names.push_back(line.substr(k + 1, end - k - 1));
  }
  return names;
}

}  // namespace

TEST_CASE("every constant of src/support/limits.hpp has a docs/limits.md row") {
  const std::string table = limits_table();
  const std::vector<std::string> names = header_constants();
  CHECK(names.size() >= 20);
  for (const std::string& name : names) {
    CAPTURE(name);
    CHECK(table.find("`" + name + "`") != std::string::npos);
  }
}

TEST_CASE("docs/limits.md states the values of src/support/limits.hpp") {
  namespace L = shardc::limits;
  const std::string table = limits_table();
  auto says = [&](const std::string& constant, const std::string& text) {
    CAPTURE(constant);
    CAPTURE(text);
    CHECK(row_of(table, constant).find(text) != std::string::npos);
  };
  says("kMaxInputBytes", std::to_string(u(L::kMaxInputBytes) >> 20) + " MiB");
  says("kMaxDocNodes", "min(" + grouped(L::kMaxDocNodes) + ", ");
  says("kYamlNodesPerByte",
       std::to_string(L::kYamlNodesPerByte) + " x file bytes + " + grouped(L::kYamlNodesExtra));
  says("kMaxDocDepth", std::to_string(L::kMaxDocDepth) + " levels");
  says("kMaxExpandedParams", grouped(L::kMaxExpandedParams));
  says("kMaxRepeatDepth", std::to_string(L::kMaxRepeatDepth) + " levels");
  says("kMaxNumel", "numel < " + power(u(L::kMaxNumel)));
  says("kMaxWorld", "<= " + power(u(L::kMaxWorld)));
  says("kMaxFsdpDim",
       "[-" + std::to_string(L::kMaxFsdpDim) + ", " + std::to_string(L::kMaxFsdpDim) + "]");
  says("kMaxRankSetItems", power(u(L::kMaxRankSetItems)) + " items");
  says("kMaxByteSize", "at most " + power(u(L::kMaxByteSize)) + " bytes");
  says("kMaxPadOrUnit", "[1, " + power(u(L::kMaxPadOrUnit)) + "] rows");
  says("kMaxAlignmentBytes", "in [1, " + power(u(L::kMaxAlignmentBytes)) + "] bytes");
  says("kMaxParts", "1 to " + std::to_string(L::kMaxParts) + " parts");
  says("kMaxPatternBytes", std::to_string(L::kMaxPatternBytes) + " bytes");
  says("kMaxPatternSegments", std::to_string(L::kMaxPatternSegments) + " `.`-separated segments");
  says("kMaxCaptureNames", std::to_string(L::kMaxCaptureNames) + " distinct `{name}` captures");
  says("kMaxSafetensorsHeaderBytes",
       "<= " + std::to_string(u(L::kMaxSafetensorsHeaderBytes) / 1'000'000) + " MB");
  says("kMaxTensorRank", "rank <= " + std::to_string(L::kMaxTensorRank) + " dims");
  says("kMaxTensorRank", "numel < " + power(u(L::kMaxNumel)));
  says("kMaxHeaderErrorsPerFile", std::to_string(L::kMaxHeaderErrorsPerFile) + " errors listed");
  says("kMaxCheckpointJsonBytes", std::to_string(u(L::kMaxCheckpointJsonBytes) >> 20) + " MiB");
  says("kMaxConfigCount", "[1, " + power(u(L::kMaxConfigCount)) + "]");
  says("kMaxPlanBytes", "up to " + std::to_string(u(L::kMaxPlanBytes) >> 30) + " GiB");
  says("kMaxManifestBytes",
       "manifest.json up to " + std::to_string(u(L::kMaxManifestBytes) >> 30) + " GiB");
  says("kMaxStoredDiagnostics", std::to_string(L::kMaxStoredDiagnostics) + " (");
}
