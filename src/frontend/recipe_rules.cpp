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
bool parse_match_list(const Node& node, Reader& reader, Rule& rule) {
  if (node.is_seq() && node.items().empty()) {
    reader.error(node, "`match` is an empty list", "give one pattern or a list of patterns");
    return false;
  }
  std::span<const Node> nodes = node.is_seq() ? node.items() : std::span<const Node>(&node, 1);
  bool ok = true;
  for (const Node& item : nodes) {
    std::optional<Pattern> pattern = parse_pattern(item, reader);
    ok = pattern.has_value() && ok;
    if (!pattern) continue;
    rule.match.push_back(std::move(*pattern));
    rule.match_locs.push_back(reader.loc(item));
  }
  return ok;
}

// One part written as a map: `{size: S, name: q, replicas: R}` (recipe.hpp PackedSpec).
bool parse_part(const Node& item, Reader& reader, PackedSpec& spec) {
  constexpr std::string_view hint =
      "a part is an extent or `{size: S, name: k, replicas: R}` (R consecutive tp ranks hold "
      "the same piece of it: vLLM's num_kv_head_replicas = tp / KV heads)";
  bool ok = reader.check_keys(item, {"size", "name", "replicas"}, "a packed part");
  const Node* size = item.find("size");
  if (size == nullptr) {
    reader.error(item, "a packed part needs `size` (its extent on the packed dim)",
                 std::string(hint));
    ok = false;
  }
  const auto extent =
      size ? parse_bounded(*size, reader, "a part's `size`", 0, std::int64_t{1} << 62)
           : std::nullopt;
  ok = extent.has_value() && ok;
  std::string name;
  if (const Node* name_node = item.find("name")) {
    const auto got = reader.get_string(*name_node, "a part's `name`");
    ok = got.has_value() && ok;
    name = got.value_or("");
  }
  std::int64_t replicas = 1;
  if (const Node* replicas_node = item.find("replicas")) {
    const auto got =
        parse_bounded(*replicas_node, reader, "a part's `replicas`", 1, limits::kMaxWorld);
    ok = got.has_value() && ok;
    replicas = got.value_or(1);
    if (replicas > 1 && spec.replicas_loc.line == 0) spec.replicas_loc = reader.loc(*replicas_node);
  }
  // Earlier plain extents get their default name and replica count.
  spec.names.resize(spec.sizes.size());
  spec.replicas.resize(spec.sizes.size(), 1);
  spec.sizes.push_back(extent.value_or(0));
  spec.names.push_back(std::move(name));
  spec.replicas.push_back(replicas);
  return ok;
}

// `packed: {parts: N | [sizes or part maps], dim: d, interleave: k | groups: G}`.
std::optional<PackedSpec> parse_packed(const Node& node, Reader& reader) {
  constexpr std::string_view hint =
      "e.g. `packed: {parts: 2}` (SwiGLU [W; V] on dim 0) or `packed: {parts: [4096, 1024, "
      "1024], dim: 0}` (fused q|k|v)";
  if (!reader.expect_map(node, "`packed`")) return std::nullopt;
  bool ok = reader.check_keys(node, {"parts", "dim", "interleave", "groups"}, "`packed`");
  PackedSpec spec;
  spec.loc = reader.loc(node);
  const Node* parts = node.find("parts");
  if (parts == nullptr) {
    reader.error(node, "`packed` needs `parts` (a count or a list of extents)", std::string(hint));
    return std::nullopt;
  }
  if (parts->is_seq()) {
    if (parts->items().empty() || static_cast<std::int64_t>(parts->items().size()) > kMaxParts) {
      reader.error(*parts, "`parts` must list 1.." + std::to_string(kMaxParts) + " extents",
                   std::string(hint));
      return std::nullopt;
    }
    bool maps = false;
    for (const Node& item : parts->items()) maps = maps || item.is_map();
    for (const Node& item : parts->items()) {
      if (!item.is_map()) {
        const auto extent = parse_bounded(item, reader, "a part extent", 0, std::int64_t{1} << 62);
        ok = extent.has_value() && ok;
        spec.sizes.push_back(extent.value_or(0));
        if (maps) spec.names.emplace_back(), spec.replicas.push_back(1);
        continue;
      }
      const auto part = parse_part(item, reader, spec);
      ok = part && ok;
    }
  } else {
    const auto count = parse_bounded(*parts, reader, "`parts`", 1, kMaxParts);
    ok = count.has_value() && ok;
    spec.count = count.value_or(1);
  }
  if (const Node* dim = node.find("dim")) {
    const auto d = parse_bounded(*dim, reader, "`packed.dim`", -64, 63);
    ok = d.has_value() && ok;
    spec.dim = static_cast<int>(d.value_or(0));
  }
  const Node* interleave = node.find("interleave");
  const Node* groups = node.find("groups");
  if (interleave != nullptr && groups != nullptr) {
    reader.error(
        *groups, "`packed` takes `interleave` or `groups`, not both",
        "`interleave: k`: equal parts alternating in blocks of k elements (gpt-oss gate|up: "
        "1); `groups: G`: G groups, each holding its share of every part (Megatron "
        "linear_qkv: G = query groups)");
    return std::nullopt;
  }
  if (interleave != nullptr) {
    const auto block =
        parse_bounded(*interleave, reader, "`packed.interleave`", 1, std::int64_t{1} << 62);
    ok = block.has_value() && ok;
    spec.interleave = block.value_or(1);
  }
  if (groups != nullptr) {
    const auto group_count =
        parse_bounded(*groups, reader, "`packed.groups`", 1, std::int64_t{1} << 62);
    ok = group_count.has_value() && ok;
    spec.groups = group_count.value_or(1);
  }
  if (!ok) return std::nullopt;
  return spec;
}

