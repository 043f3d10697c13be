// FQN patterns used by rules, experts, pipeline stages and FSDP units
// (contract §4 "Patterns", §5.8).
//
// A pattern is dot-separated segments. Within a segment: `*` matches any
// run of characters (possibly empty) but never a dot, `?` one character,
// `[abc]` / `[a-z]` / `[!abc]` a character class, `{name}` captures one
// whole segment (it must be the whole segment). A segment that is exactly
// `**` matches any number of whole segments, including none. A capture name
// used twice must bind the same value.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace shardc {

/// Values bound by `{name}` captures, in first-binding order.
using Captures = std::vector<std::pair<std::string, std::string>>;

class Pattern {
 public:
  /// Compiles `text`. On a syntax error (empty pattern, empty segment,
  /// unclosed `[` or `{`, `{}` neither a whole segment nor the end of one
  /// after a literal prefix (`weight{E}`), `**` inside a segment)
  /// returns nullopt and sets `error` to a one-line reason.
  static std::optional<Pattern> compile(std::string_view text, std::string& error);

  /// True when the whole FQN matches. `captures`, when given, receives the
  /// bound `{name}` values (cleared first).
  [[nodiscard]] bool match(std::string_view fqn, Captures* captures = nullptr) const;

  [[nodiscard]] const std::string& text() const { return text_; }
  /// Names of `{name}` captures in order of first appearance.
  [[nodiscard]] const std::vector<std::string>& capture_names() const { return names_; }
  /// Replaces every `{name}` in `templ` by its bound value; nullopt if a name is unbound.
  static std::optional<std::string> substitute(std::string_view templ, const Captures& captures);

  struct Segment {
    enum class Kind { Glob, DoubleStar, Capture };
    Kind kind = Kind::Glob;
    std::string text;  ///< glob text, or capture name
    /// Capture: the literal text before `{name}` in its segment (`weight`
    /// of `weight{E}`, Megatron's grouped-GEMM `linear_fc1.weight7`); the
    /// capture then binds the rest of the segment, which must not be empty.
    std::string prefix;
    bool literal = false;       ///< Glob without metacharacters: plain comparison
    int slot = -1;              ///< Capture: index into capture_names()
    bool bound_before = false;  ///< Capture: the same name appears earlier
    bool memo_ok = true;        ///< DoubleStar: result does not depend on earlier bindings
  };

 private:
  std::string text_;
  std::vector<Segment> segments_;
  std::vector<std::string> names_;
  int double_stars_ = 0;
};

}  // namespace shardc
