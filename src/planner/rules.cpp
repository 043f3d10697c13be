// Rule resolution: the first rule whose pattern matches a param's FQN wins
// (contract §4). Stacked experts take their `experts` entry instead.
#include <string>
#include <vector>

#include "planner/passes.hpp"

namespace shardc::passes {
namespace {

// How often each pattern of each rule matched a (non-stacked) param, and how
// many params each rule matched at all / was first for.
struct RuleUse {
  std::vector<std::vector<std::int64_t>> pattern_hits;
  std::vector<std::int64_t> matched;
  std::vector<std::int64_t> won;
};

// True when some pattern of `r` matches; counts every pattern that has not
// matched anything yet (so each unused list element can be reported).
bool rule_matches(const Rule& rule, const std::string& fqn, std::vector<std::int64_t>& hits) {
  bool any = false;
  for (std::size_t j = 0; j < rule.match.size(); ++j) {
    if (any && hits[j] > 0) continue;
    if (!rule.match[j].match(fqn)) continue;
    ++hits[j];
    any = true;
  }
  return any;
}

void report_unused(const Recipe& recipe, const RuleUse& use, DiagnosticSink& sink) {
  for (std::size_t i = 0; i < recipe.rules.size(); ++i) {
    const Rule& rule = recipe.rules[i];
    const std::string name = rule_label(recipe, false, static_cast<int>(i));
    Diagnostic diag;
    diag.severity = Severity::Warning;
    diag.loc = rule.loc;
    diag.rule = rule.match_text();
    if (use.matched[i] == 0 && rule.match.size() <= 1) {
      diag.code = DiagCode::WUnusedRule;
      diag.message = name + " (" + diag.rule + ") matches no parameter";
      diag.hint = "remove it or fix its pattern (`shardc inspect --match GLOB` lists FQNs)";
      sink.report(std::move(diag));
      continue;
    }
    for (std::size_t j = 0; j < rule.match.size(); ++j) {
      if (use.pattern_hits[i][j] > 0) continue;
      Diagnostic unused = diag;
      unused.code = DiagCode::WUnusedRule;
      if (j < rule.match_locs.size()) unused.loc = rule.match_locs[j];
      unused.message = name + ": pattern " + std::to_string(j + 1) + " of its match list (" +
                       rule.match[j].text() + ") matches no parameter";
      unused.hint =
          "fix the pattern (a typo?) or remove it from the list (`shardc inspect --match "
          "GLOB` lists FQNs)";
      sink.report(std::move(unused));
    }
    if (use.matched[i] > 0 && use.won[i] == 0) {
      diag.code = DiagCode::WShadowedRule;
      diag.message = name + " (" + diag.rule +
                     ") never applies: every parameter it matches is taken by an earlier rule";
      diag.hint = "move it above the broader rule, or remove it";
      sink.report(std::move(diag));
    }
  }
}

}  // namespace

void resolve_rules(std::vector<PlannedParam>& params, const Recipe& recipe, DiagnosticSink& sink) {
  const std::size_t count = recipe.rules.size();
  RuleUse use{{}, std::vector<std::int64_t>(count, 0), std::vector<std::int64_t>(count, 0)};
  for (const Rule& rule : recipe.rules) use.pattern_hits.emplace_back(rule.match.size(), 0);
  std::vector<const PlannedParam*> uncovered;
  for (PlannedParam& param : params) {
    if (param.rule.kind == RuleRef::Kind::Experts || param.scale_of)
      continue;  // stacked / FP8 scale
    int first = -1;
    for (std::size_t i = 0; i < count; ++i) {
      if (!rule_matches(recipe.rules[i], param.name, use.pattern_hits[i])) continue;
      ++use.matched[i];
      if (first < 0) first = static_cast<int>(i);
    }
    if (first < 0) {
      uncovered.push_back(&param);
      continue;
    }
    const Rule& rule = recipe.rules[static_cast<std::size_t>(first)];
    ++use.won[static_cast<std::size_t>(first)];
    param.rule = {RuleRef::Kind::Rule, first, rule.match_text()};
    param.uneven = rule.uneven.value_or(recipe.uneven);
    param.pad_multiple = rule.uneven ? rule.pad_multiple : recipe.pad_multiple;
    param.unit = rule.unit;
  }
  report_uncovered(uncovered, params, recipe, sink);
  report_unused(recipe, use, sink);
  report_unused_experts(params, recipe, sink);
}

Diagnostic param_diagnostic(const PlannedParam& param, DiagCode code, SourceLoc loc,
                            Severity severity) {
  Diagnostic diag;
  diag.severity = severity;
  diag.code = code;
  diag.loc = std::move(loc);
  diag.param = param.name;
  diag.rule = param.rule.match;
  return diag;
}

SourceLoc rule_loc(const PlannedParam& param, const Recipe& recipe) {
  if (param.rule.index < 0) return param.loc;
  const auto i = static_cast<std::size_t>(param.rule.index);
  return param.rule.kind == RuleRef::Kind::Experts ? recipe.experts[i].loc : recipe.rules[i].loc;
}

const PackedSpec* packed_spec(const PlannedParam& param, const Recipe& recipe) {
  if (param.rule.index < 0) return nullptr;
  const auto i = static_cast<std::size_t>(param.rule.index);
  const std::optional<PackedSpec>& spec =
      param.rule.kind == RuleRef::Kind::Experts ? recipe.experts[i].packed : recipe.rules[i].packed;
  return spec ? &*spec : nullptr;
}

void GroupedReporter::add(Diagnostic diag, const std::string& key) {
  const std::string full = std::string(code_name(diag.code)) + '\x1f' + key;
  for (Entry& entry : entries_) {
    if (entry.key == full) {
      ++entry.more;
      return;
    }
  }
  entries_.push_back({std::move(diag), full, 0});
}

void GroupedReporter::flush(DiagnosticSink& sink) {
  for (Entry& entry : entries_) {
    if (entry.more > 0)
      entry.first.message += " (and " + std::to_string(entry.more) + " more like it)";
    sink.report(std::move(entry.first));
  }
  entries_.clear();
}

}  // namespace shardc::passes