// The layout keys a rule and an `experts` entry share: `uneven`, `unit` and `packed` (recipe.hpp
// Rule, ExpertsEntry); false when one is wrong (reported).
template <typename Entry>
bool parse_layout_keys(const Node& node, Reader& reader, Entry& entry) {
  bool ok = true;
  if (const Node* uneven = node.find("uneven")) {
    entry.uneven = parse_split_rule(*uneven, reader, &entry.pad_multiple);
    ok = entry.uneven.has_value() && ok;
  }
  if (const Node* unit = node.find("unit")) {
    const auto unit_value = parse_bounded(*unit, reader, "`unit`", 1, kMaxPadOrUnit);
    ok = unit_value.has_value() && ok;
    entry.unit = unit_value.value_or(1);
  }
  if (const Node* packed = node.find("packed")) {
    entry.packed = parse_packed(*packed, reader);
    ok = entry.packed.has_value() && ok;
  }
  return ok;
}

std::optional<Rule> parse_rule(const Node& node, Reader& reader) {
  if (!reader.expect_map(node, "a rule")) return std::nullopt;
  bool ok = reader.check_keys(
      node, {"match", "placements", "uneven", "unit", "packed", "vocab_padding", "shard_order"},
      "a rule");
  Rule rule;
  rule.loc = reader.loc(node);
  const Node* match = node.find("match");
  const Node* placements = node.find("placements");
  if (match == nullptr || placements == nullptr) {
    reader.error(node,
                 std::string("a rule needs `") + (match == nullptr ? "match" : "placements") + "`",
                 "e.g. `- {match: \"model.layers.*.mlp.down_proj.weight\", placements: {tp: "
                 "Shard(1)}}`; use `placements: {}` for replicated");
    return std::nullopt;
  }
  const bool patterns = parse_match_list(*match, reader, rule);
  std::optional<std::vector<AxisPlacement>> places = parse_placements(*placements, reader);
  ok = patterns && places && ok;
  ok = parse_layout_keys(node, reader, rule) && ok;
  // `vocab_padding: {divisible_by: N}`: Megatron's make_vocab_size_divisible_by.
  if (const Node* vocab = node.find("vocab_padding")) {
    rule.vocab_loc = reader.loc(*vocab);
    const Node* by = vocab->is_map() ? vocab->find("divisible_by") : nullptr;
    if (!reader.expect_map(*vocab, "`vocab_padding`") ||
        !reader.check_keys(*vocab, {"divisible_by"}, "`vocab_padding`") || by == nullptr) {
      if (vocab->is_map() && by == nullptr)
        reader.error(
            *vocab,
            "`vocab_padding` needs `divisible_by` (Megatron's make_vocab_size_divisible_by)",
            "e.g. `vocab_padding: {divisible_by: 128}`");
      ok = false;
    } else {
      const auto multiple =
          parse_bounded(*by, reader, "`vocab_padding.divisible_by`", 1, kMaxPadOrUnit);
      ok = multiple.has_value() && ok;
      rule.vocab_divisible_by = multiple.value_or(0);
    }
  }
  // `shard_order` is read once the mesh and fsdp are (apply_shard_orders)
  if (!ok) return std::nullopt;
  rule.placements = std::move(*places);
  return rule;
}

