#include "frontend/yaml_errors.hpp"

#include <doctest/doctest.h>

using shardc::fe::explain_yaml_error;

TEST_CASE("a tab in the indentation is named, at the tab") {
  const char* text = "format: shardc.recipe/v1\nmesh:\n\t- {name: dp, size: 2}\n";
  auto help = explain_yaml_error(text, 2, 1, "illegal block entry");
  REQUIRE(help);
  CHECK(help->line == 3);
  CHECK(help->column == 1);
  CHECK(help->message ==
        "malformed YAML: a tab in the indentation of line 3 (YAML forbids tabs for indentation)");
}

TEST_CASE("a dedent slip names the key and the parent it lost") {
  const char* text =
      "format: shardc.recipe/v1\nmesh:\n  - {name: dp_shard, size: 2}\nfsdp:\n"
      "  shard: dp_shard\n dim: 0\n";
  auto help = explain_yaml_error(text, 5, 1, "end of map not found");
  REQUIRE(help);
  CHECK(help->line == 6);
  CHECK(help->column == 2);
  CHECK(help->message ==
        "malformed YAML: `dim` on line 6 is indented 1 space, less than `shard` on line 5 (2), "
        "and matches no enclosing block: it lost its parent `fsdp` (line 4)");
}

TEST_CASE("a key slipped out of a list entry names the entry") {
  const char* text = "rules:\n  - match: \"**\"\n   placements: {}\n";
  auto help = explain_yaml_error(text, 2, 3, "end of sequence not found");
  REQUIRE(help);
  CHECK(help->line == 3);
  CHECK(help->message.find("it lost its parent the entry at line 2") != std::string::npos);
}

TEST_CASE("specific yaml-cpp messages are kept") {
  CHECK_FALSE(explain_yaml_error("a: [1, 2\n", 1, 0, "end of sequence flow not found"));
  CHECK_FALSE(explain_yaml_error("a:\n  b: 1\n", 1, 2, "unknown escape character"));
}
