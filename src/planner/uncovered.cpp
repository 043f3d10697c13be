// E-UNCOVERED and unused `experts` entries: what a user must read first when
// params fall through every rule.
//
// The silent failure this file guards against: an `experts` pattern with a
// typo stacks nothing, every routed expert is then uncovered, and a
// catch-all `"**"` rule would turn those errors into a valid plan with every
// expert replicated on every rank (no expert parallelism). So a param that
// looks like an expert (`...experts.17...`) is reported at the `experts`
// entry that matched nothing, and no hint ever suggests a catch-all while
// experts are uncovered.
#include <algorithm>
#include <cctype>
#include <string>
#include <vector>

#include "planner/passes.hpp"

namespace shardc::passes {
namespace {

std::vector<std::string> segments(const std::string& fqn) {
  std::vector<std::string> out;
  std::size_t start = 0;
  for (std::size_t i = 0; i <= fqn.size(); ++i) {
    if (i < fqn.size() && fqn[i] != '.') continue;
    out.push_back(fqn.substr(start, i - start));
    start = i + 1;
  }
  return out;
}

bool all_digits(const std::string& text) {
  return !text.empty() &&
         std::all_of(text.begin(), text.end(), [](unsigned char ch) { return std::isdigit(ch); });
}

bool names_experts(const std::string& text) {
  std::string lower = text;
  for (char& ch : lower) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return lower.find("expert") != std::string::npos;
}

// The segment index of the expert number (a number right after a segment
// naming experts, as in HF MoE models), or -1.
int expert_segment(const std::vector<std::string>& segs) {
  for (std::size_t k = 0; k + 1 < segs.size(); ++k)
    if (names_experts(segs[k]) && all_digits(segs[k + 1])) return static_cast<int>(k + 1);
  return -1;
}

// Experts the checkpoint stacks already (`…mlp.experts.gate_up_proj`
// [E, …], transformers' fused MoE / gpt-oss / Llama-4) or Megatron's grouped
// GEMM (`…experts.linear_fc1.weight7`): the segment index naming the experts
// (not a shared expert), or -1. Per-expert names (a number after it) are
// expert_segment's.
int stacked_experts_segment(const std::vector<std::string>& segs, const Shape& shape) {
  for (std::size_t k = 0; k + 1 < segs.size(); ++k) {
    if (!names_experts(segs[k]) || segs[k].find("shared") != std::string::npos) continue;
    if (all_digits(segs[k + 1])) return -1;
    const std::string& last = segs.back();
    const std::size_t digits = last.find_first_of("0123456789");
    const bool grouped =
        digits != std::string::npos && digits > 0 && all_digits(last.substr(digits));
    if (grouped || shape.size() >= 2) return static_cast<int>(k);
  }
  return -1;
}

// The grouped-GEMM form (`weight7`): the last segment ends in the expert number.
bool grouped_gemm_name(const std::vector<std::string>& segs) {
  const std::string& last = segs.back();
  const std::size_t digits = last.find_first_of("0123456789");
  return digits != std::string::npos && digits > 0 && all_digits(last.substr(digits));
}

std::string join(const std::vector<std::string>& segs) {
  std::string text;
  for (std::size_t i = 0; i < segs.size(); ++i) text += (i ? "." : "") + segs[i];
  return text;
}

// An `experts` entry that would stack this param: the expert number becomes
// {E}, other numbers {L}, {L2}, ..., the projection name after {E} {P}.
std::string suggested_entry(std::vector<std::string> segs, int expert_seg) {
  int layers = 0;
  for (std::size_t i = 0; i < segs.size(); ++i) {
    if (static_cast<int>(i) == expert_seg || !all_digits(segs[i])) continue;
    segs[i] = ++layers == 1 ? "{L}" : "{L" + std::to_string(layers) + "}";
  }
  const auto ue = static_cast<std::size_t>(expert_seg);
  segs[ue] = "{E}";
  if (ue + 2 < segs.size()) segs[ue + 1] = "{P}";
  std::vector<std::string> stack;
  for (std::size_t i = 0; i < segs.size(); ++i)
    if (i != ue && !(i + 1 == segs.size() && segs[i] == "weight" && ue + 2 < segs.size()))
      stack.push_back(segs[i]);
  return "{match: \"" + join(segs) + "\", stack: \"" + join(stack) +
         "\", placements: {ep: Shard(0)}}";
}

// An `experts` entry for experts stacked by the checkpoint (segment `e`
// names them): `stacked_dim: 0` over every tensor after it; for grouped
// GEMM names, a {E} ending the last segment.
std::string suggested_stacked_entry(std::vector<std::string> segs, int expert_seg) {
  const auto ue = static_cast<std::size_t>(expert_seg);
  if (grouped_gemm_name(segs)) {
    int layers = 0;
    for (std::size_t i = 0; i + 1 < segs.size(); ++i)
      if (all_digits(segs[i]))
        segs[i] = ++layers == 1 ? "{L}" : "{L" + std::to_string(layers) + "}";
    std::string& last = segs.back();
    last = last.substr(0, last.find_first_of("0123456789"));
    if (ue + 2 < segs.size()) segs[ue + 1] = "{P}";
    const std::string stack = join(segs);
    last += "{E}";
    return "{match: \"" + join(segs) + "\", stack: \"" + stack + "\", placements: {ep: Shard(0)}}";
  }
  for (std::string& seg : segs)
    if (all_digits(seg)) seg = "*";
  segs.resize(ue + 1);
  segs.emplace_back("*");
  return "{match: \"" + join(segs) + "\", stacked_dim: 0, placements: {ep: Shard(0)}}";
}

// A rule pattern for one uncovered param: numbers become `*`.
std::string generalized(std::vector<std::string> segs) {
  for (std::string& seg : segs)
    if (all_digits(seg)) seg = "*";
  return join(segs);
}

// Uncovered params whose names are scanned for distinct patterns (the rest are counted).
constexpr std::int64_t kPatternScan = 10000;
constexpr std::size_t kPatternsListed = 8;

// "a, b, c (and 2 more patterns)".
std::string pattern_list(const std::vector<std::string>& shapes) {
  std::string text;
  for (std::size_t i = 0; i < shapes.size() && i < kPatternsListed; ++i)
    text += (i ? ", " : "") + shapes[i];
  if (shapes.size() > kPatternsListed)
    text += " (and " + std::to_string(shapes.size() - kPatternsListed) + " more patterns)";
  return text;
}

bool used(const std::vector<PlannedParam>& params, std::size_t entry) {
  return std::any_of(params.begin(), params.end(), [&](const PlannedParam& param) {
    return param.rule.kind == RuleRef::Kind::Experts && param.rule.index == static_cast<int>(entry);
  });
}

// The first `experts` entry that stacked nothing, or -1.
int unused_entry(const std::vector<PlannedParam>& params, const Recipe& recipe) {
  for (std::size_t e = 0; e < recipe.experts.size(); ++e)
    if (!used(params, e)) return static_cast<int>(e);
  return -1;
}

std::string entry_name(const Recipe& recipe, int entry) {
  return rule_label(recipe, true, entry) + " `" +
         recipe.experts[static_cast<std::size_t>(entry)].match.text() + "`";
}

Diagnostic expert_uncovered(const PlannedParam& param, const std::vector<std::string>& segs,
                            int seg, int entry, const Recipe& recipe, bool stacked) {
  Diagnostic diag;
  diag.code = DiagCode::EUncovered;
  diag.param = param.name;
  diag.loc = param.loc;
  const std::string replicate =
      "; do not add a catch-all rule or `placements: {}` for them: it would replicate every "
      "expert on every rank (no expert parallelism)";
  if (stacked) {
    const bool grouped = grouped_gemm_name(segs);
    diag.message = "parameter " + param.name + " is matched by no rule: it looks like " +
                   (grouped ? std::string("one expert's weight of a grouped-GEMM MoE layer")
                            : "the experts of a MoE layer stacked in one tensor") +
                   ", and no `experts` entry " + (grouped ? "stacks" : "places") + " it";
    diag.hint = std::string(grouped ? "stack the experts" : "place the stacked experts") +
                " for expert parallelism with an `experts` entry (docs/experts.md), e.g. " +
                suggested_stacked_entry(segs, seg) + replicate;
    return diag;
  }
  const std::string expert = "expert " + segs[static_cast<std::size_t>(seg)];
  if (entry >= 0) {
    const ExpertsEntry& entry_spec = recipe.experts[static_cast<std::size_t>(entry)];
    diag.loc = entry_spec.match_loc.line > 0 ? entry_spec.match_loc : entry_spec.loc;
    diag.rule = entry_spec.match.text();
    diag.message = "parameter " + param.name + " is matched by no rule: it looks like " + expert +
                   " of a MoE layer, and " + entry_name(recipe, entry) +
                   " matched no parameter (a typo in its pattern?)";
    diag.hint = "fix that entry's `match` so it stacks these experts, e.g. " +
                suggested_entry(segs, seg) + replicate;
  } else {
    diag.message = "parameter " + param.name + " is matched by no rule: it looks like " + expert +
                   " of a MoE layer, and no `experts` entry stacks it";
    diag.hint =
        "stack the experts for expert parallelism with an `experts` entry (docs/formats.md, "
        "\"Experts\"), e.g. " +
        suggested_entry(segs, seg) + ", or give them their own rule" + replicate;
  }
  return diag;
}

}  // namespace

void report_uncovered(const std::vector<const PlannedParam*>& uncovered,
                      const std::vector<PlannedParam>& params, const Recipe& recipe,
                      DiagnosticSink& sink) {
  if (uncovered.empty()) return;
  const int entry = unused_entry(params, recipe);
  // Only the first param of each kind gets a full diagnostic; the others are
  // counted ("and N more like it"), so 10^6 uncovered params stay cheap.
  GroupedReporter experts;
  GroupedReporter others;
  Diagnostic counted;
  counted.code = DiagCode::EUncovered;
  const PlannedParam* first_plain = nullptr;
  std::int64_t plain = 0;
  bool experts_uncovered = false;
  std::vector<std::string> shapes;  // distinct name patterns of the first plain params
  for (const PlannedParam* param : uncovered) {
    const bool maybe_expert = param->name.find("xpert") != std::string::npos ||
                              param->name.find("XPERT") != std::string::npos;
    int seg = maybe_expert ? expert_segment(segments(param->name)) : -1;
    const bool stacked =
        maybe_expert && seg < 0 &&
        (seg = stacked_experts_segment(segments(param->name), param->global_shape)) >= 0;
    if (seg < 0) {
      if (!first_plain) first_plain = param;
      if (plain < kPatternScan) {
        std::string shape = generalized(segments(param->name));
        if (std::find(shapes.begin(), shapes.end(), shape) == shapes.end()) shapes.push_back(shape);
      }
      ++plain;
      continue;
    }
    if (!experts_uncovered)
      experts.add(expert_uncovered(*param, segments(param->name), seg, stacked ? -1 : entry, recipe,
                                   stacked),
                  "experts");
    else
      experts.add(counted, "experts");
    experts_uncovered = true;
  }
  if (first_plain) {
    Diagnostic diag;
    diag.code = DiagCode::EUncovered;
    diag.loc = first_plain->loc;
    diag.param = first_plain->name;
    diag.message = "parameter " + first_plain->name + " is matched by no rule";
    diag.hint = "add a rule whose match covers it, e.g. `- {match: \"" + shapes.front() +
                "\", placements: {}}`" +
                (experts_uncovered ? " (not a catch-all `**`: it would also replicate the "
                                     "uncovered experts)"
                                   : ", or a catch-all `match: \"**\"` last");
    if (shapes.size() > 1) diag.hint += "; uncovered names: " + pattern_list(shapes);
    others.add(std::move(diag), "");
    for (std::int64_t i = 1; i < plain; ++i) others.add(counted, "");
  }
  experts.flush(sink);
  others.flush(sink);
}

void report_unused_experts(const std::vector<PlannedParam>& params, const Recipe& recipe,
                           DiagnosticSink& sink) {
  for (std::size_t e = 0; e < recipe.experts.size(); ++e) {
    if (used(params, e)) continue;
    const ExpertsEntry& entry_spec = recipe.experts[e];
    Diagnostic diag;
    diag.severity = Severity::Warning;
    diag.code = DiagCode::WUnusedRule;
    diag.loc = entry_spec.match_loc.line > 0 ? entry_spec.match_loc : entry_spec.loc;
    diag.rule = entry_spec.match.text();
    diag.message = entry_name(recipe, static_cast<int>(e)) + " matches no parameter";
    diag.hint = "fix its pattern (`shardc inspect --match GLOB` lists FQNs) or remove it";
    std::int64_t placed = 0;
    const PlannedParam* example = nullptr;
    for (const PlannedParam& param : params) {
      if (param.rule.kind != RuleRef::Kind::Rule || param.rule.index < 0) continue;
      if (param.name.find("xpert") == std::string::npos &&
          param.name.find("XPERT") == std::string::npos)
        continue;
      if (expert_segment(segments(param.name)) < 0) continue;
      if (!example) example = &param;
      ++placed;
    }
    if (example) {
      diag.message += "; " + std::to_string(placed) + " expert-looking parameter(s) such as " +
                      example->name + " are placed by " +
                      rule_label(recipe, false, example->rule.index) + " (" + example->rule.match +
                      ") instead, without expert parallelism";
      diag.hint = "fix the entry's `match` so it stacks them, e.g. " +
                  suggested_entry(segments(example->name), expert_segment(segments(example->name)));
    }
    sink.report(std::move(diag));
  }
}

}  // namespace shardc::passes