// `stack` may use every capture of `match` except {E}, and must use all of
// them, else two groups would get the same stacked name.
bool check_stack(const Node& stack, const Pattern& match, Reader& reader) {
  Captures probe;
  for (const std::string& name : match.capture_names()) {
    if (name != "E") probe.emplace_back(name, "x");
  }
  if (!Pattern::substitute(stack.text(), probe)) {
    reader.error(stack,
                 "`stack` `" + std::string(stack.text()) +
                     "` uses a capture that `match` does not bind "
                     "(or {E}, or an unbalanced brace)",
                 "`stack` may use the captures of `match` other than {E}");
    return false;
  }
  for (const auto& [name, value] : probe) {
    if (stack.text().find("{" + name + "}") == std::string_view::npos) {
      reader.error(
          stack,
          "`stack` `" + std::string(stack.text()) + "` does not use the capture {" + name + "}",
          "every capture but {E} must appear in `stack`, or stacked names would collide");
      return false;
    }
  }
  return true;
}

// A pre-stacked entry (`stacked_dim`): `match` names the stacked tensors
// themselves (no {E}, no `stack`); `expert_name` may use its captures and {E}.
bool parse_prestacked(const Node& node, const Node& dim, Reader& reader, ExpertsEntry& entry) {
  bool ok = true;
  const auto d = parse_bounded(dim, reader, "`stacked_dim`", 0, 63);
  ok = d.has_value();
  if (d && *d != 0) {
    reader.error(dim, "`stacked_dim: " + std::to_string(*d) + "`: experts must be stacked on dim 0",
                 "shardc's expert placements, FSDP's expert_dim and the runtimes' stacked experts "
                 "(torchtitan GroupedExperts, transformers' fused MoE) index experts on dim 0; "
                 "permute the checkpoint's tensor or list the experts one by one with {E}");
    ok = false;
  }
  entry.stacked_dim = static_cast<int>(d.value_or(0));
  if (const Node* stack = node.find("stack")) {
    reader.error(*stack, "`stack` with `stacked_dim`: the params are already stacked",
                 "drop `stack`: each pre-stacked param keeps its name");
    ok = false;
  }
  const auto& names = entry.match.capture_names();
  if (std::find(names.begin(), names.end(), "E") != names.end()) {
    reader.error(entry.match_loc,
                 "experts `match` `" + entry.match.text() +
                     "` captures {E} but `stacked_dim` says the experts are stacked",
                 "with `stacked_dim`, `match` names the stacked tensors (`...mlp.experts.*`); "
                 "without it, `match` names one tensor per expert with {E}");
    ok = false;
  }
  if (const Node* name = node.find("expert_name")) {
    std::optional<std::string> text = reader.get_string(*name, "`expert_name`");
    Captures probe;
    for (const std::string& capture : names) probe.emplace_back(capture, "x");
    probe.emplace_back("E", "0");
    const auto once = [](const std::string& candidate) {
      const std::size_t at = candidate.find("{E}");
      return at != std::string::npos && candidate.find("{E}", at + 1) == std::string::npos;
    };
    if (text && (!once(*text) || !Pattern::substitute(*text, probe))) {
      reader.error(*name,
                   "`expert_name` `" + *text + "` must use {E} once and only captures of `match`",
                   "e.g. `model.layers.{L}.mlp.experts.{E}.{P}` for match "
                   "`model.layers.{L}.mlp.experts.{P}`");
      text.reset();
    }
    ok = text.has_value() && ok;
    entry.expert_name = text.value_or("");
  }
  return ok;
}

