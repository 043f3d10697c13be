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
bool rule_matches(const Rule& r, const std::string& fqn, std::vector<std::int64_t>& hits) {
  bool any = false;
  for (std::size_t j = 0; j < r.match.size(); ++j) {
    if (any && hits[j] > 0) continue;
    if (!r.match[j].match(fqn)) continue;
    ++hits[j];
    any = true;
  }
  return any;
}

void report_unused(const Recipe& recipe, const RuleUse& use, DiagnosticSink& sink) {
  for (std::size_t i = 0; i < recipe.rules.size(); ++i) {
    const Rule& r = recipe.rules[i];
    const std::string name = rule_label(recipe, false, static_cast<int>(i));
    Diagnostic d;
    d.severity = Severity::Warning;
    d.loc = r.loc;
    d.rule = r.match_text();
    if (use.matched[i] == 0 && r.match.size() <= 1) {
      d.code = DiagCode::WUnusedRule;
      d.message = name + " (" + d.rule + ") matches no parameter";
      d.hint = "remove it or fix its pattern (`shardc inspect --match GLOB` lists FQNs)";
      sink.report(std::move(d));
      continue;
    }
    for (std::size_t j = 0; j < r.match.size(); ++j) {
      if (use.pattern_hits[i][j] > 0) continue;
      Diagnostic u = d;
      u.code = DiagCode::WUnusedRule;
      if (j < r.match_locs.size()) u.loc = r.match_locs[j];
      u.message = name + ": pattern " + std::to_string(j + 1) + " of its match list (" +
                  r.match[j].text() + ") matches no parameter";
      u.hint =
          "fix the pattern (a typo?) or remove it from the list (`shardc inspect --match "
          "GLOB` lists FQNs)";
      sink.report(std::move(u));
    }
    if (use.matched[i] > 0 && use.won[i] == 0) {
      d.code = DiagCode::WShadowedRule;
      d.message = name + " (" + d.rule +
                  ") never applies: every parameter it matches is taken by an earlier rule";
      d.hint = "move it above the broader rule, or remove it";
      sink.report(std::move(d));
    }
  }
}

}  // namespace

void resolve_rules(std::vector<PlannedParam>& params, const Recipe& recipe, DiagnosticSink& sink) {
  const std::size_t n = recipe.rules.size();
  RuleUse use{{}, std::vector<std::int64_t>(n, 0), std::vector<std::int64_t>(n, 0)};
  for (const Rule& r : recipe.rules) use.pattern_hits.emplace_back(r.match.size(), 0);
  std::vector<const PlannedParam*> uncovered;
  for (PlannedParam& p : params) {
    if (p.rule.kind == RuleRef::Kind::Experts || p.scale_of) continue;  // stacked / FP8 scale
    int first = -1;
    for (std::size_t i = 0; i < n; ++i) {
      if (!rule_matches(recipe.rules[i], p.name, use.pattern_hits[i])) continue;
      ++use.matched[i];
      if (first < 0) first = static_cast<int>(i);
    }
    if (first < 0) {
      uncovered.push_back(&p);
      continue;
    }
    const Rule& r = recipe.rules[static_cast<std::size_t>(first)];
    ++use.won[static_cast<std::size_t>(first)];
    p.rule = {RuleRef::Kind::Rule, first, r.match_text()};
    p.uneven = r.uneven.value_or(recipe.uneven);
    p.pad_multiple = r.uneven ? r.pad_multiple : recipe.pad_multiple;
    p.unit = r.unit;
  }
  report_uncovered(uncovered, params, recipe, sink);
  report_unused(recipe, use, sink);
  report_unused_experts(params, recipe, sink);
}

Diagnostic param_diagnostic(const PlannedParam& p, DiagCode code, SourceLoc loc,
                            Severity severity) {
  Diagnostic d;
  d.severity = severity;
  d.code = code;
  d.loc = std::move(loc);
  d.param = p.name;
  d.rule = p.rule.match;
  return d;
}

SourceLoc rule_loc(const PlannedParam& p, const Recipe& recipe) {
  if (p.rule.index < 0) return p.loc;
  const auto i = static_cast<std::size_t>(p.rule.index);
  return p.rule.kind == RuleRef::Kind::Experts ? recipe.experts[i].loc : recipe.rules[i].loc;
}

const PackedSpec* packed_spec(const PlannedParam& p, const Recipe& recipe) {
  if (p.rule.index < 0) return nullptr;
  const auto i = static_cast<std::size_t>(p.rule.index);
  const std::optional<PackedSpec>& spec =
      p.rule.kind == RuleRef::Kind::Experts ? recipe.experts[i].packed : recipe.rules[i].packed;
  return spec ? &*spec : nullptr;
}

void GroupedReporter::add(Diagnostic d, const std::string& key) {
  const std::string full = std::string(code_name(d.code)) + '\x1f' + key;
  for (Entry& e : entries_) {
    if (e.key == full) {
      ++e.more;
      return;
    }
  }
  entries_.push_back({std::move(d), full, 0});
}

void GroupedReporter::flush(DiagnosticSink& sink) {
  for (Entry& e : entries_) {
    if (e.more > 0) e.first.message += " (and " + std::to_string(e.more) + " more like it)";
    sink.report(std::move(e.first));
  }
  entries_.clear();
}

}  // namespace shardc::passes
