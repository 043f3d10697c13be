// Tests for src/support/pattern_*.cpp (contract §4 "Patterns", §5.8).
#include <doctest/doctest.h>

#include <string>

#include "support/pattern.hpp"

using shardc::Captures;
using shardc::Pattern;

namespace {

Pattern compiled(std::string_view text) {
  std::string error;
  std::optional<Pattern> pattern = Pattern::compile(text, error);
  REQUIRE_MESSAGE(pattern.has_value(), error);
  return *pattern;
}

bool matches(std::string_view pattern, std::string_view fqn) {
  return compiled(pattern).match(fqn);
}

std::string compile_error(std::string_view text) {
  std::string error;
  std::optional<Pattern> pattern = Pattern::compile(text, error);
  CHECK_FALSE(pattern.has_value());
  return error;
}

}  // namespace

TEST_CASE("a literal pattern matches only the same name") {
  CHECK(matches("model.norm.weight", "model.norm.weight"));
  CHECK_FALSE(matches("model.norm.weight", "model.norm.bias"));
  CHECK_FALSE(matches("model.norm.weight", "model.norm.weight.x"));
  CHECK_FALSE(matches("model.norm.weight", "model.norm"));
}

TEST_CASE("a star matches within one segment, possibly nothing") {
  CHECK(matches("model.layers.*.mlp", "model.layers.12.mlp"));
  CHECK_FALSE(matches("model.layers.*.mlp", "model.layers.1.2.mlp"));
  CHECK(matches("*norm.weight", "norm.weight"));
  CHECK(matches("*norm.weight", "input_layernorm.weight"));
  CHECK(matches("a*b*c", "abc"));
  CHECK(matches("a*b*c", "axxbyyc"));
  CHECK_FALSE(matches("a*b*c", "axxbyy"));
  CHECK(matches("*", "scale"));
  CHECK_FALSE(matches("*", "a.b"));
  CHECK(matches("*_proj", "q_proj"));
}

TEST_CASE("a double star matches any number of whole segments including none") {
  CHECK(matches("**", "a"));
  CHECK(matches("**", "a.b.c"));
  CHECK(matches("**.*norm.weight", "norm.weight"));
  CHECK(matches("**.*norm.weight", "model.layers.0.input_layernorm.weight"));
  CHECK_FALSE(matches("**.*norm.weight", "model.layers.0.input_layernorm.bias"));
  CHECK(matches("model.**", "model.x.y"));
  CHECK(matches("model.**", "model"));
  CHECK(matches("a.**.b", "a.b"));
  CHECK(matches("a.**.b", "a.x.y.b"));
  CHECK_FALSE(matches("a.**.b", "a.x.y.c"));
  SUBCASE("several double stars backtrack correctly") {
    CHECK(matches("**.experts.**.weight", "model.layers.3.mlp.experts.7.up.weight"));
    CHECK_FALSE(matches("**.experts.**.bias", "model.layers.3.mlp.experts.7.up.weight"));
    CHECK(matches("**.**.x", "x"));
  }
}

TEST_CASE("question marks and character classes match one character") {
  CHECK(matches("blk.*.e?.p1.weight", "blk.0.e1.p1.weight"));
  CHECK_FALSE(matches("blk.*.e?.p1.weight", "blk.0.e12.p1.weight"));
  CHECK(matches("self_attn.[qkv]_proj", "self_attn.k_proj"));
  CHECK_FALSE(matches("self_attn.[qkv]_proj", "self_attn.o_proj"));
  CHECK(matches("layers.[0-3]", "layers.2"));
  CHECK_FALSE(matches("layers.[0-3]", "layers.4"));
  CHECK(matches("[!o]_proj", "q_proj"));
  CHECK_FALSE(matches("[!o]_proj", "o_proj"));
  CHECK(matches("[]]x", "]x"));
}

TEST_CASE("captures bind whole segments in first-binding order") {
  Pattern pattern = compiled("model.layers.{L}.mlp.experts.{E}.{P}.weight");
  Captures caps;
  REQUIRE(pattern.match("model.layers.3.mlp.experts.17.gate_proj.weight", &caps));
  REQUIRE(caps.size() == 3);
  CHECK(caps[0] == std::pair<std::string, std::string>{"L", "3"});
  CHECK(caps[1] == std::pair<std::string, std::string>{"E", "17"});
  CHECK(caps[2] == std::pair<std::string, std::string>{"P", "gate_proj"});
  CHECK(pattern.capture_names() == std::vector<std::string>{"L", "E", "P"});
  CHECK_FALSE(pattern.match("model.layers.3.mlp.experts.17.weight", &caps));
}