std::optional<ExpertsEntry> parse_expert(const Node& node, Reader& reader) {
  if (!reader.expect_map(node, "an `experts` entry")) return std::nullopt;
  bool ok = reader.check_keys(
      node,
      {"match", "stack", "placements", "uneven", "unit", "packed", "stacked_dim", "expert_name"},
      "an `experts` entry");
  const Node* match = node.find("match");
  const Node* stack = node.find("stack");
  const Node* placements = node.find("placements");
  const Node* stacked_dim = node.find("stacked_dim");
  if (match == nullptr || (stack == nullptr && stacked_dim == nullptr) || placements == nullptr) {
    reader.error(node,
                 "an `experts` entry needs `match`, `stack` (or `stacked_dim`) and `placements`",
                 "e.g. {match: \"model.layers.{L}.mlp.experts.{E}.{P}.weight\", stack: "
                 "\"model.layers.{L}.mlp.experts.{P}\", placements: {ep: Shard(0)}}; experts the "
                 "checkpoint already stacks: {match: \"model.layers.*.mlp.experts.*\", "
                 "stacked_dim: 0, placements: {ep: Shard(0)}}");
    return std::nullopt;
  }
  ExpertsEntry entry;
  entry.loc = reader.loc(node);
  entry.match_loc = reader.loc(*match);
  std::optional<Pattern> pattern = parse_pattern(*match, reader);
  if (stacked_dim != nullptr) {
    if (!pattern) return std::nullopt;
    entry.match = std::move(*pattern);
    ok = parse_prestacked(node, *stacked_dim, reader, entry) && ok;
  } else {
    const auto& names = pattern ? pattern->capture_names() : std::vector<std::string>{};
    if (pattern && std::find(names.begin(), names.end(), "E") == names.end()) {
      reader.error(*match, "experts `match` `" + pattern->text() + "` has no {E} capture",
                   "mark the expert index with {E}: a segment (`...experts.{E}.{P}.weight`) or the "
                   "end of one (grouped GEMM `...experts.linear_fc1.weight{E}`); for experts the "
                   "checkpoint already stacks, name the stacked tensors and add `stacked_dim: 0`");
      pattern.reset();
    }
    if (const Node* name = node.find("expert_name")) {
      reader.error(*name, "`expert_name` without `stacked_dim`",
                   "per-expert names are the source params' own names; `expert_name` names the "
                   "experts of a pre-stacked param");
      ok = false;
    }
    std::optional<std::string> stack_text = reader.get_string(*stack, "`stack`");
    ok = pattern && stack_text && check_stack(*stack, *pattern, reader) && ok;
    if (ok) {
      entry.match = std::move(*pattern);
      entry.stack = std::move(*stack_text);
    }
  }
  std::optional<std::vector<AxisPlacement>> places = parse_placements(*placements, reader);
  ok = places && ok;
  ok = parse_layout_keys(node, reader, entry) && ok;
  if (!ok) return std::nullopt;
  entry.placements = std::move(*places);
  return entry;
}

}  // namespace

std::optional<Pattern> parse_pattern(const Node& node, Reader& reader) {
  std::optional<std::string> text = reader.get_string(node, "a pattern");
  if (!text) return std::nullopt;
  std::string why;
  std::optional<Pattern> pattern = Pattern::compile(*text, why);
  if (!pattern)
    reader.error(node, "bad pattern `" + *text + "`: " + why, std::string(kPatternHint));
  return pattern;
}

std::optional<std::vector<AxisPlacement>> parse_placements(const Node& node, Reader& reader) {
  std::vector<AxisPlacement> out;
  if (node.is_null()) return out;
  if (!reader.expect_map(node, "`placements`")) return std::nullopt;
  bool ok = reader.check_duplicates(node, "`placements`");
  for (const Node& entry : node.items()) {
    std::optional<Placement> placement;
    if (entry.is_scalar()) placement = parse_placement(entry.text());
    if (!placement) {
      reader.error(DiagCode::EPlacement, reader.loc(entry),
                   "unparseable placement " + describe(entry) + " for axis `" +
                       std::string(entry.key()) + "`",
                   std::string(kPlacementHint));
      ok = false;
      continue;
    }
    out.push_back(
        AxisPlacement{std::string(entry.key()), std::move(*placement), reader.key_loc(entry)});
  }
  if (!ok) return std::nullopt;
  return out;
}

std::vector<Rule> parse_rules(const Node& node, Reader& reader) {
  return parse_list<Rule>(node, reader, "`rules`", parse_rule);
}

std::vector<ExpertsEntry> parse_experts(const Node& node, Reader& reader) {
  return parse_list<ExpertsEntry>(node, reader, "`experts`", parse_expert);
}

}  // namespace shardc::fe
