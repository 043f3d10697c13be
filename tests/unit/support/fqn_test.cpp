// fqn_problem (the name rule of every reader) and checked_numel (shapes from untrusted files).
#include <doctest/doctest.h>

#include "support/fqn.hpp"
#include "support/limits.hpp"
#include "support/shape.hpp"

using shardc::fqn_problem;

TEST_CASE("one FQN rule: control characters, empty names and segments, braces for literal names") {
  CHECK(fqn_problem("model.layers.0.mlp.up_proj.weight", false).empty());
  CHECK(fqn_problem("model.caf\xc3\xa9.w", false).empty());  // UTF-8 is fine
  CHECK(fqn_problem("", false) == "is empty");
  CHECK(fqn_problem("model.w\nerror[E-FAKE]: x", false) ==
        "contains whitespace or a control character");
  CHECK(fqn_problem("model.\x1b[31mred.w", false) == "contains whitespace or a control character");
  CHECK(fqn_problem(std::string_view("model.x\0evil", 12), false) ==
        "contains whitespace or a control character");
  CHECK(fqn_problem("model.a b", false) == "contains whitespace or a control character");
  CHECK(fqn_problem("model.w\x7f", false) == "contains whitespace or a control character");
  CHECK(fqn_problem("....", false) == "has an empty segment");
  CHECK(fqn_problem("../../etc/passwd", false) == "has an empty segment");
  CHECK(fqn_problem("model.w.", false) == "has an empty segment");
  CHECK(fqn_problem("model.\xff.w", false) == "is not valid UTF-8");
  CHECK(fqn_problem("model.**.{E}.w", false) == "contains `{` or `}`");
  CHECK(fqn_problem("model.layers.{i}.w", true).empty());  // a model YAML's repeat variable
}

TEST_CASE("checked_numel: negative extents and 2^62 elements refused, zeros count as 1") {
  using shardc::checked_numel;
  constexpr std::int64_t kMax = shardc::limits::kMaxNumel;  // 2^62
  CHECK(checked_numel({}) == 1);
  CHECK(checked_numel({kMax - 1}) == kMax - 1);
  CHECK_FALSE(checked_numel({kMax}));
  CHECK_FALSE(checked_numel({-1, 4}));
  CHECK_FALSE(checked_numel({std::int64_t{1} << 31, std::int64_t{1} << 31}));
  CHECK(checked_numel({std::int64_t{1} << 30, std::int64_t{1} << 31}) == std::int64_t{1} << 61);
  CHECK(checked_numel({0, kMax - 1}) == 0);
  CHECK_FALSE(checked_numel({0, kMax}));
  CHECK_FALSE(checked_numel({4611686018427387903, 64}));
}
