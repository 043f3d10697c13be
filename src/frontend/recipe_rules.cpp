// Recipe `rules` and `experts` entries, placements and patterns (contract §4, §5.4).
#include <algorithm>
#include <span>
#include <string>

#include "frontend/recipe_internal.hpp"

namespace shardc::fe {
namespace {

constexpr std::string_view kPatternHint =
    "patterns are dot-separated segments: `*` within a segment, `**` any number of segments, "
    "`?` one character, `[abc]` a class, `{name}` a whole segment";
constexpr std::string_view kPlacementHint =
    "valid: Shard(d) (d may be negative), Replicate(), Partial(), Partial(sum|avg|min|max), "
    "_StridedShard(d, sf=F) (a shard order, docs/shard-order.md); "
    "hyper-parallel DSL: shard(d), replicate, partial";

// The patterns of `match` (one or a list) and where each is written.
bool parse_match_list(const Node& n, Reader& r, Rule& rule) {
  if (n.is_seq() && n.items().empty()) {
    r.error(n, "`match` is an empty list", "give one pattern or a list of patterns");
    return false;
  }
  std::span<const Node> nodes = n.is_seq() ? n.items() : std::span<const Node>(&n, 1);
  bool ok = true;
  for (const Node& item : nodes) {
    std::optional<Pattern> p = parse_pattern(item, r);
    ok = p.has_value() && ok;
    if (!p) continue;
    rule.match.push_back(std::move(*p));
    rule.match_locs.push_back(r.loc(item));
  }
  return ok;
}

// One part written as a map: `{size: S, name: q, replicas: R}` (recipe.hpp PackedSpec).
bool parse_part(const Node& item, Reader& r, PackedSpec& spec) {
  constexpr std::string_view hint =
      "a part is an extent or `{size: S, name: k, replicas: R}` (R consecutive tp ranks hold "
      "the same piece of it: vLLM's num_kv_head_replicas = tp / KV heads)";
  bool ok = r.check_keys(item, {"size", "name", "replicas"}, "a packed part");
  const Node* size = item.find("size");
  if (size == nullptr) {
    r.error(item, "a packed part needs `size` (its extent on the packed dim)", std::string(hint));
    ok = false;
  }
  const auto v =
      size ? parse_bounded(*size, r, "a part's `size`", 0, std::int64_t{1} << 62) : std::nullopt;
  ok = v.has_value() && ok;
  std::string name;
  if (const Node* n = item.find("name")) {
    const auto got = r.get_string(*n, "a part's `name`");
    ok = got.has_value() && ok;
    name = got.value_or("");
  }
  std::int64_t replicas = 1;
  if (const Node* n = item.find("replicas")) {
    const auto got = parse_bounded(*n, r, "a part's `replicas`", 1, limits::kMaxWorld);
    ok = got.has_value() && ok;
    replicas = got.value_or(1);
    if (replicas > 1 && spec.replicas_loc.line == 0) spec.replicas_loc = r.loc(*n);
  }
  // Earlier plain extents get their default name and replica count.
  spec.names.resize(spec.sizes.size());
  spec.replicas.resize(spec.sizes.size(), 1);
  spec.sizes.push_back(v.value_or(0));
  spec.names.push_back(std::move(name));
  spec.replicas.push_back(replicas);
  return ok;
}

// `packed: {parts: N | [sizes or part maps], dim: d, interleave: k | groups: G}`.
std::optional<PackedSpec> parse_packed(const Node& n, Reader& r) {
  constexpr std::string_view hint =
      "e.g. `packed: {parts: 2}` (SwiGLU [W; V] on dim 0) or `packed: {parts: [4096, 1024, "
      "1024], dim: 0}` (fused q|k|v)";
  if (!r.expect_map(n, "`packed`")) return std::nullopt;
  bool ok = r.check_keys(n, {"parts", "dim", "interleave", "groups"}, "`packed`");
  PackedSpec spec;
  spec.loc = r.loc(n);
  const Node* parts = n.find("parts");
  if (parts == nullptr) {
    r.error(n, "`packed` needs `parts` (a count or a list of extents)", std::string(hint));
    return std::nullopt;
  }
  if (parts->is_seq()) {
    if (parts->items().empty() || static_cast<std::int64_t>(parts->items().size()) > kMaxParts) {
      r.error(*parts, "`parts` must list 1.." + std::to_string(kMaxParts) + " extents",
              std::string(hint));
      return std::nullopt;
    }
    bool maps = false;
    for (const Node& item : parts->items()) maps = maps || item.is_map();
    for (const Node& item : parts->items()) {
      if (!item.is_map()) {
        const auto v = parse_bounded(item, r, "a part extent", 0, std::int64_t{1} << 62);
        ok = v.has_value() && ok;
        spec.sizes.push_back(v.value_or(0));
        if (maps) spec.names.emplace_back(), spec.replicas.push_back(1);
        continue;
      }
      const auto part = parse_part(item, r, spec);
      ok = part && ok;
    }
  } else {
    const auto v = parse_bounded(*parts, r, "`parts`", 1, kMaxParts);
    ok = v.has_value() && ok;
    spec.count = v.value_or(1);
  }
  if (const Node* dim = n.find("dim")) {
    const auto d = parse_bounded(*dim, r, "`packed.dim`", -64, 63);
    ok = d.has_value() && ok;
    spec.dim = static_cast<int>(d.value_or(0));
  }
  const Node* interleave = n.find("interleave");
  const Node* groups = n.find("groups");
  if (interleave != nullptr && groups != nullptr) {
    r.error(*groups, "`packed` takes `interleave` or `groups`, not both",
            "`interleave: k`: equal parts alternating in blocks of k elements (gpt-oss gate|up: "
            "1); `groups: G`: G groups, each holding its share of every part (Megatron "
            "linear_qkv: G = query groups)");
    return std::nullopt;
  }
  if (interleave != nullptr) {
    const auto v = parse_bounded(*interleave, r, "`packed.interleave`", 1, std::int64_t{1} << 62);
    ok = v.has_value() && ok;
    spec.interleave = v.value_or(1);
  }
  if (groups != nullptr) {
    const auto v = parse_bounded(*groups, r, "`packed.groups`", 1, std::int64_t{1} << 62);
    ok = v.has_value() && ok;
    spec.groups = v.value_or(1);
  }
  if (!ok) return std::nullopt;
  return spec;
}

std::optional<Rule> parse_rule(const Node& n, Reader& r) {
  if (!r.expect_map(n, "a rule")) return std::nullopt;
  bool ok = r.check_keys(
      n, {"match", "placements", "uneven", "unit", "packed", "vocab_padding", "shard_order"},
      "a rule");
  Rule rule;
  rule.loc = r.loc(n);
  const Node* match = n.find("match");
  const Node* placements = n.find("placements");
  if (match == nullptr || placements == nullptr) {
    r.error(n, std::string("a rule needs `") + (match == nullptr ? "match" : "placements") + "`",
            "e.g. `- {match: \"model.layers.*.mlp.down_proj.weight\", placements: {tp: "
            "Shard(1)}}`; use `placements: {}` for replicated");
    return std::nullopt;
  }
  const bool patterns = parse_match_list(*match, r, rule);
  std::optional<std::vector<AxisPlacement>> places = parse_placements(*placements, r);
  ok = patterns && places && ok;
  if (const Node* uneven = n.find("uneven")) {
    rule.uneven = parse_split_rule(*uneven, r, &rule.pad_multiple);
    ok = rule.uneven.has_value() && ok;
  }
  if (const Node* unit = n.find("unit")) {
    const auto u = parse_bounded(*unit, r, "`unit`", 1, kMaxPadOrUnit);
    ok = u.has_value() && ok;
    rule.unit = u.value_or(1);
  }
  if (const Node* packed = n.find("packed")) {
    rule.packed = parse_packed(*packed, r);
    ok = rule.packed.has_value() && ok;
  }
  // `vocab_padding: {divisible_by: N}`: Megatron's make_vocab_size_divisible_by.
  if (const Node* vocab = n.find("vocab_padding")) {
    rule.vocab_loc = r.loc(*vocab);
    const Node* by = vocab->is_map() ? vocab->find("divisible_by") : nullptr;
    if (!r.expect_map(*vocab, "`vocab_padding`") ||
        !r.check_keys(*vocab, {"divisible_by"}, "`vocab_padding`") || by == nullptr) {
      if (vocab->is_map() && by == nullptr)
        r.error(*vocab,
                "`vocab_padding` needs `divisible_by` (Megatron's make_vocab_size_divisible_by)",
                "e.g. `vocab_padding: {divisible_by: 128}`");
      ok = false;
    } else {
      const auto v = parse_bounded(*by, r, "`vocab_padding.divisible_by`", 1, kMaxPadOrUnit);
      ok = v.has_value() && ok;
      rule.vocab_divisible_by = v.value_or(0);
    }
  }
  // `shard_order` is read once the mesh and fsdp are (apply_shard_orders)
  if (!ok) return std::nullopt;
  rule.placements = std::move(*places);
  return rule;
}

// `stack` may use every capture of `match` except {E}, and must use all of
// them, else two groups would get the same stacked name.
bool check_stack(const Node& stack, const Pattern& match, Reader& r) {
  Captures probe;
  for (const std::string& name : match.capture_names()) {
    if (name != "E") probe.emplace_back(name, "x");
  }
  if (!Pattern::substitute(stack.text(), probe)) {
    r.error(stack,
            "`stack` `" + std::string(stack.text()) +
                "` uses a capture that `match` does not bind "
                "(or {E}, or an unbalanced brace)",
            "`stack` may use the captures of `match` other than {E}");
    return false;
  }
  for (const auto& [name, value] : probe) {
    if (stack.text().find("{" + name + "}") == std::string_view::npos) {
      r.error(stack,
              "`stack` `" + std::string(stack.text()) + "` does not use the capture {" + name + "}",
              "every capture but {E} must appear in `stack`, or stacked names would collide");
      return false;
    }
  }
  return true;
}

// A pre-stacked entry (`stacked_dim`): `match` names the stacked tensors
// themselves (no {E}, no `stack`); `expert_name` may use its captures and {E}.
bool parse_prestacked(const Node& n, const Node& dim, Reader& r, ExpertsEntry& e) {
  bool ok = true;
  const auto d = parse_bounded(dim, r, "`stacked_dim`", 0, 63);
  ok = d.has_value();
  if (d && *d != 0) {
    r.error(dim, "`stacked_dim: " + std::to_string(*d) + "`: experts must be stacked on dim 0",
            "shardc's expert placements, FSDP's expert_dim and the runtimes' stacked experts "
            "(torchtitan GroupedExperts, transformers' fused MoE) index experts on dim 0; "
            "permute the checkpoint's tensor or list the experts one by one with {E}");
    ok = false;
  }
  e.stacked_dim = static_cast<int>(d.value_or(0));
  if (const Node* stack = n.find("stack")) {
    r.error(*stack, "`stack` with `stacked_dim`: the params are already stacked",
            "drop `stack`: each pre-stacked param keeps its name");
    ok = false;
  }
  const auto& names = e.match.capture_names();
  if (std::find(names.begin(), names.end(), "E") != names.end()) {
    r.error(e.match_loc,
            "experts `match` `" + e.match.text() +
                "` captures {E} but `stacked_dim` says the experts are stacked",
            "with `stacked_dim`, `match` names the stacked tensors (`...mlp.experts.*`); "
            "without it, `match` names one tensor per expert with {E}");
    ok = false;
  }
  if (const Node* name = n.find("expert_name")) {
    std::optional<std::string> text = r.get_string(*name, "`expert_name`");
    Captures probe;
    for (const std::string& c : names) probe.emplace_back(c, "x");
    probe.emplace_back("E", "0");
    const auto once = [](const std::string& t) {
      const std::size_t at = t.find("{E}");
      return at != std::string::npos && t.find("{E}", at + 1) == std::string::npos;
    };
    if (text && (!once(*text) || !Pattern::substitute(*text, probe))) {
      r.error(*name, "`expert_name` `" + *text + "` must use {E} once and only captures of `match`",
              "e.g. `model.layers.{L}.mlp.experts.{E}.{P}` for match "
              "`model.layers.{L}.mlp.experts.{P}`");
      text.reset();
    }
    ok = text.has_value() && ok;
    e.expert_name = text.value_or("");
  }
  return ok;
}

std::optional<ExpertsEntry> parse_expert(const Node& n, Reader& r) {
  if (!r.expect_map(n, "an `experts` entry")) return std::nullopt;
  bool ok = r.check_keys(
      n, {"match", "stack", "placements", "uneven", "unit", "packed", "stacked_dim", "expert_name"},
      "an `experts` entry");
  const Node* match = n.find("match");
  const Node* stack = n.find("stack");
  const Node* placements = n.find("placements");
  const Node* stacked_dim = n.find("stacked_dim");
  if (match == nullptr || (stack == nullptr && stacked_dim == nullptr) || placements == nullptr) {
    r.error(n, "an `experts` entry needs `match`, `stack` (or `stacked_dim`) and `placements`",
            "e.g. {match: \"model.layers.{L}.mlp.experts.{E}.{P}.weight\", stack: "
            "\"model.layers.{L}.mlp.experts.{P}\", placements: {ep: Shard(0)}}; experts the "
            "checkpoint already stacks: {match: \"model.layers.*.mlp.experts.*\", "
            "stacked_dim: 0, placements: {ep: Shard(0)}}");
    return std::nullopt;
  }
  ExpertsEntry e;
  e.loc = r.loc(n);
  e.match_loc = r.loc(*match);
  std::optional<Pattern> pattern = parse_pattern(*match, r);
  if (stacked_dim != nullptr) {
    if (!pattern) return std::nullopt;
    e.match = std::move(*pattern);
    ok = parse_prestacked(n, *stacked_dim, r, e) && ok;
  } else {
    const auto& names = pattern ? pattern->capture_names() : std::vector<std::string>{};
    if (pattern && std::find(names.begin(), names.end(), "E") == names.end()) {
      r.error(*match, "experts `match` `" + pattern->text() + "` has no {E} capture",
              "mark the expert index with {E}: a segment (`...experts.{E}.{P}.weight`) or the "
              "end of one (grouped GEMM `...experts.linear_fc1.weight{E}`); for experts the "
              "checkpoint already stacks, name the stacked tensors and add `stacked_dim: 0`");
      pattern.reset();
    }
    if (const Node* name = n.find("expert_name")) {
      r.error(*name, "`expert_name` without `stacked_dim`",
              "per-expert names are the source params' own names; `expert_name` names the "
              "experts of a pre-stacked param");
      ok = false;
    }
    std::optional<std::string> stack_text = r.get_string(*stack, "`stack`");
    ok = pattern && stack_text && check_stack(*stack, *pattern, r) && ok;
    if (ok) {
      e.match = std::move(*pattern);
      e.stack = std::move(*stack_text);
    }
  }
  std::optional<std::vector<AxisPlacement>> places = parse_placements(*placements, r);
  ok = places && ok;
  if (const Node* uneven = n.find("uneven")) {
    e.uneven = parse_split_rule(*uneven, r, &e.pad_multiple);
    ok = e.uneven.has_value() && ok;
  }
  if (const Node* unit = n.find("unit")) {
    const auto u = parse_bounded(*unit, r, "`unit`", 1, kMaxPadOrUnit);
    ok = u.has_value() && ok;
    e.unit = u.value_or(1);
  }
  if (const Node* packed = n.find("packed")) {
    e.packed = parse_packed(*packed, r);
    ok = e.packed.has_value() && ok;
  }
  if (!ok) return std::nullopt;
  e.placements = std::move(*places);
  return e;
}

}  // namespace

std::optional<Pattern> parse_pattern(const Node& n, Reader& r) {
  std::optional<std::string> text = r.get_string(n, "a pattern");
  if (!text) return std::nullopt;
  std::string why;
  std::optional<Pattern> p = Pattern::compile(*text, why);
  if (!p) r.error(n, "bad pattern `" + *text + "`: " + why, std::string(kPatternHint));
  return p;
}

std::optional<std::vector<AxisPlacement>> parse_placements(const Node& n, Reader& r) {
  std::vector<AxisPlacement> out;
  if (n.is_null()) return out;
  if (!r.expect_map(n, "`placements`")) return std::nullopt;
  bool ok = r.check_duplicates(n, "`placements`");
  for (const Node& entry : n.items()) {
    std::optional<Placement> p;
    if (entry.is_scalar()) p = parse_placement(entry.text());
    if (!p) {
      r.error(DiagCode::EPlacement, r.loc(entry),
              "unparseable placement " + describe(entry) + " for axis `" +
                  std::string(entry.key()) + "`",
              std::string(kPlacementHint));
      ok = false;
      continue;
    }
    out.push_back(AxisPlacement{std::string(entry.key()), std::move(*p), r.key_loc(entry)});
  }
  if (!ok) return std::nullopt;
  return out;
}

std::vector<Rule> parse_rules(const Node& n, Reader& r) {
  std::vector<Rule> out;
  if (n.is_null() || !r.expect_seq(n, "`rules`")) return out;
  out.reserve(n.items().size());
  for (const Node& item : n.items()) {
    if (std::optional<Rule> rule = parse_rule(item, r)) out.push_back(std::move(*rule));
  }
  return out;
}

std::vector<ExpertsEntry> parse_experts(const Node& n, Reader& r) {
  std::vector<ExpertsEntry> out;
  if (n.is_null() || !r.expect_seq(n, "`experts`")) return out;
  for (const Node& item : n.items()) {
    if (std::optional<ExpertsEntry> e = parse_expert(item, r)) out.push_back(std::move(*e));
  }
  return out;
}

}  // namespace shardc::fe
