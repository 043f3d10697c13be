// Tests for src/core/diag_code.hpp: the typed code table and the
// table of docs/diagnostics.md (generated from it by tools/update-docs,
// checked byte for byte by CTest docs/diagnostics) agree row for row.
#include <doctest/doctest.h>

#include <cctype>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "core/diag_code.hpp"

namespace {

std::string read_diagnostics_page() {
  std::ifstream in(std::string(SHARDC_SOURCE_DIR) + "/docs/diagnostics.md");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string trim(const std::string& text) {
  const auto begin = text.find_first_not_of(' ');
  const auto end = text.find_last_not_of(' ');
  return begin == std::string::npos ? std::string() : text.substr(begin, end - begin + 1);
}

// The page's "exit" cell for a code: its exit class; a warning's applies
// under --strict only.
std::string exit_text(const shardc::DiagCodeInfo& info) {
  const std::string exit_text = std::to_string(static_cast<int>(info.exit));
  return info.severity == shardc::Severity::Error ? exit_text : exit_text + " with `--strict`";
}

// The cells of every "| E-XXX | exit | meaning | fix |" row of the
// generated table of docs/diagnostics.md, in page order.
std::vector<std::vector<std::string>> page_rows() {
  const std::string text = read_diagnostics_page();
  const auto start = text.find("\n<!-- generated from src/core/diag_code.hpp");
  REQUIRE(start != std::string::npos);
  const auto end = text.find("\n<!-- end of generated table -->", start + 1);
  REQUIRE(end != std::string::npos);
  std::istringstream section(text.substr(start, end - start));
  std::vector<std::vector<std::string>> rows;
  for (std::string line; std::getline(section, line);) {
    if (line.rfind("| E-", 0) != 0 && line.rfind("| W-", 0) != 0) continue;
    std::vector<std::string> cells;
    std::size_t pos = 1;
    while (pos < line.size()) {
      const auto bar = line.find(" | ", pos);
      if (bar == std::string::npos) {
        cells.push_back(trim(line.substr(pos, line.size() - 1 - pos)));
        break;
      }
      cells.push_back(trim(line.substr(pos, bar - pos)));
      pos = bar + 2;
    }
    rows.push_back(cells);
  }
  return rows;
}

}  // namespace

TEST_CASE(
    "every diagnostic code has one docs/diagnostics.md row with the same exit, meaning and fix") {
  const auto rows = page_rows();
  std::map<std::string, std::vector<std::string>> by_name;
  for (const auto& cells : rows) {
    CAPTURE(cells.front());
    CHECK(shardc::find_diag_code(cells.front()).has_value());
    CHECK(by_name.emplace(cells.front(), cells).second);  // one row per code
  }
  for (const shardc::DiagCodeInfo& info : shardc::kDiagCodes) {
    CAPTURE(info.name);
    const auto it = by_name.find(std::string(info.name));
    REQUIRE(it != by_name.end());
    REQUIRE(it->second.size() == 4);
    CHECK(it->second[1] == exit_text(info));
    CHECK(it->second[2] == info.meaning);
    CHECK(it->second[3] == info.fix);
  }
  // Same order as the enum, so the page reads like the header.
  REQUIRE(rows.size() == shardc::kDiagCodes.size());
  for (std::size_t i = 0; i < rows.size(); ++i) {
    CHECK(rows[i].front() == shardc::kDiagCodes[i].name);
  }
}

TEST_CASE("the page's exit-code paragraph names every error of exit class 2") {
  const std::string text = read_diagnostics_page();
  const auto start = text.find("\n<!-- generated exit codes from src/core/diag_code.hpp");
  REQUIRE(start != std::string::npos);
  const auto end = text.find("\n<!-- end of generated exit codes -->", start + 1);
  REQUIRE(end != std::string::npos);
  const std::string paragraph = text.substr(start, end - start);
  for (const shardc::DiagCodeInfo& info : shardc::kDiagCodes) {
    CAPTURE(info.name);
    const bool usage =
        info.severity == shardc::Severity::Error && info.exit == shardc::ExitCode::Usage;
    const std::string named = std::string(info.name);
    const auto at = paragraph.find(named);
    const bool listed =
        at != std::string::npos &&
        (at + named.size() == paragraph.size() ||
         (std::isalnum(static_cast<unsigned char>(paragraph[at + named.size()])) == 0 &&
          paragraph[at + named.size()] != '-'));
    CHECK(listed == usage);  // E-TRAINING exits 2 and was left out
  }
}

TEST_CASE("every code has a tests/bad case (or the test docs/diagnostics.md names instead)") {
  namespace fs = std::filesystem;
  const fs::path root(SHARDC_SOURCE_DIR);
  std::string expects;
  for (const auto& entry : fs::directory_iterator(root / "tests/bad")) {
    std::ifstream in(entry.path() / "expect.json");
    std::stringstream ss;
    ss << in.rdbuf();
    expects += ss.str();
  }
  const std::map<std::string, std::string> elsewhere = {
      {"W-MODULE-ORDER", "tests/e2e/test_import.py"},
      {"E-HF-TP-PLAN", "tests/unit/import/hf_tp_plan_test.cpp"},
      {"E-SEARCH", "tests/e2e/test_search.py"},
      {"E-HARDWARE", "tests/e2e/test_search.py"},
      {"E-OUTPUT", "tests/e2e/test_output_safety.py"},
      {"E-PLAN-FILE", "tests/e2e/test_commit.py"}};
  for (const shardc::DiagCodeInfo& info : shardc::kDiagCodes) {
    CAPTURE(info.name);
    const std::string quoted = "\"" + std::string(info.name) + "\"";
    if (expects.find(quoted) != std::string::npos) continue;
    const auto other = elsewhere.find(std::string(info.name));
    REQUIRE(other != elsewhere.end());
    std::ifstream in(root / other->second);
    std::stringstream ss;
    ss << in.rdbuf();
    const std::string text = ss.str();
    std::string enumerator = "DiagCode::" + std::string(1, info.name[0]);
    for (std::size_t i = 2; i < info.name.size(); ++i) {
      const char ch = info.name[i];
      if (ch == '-') continue;
      const bool upper = info.name[i - 1] == '-';
      enumerator += upper ? ch : static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    }
    CHECK((text.find(std::string(info.name)) != std::string::npos ||
           text.find(enumerator) != std::string::npos));
  }
}

TEST_CASE("codes name their severity and exit class") {
  using shardc::DiagCode;
  for (const shardc::DiagCodeInfo& info : shardc::kDiagCodes) {
    CAPTURE(info.name);
    CHECK(info.name.size() > 2);
    CHECK((info.name[0] == 'E') == (info.severity == shardc::Severity::Error));
    CHECK(shardc::find_diag_code(info.name) == info.code);
  }
  // Input that cannot be read or parsed exits 2; everything else that is an
  // error exits 1.
  CHECK(shardc::diag_code_info(DiagCode::EModel).exit == shardc::ExitCode::Usage);
  CHECK(shardc::diag_code_info(DiagCode::ERecipe).exit == shardc::ExitCode::Usage);
  CHECK(shardc::diag_code_info(DiagCode::ECheckpoint).exit == shardc::ExitCode::Usage);
  CHECK(shardc::diag_code_info(DiagCode::EReshardInput).exit == shardc::ExitCode::Usage);
  CHECK(shardc::diag_code_info(DiagCode::EReshardCoverage).exit == shardc::ExitCode::Invalid);
  CHECK(shardc::diag_code_info(DiagCode::EPad).exit == shardc::ExitCode::Invalid);
  CHECK(shardc::diag_code_info(DiagCode::EMesh).exit == shardc::ExitCode::Invalid);
  CHECK(shardc::diag_code_info(DiagCode::EExperts).exit == shardc::ExitCode::Invalid);
  CHECK(shardc::code_name(DiagCode::EShardDim) == "E-SHARD-DIM");
  CHECK_FALSE(shardc::find_diag_code("E-NOPE").has_value());
}