TEST_CASE("a capture name used twice must bind the same value") {
  CHECK(matches("a.{x}.b.{x}", "a.1.b.1"));
  CHECK_FALSE(matches("a.{x}.b.{x}", "a.1.b.2"));
  SUBCASE("backtracking through double stars finds the consistent binding") {
    Pattern pattern = compiled("**.{x}.**.{x}");
    Captures caps;
    CHECK(pattern.match("q.a.b.c.b", &caps));
    REQUIRE(caps.size() == 1);
    CHECK(caps[0].second == "b");
    CHECK_FALSE(pattern.match("q.a.b.c.d"));
  }
}

TEST_CASE("captures are cleared before a match fills them") {
  Pattern pattern = compiled("x.{i}");
  Captures caps{{"old", "1"}};
  REQUIRE(pattern.match("x.5", &caps));
  REQUIRE(caps.size() == 1);
  CHECK(caps[0].first == "i");
}

TEST_CASE("pattern syntax errors are reported with a reason") {
  SUBCASE("empty pattern") { CHECK(compile_error("").find("empty") != std::string::npos); }
  SUBCASE("empty segment") {
    CHECK(compile_error("a..b").find("empty segment") != std::string::npos);
  }
  SUBCASE("trailing dot") { CHECK_FALSE(compile_error("a.").empty()); }
  SUBCASE("unclosed class") { CHECK(compile_error("a.[bc").find("unclosed") != std::string::npos); }
  SUBCASE("unclosed capture") { CHECK_FALSE(compile_error("a.{x").empty()); }
  SUBCASE("capture inside a segment, not at its end, or after a glob") {
    CHECK(compile_error("a.{x}p").find("whole segment") != std::string::npos);
    CHECK(compile_error("a.p*{x}").find("whole segment") != std::string::npos);
    CHECK(compile_error("a.{x}{y}").find("whole segment") != std::string::npos);
  }
  SUBCASE("double star inside a segment") {
    CHECK(compile_error("a**.b").find("whole segment") != std::string::npos);
  }
  SUBCASE("bad capture name") { CHECK_FALSE(compile_error("a.{1x}").empty()); }
  SUBCASE("inverted range") { CHECK(compile_error("[z-a]").find("inverted") != std::string::npos); }
}

TEST_CASE("a capture may end a segment after a literal prefix (grouped-GEMM weight{E})") {
  const Pattern pattern = compiled("decoder.layers.{L}.mlp.experts.linear_fc1.weight{E}");
  Captures caps;
  REQUIRE(pattern.match("decoder.layers.3.mlp.experts.linear_fc1.weight17", &caps));
  CHECK(caps == Captures{{"L", "3"}, {"E", "17"}});
  CHECK_FALSE(pattern.match("decoder.layers.3.mlp.experts.linear_fc1.weight"));  // nothing to bind
  CHECK_FALSE(pattern.match("decoder.layers.3.mlp.experts.linear_fc1.bias17"));
  CHECK_FALSE(pattern.match("decoder.layers.3.mlp.experts.linear_fc1.weight17.x"));
  // a repeated name compares the rest of the segment
  CHECK(matches("a.{E}.b.w{E}", "a.5.b.w5"));
  CHECK_FALSE(matches("a.{E}.b.w{E}", "a.5.b.w6"));
  CHECK(Pattern::substitute("x.weight{E}", {{"E", "4"}}) == "x.weight4");
}

TEST_CASE("substitute replaces captures and rejects unbound names") {
  Captures caps{{"L", "3"}, {"P", "up_proj"}};
  CHECK(Pattern::substitute("model.layers.{L}.mlp.experts.{P}", caps) ==
        "model.layers.3.mlp.experts.up_proj");
  CHECK_FALSE(Pattern::substitute("x.{E}", caps).has_value());
  CHECK_FALSE(Pattern::substitute("x.{L", caps).has_value());
  CHECK(Pattern::substitute("plain", caps) == "plain");
}

TEST_CASE("matching many double stars against a long name stays fast") {
  std::string fqn;
  for (int i = 0; i < 200; ++i) fqn += "s" + std::to_string(i) + ".";
  fqn += "end";
  Pattern pattern = compiled("**.a.**.b.**.c.**.d.**.e.**.f");
  for (int i = 0; i < 100; ++i) CHECK_FALSE(pattern.match(fqn));
  CHECK(compiled("**.s199.**.end").match(fqn));
}
