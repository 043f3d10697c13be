// Rule resolution: the first rule whose pattern matches a param's FQN wins
// (SPEC §4). Stacked experts take their `experts` entry instead.
#include <string>

#include "passes.hpp"

namespace shardc::passes {
namespace {

bool rule_matches(const Rule& r, const std::string& fqn) {
  for (const Pattern& p : r.match)
    if (p.match(fqn)) return true;
  return false;
}

}  // namespace

void resolve_rules(std::vector<PlannedParam>& params, const Recipe& recipe, DiagnosticSink& sink) {
  const std::size_t n = recipe.rules.size();
  std::vector<std::int64_t> matched(n, 0);  // params each rule matches at all
  std::vector<std::int64_t> won(n, 0);      // params each rule is first for
  GroupedReporter uncovered;
  for (PlannedParam& p : params) {
    if (p.rule.kind == RuleRef::Kind::Experts) continue;
    int first = -1;
    for (std::size_t i = 0; i < n; ++i) {
      if (!rule_matches(recipe.rules[i], p.name)) continue;
      ++matched[i];
      if (first < 0) first = static_cast<int>(i);
    }
    if (first < 0) {
      Diagnostic d;
      d.code = "E-UNCOVERED";
      d.loc = p.loc;
      d.param = p.name;
      d.message = "parameter " + p.name + " is matched by no rule";
      d.hint = "add a rule whose match covers it (e.g. `match: \"**\"` last, with placements: {})";
      uncovered.add(std::move(d), "");
      continue;
    }
    const Rule& r = recipe.rules[static_cast<std::size_t>(first)];
    ++won[static_cast<std::size_t>(first)];
    p.rule = {RuleRef::Kind::Rule, first, r.match_text()};
    p.uneven = r.uneven.value_or(recipe.uneven);
  }
  uncovered.flush(sink);
  for (std::size_t i = 0; i < n; ++i) {
    const Rule& r = recipe.rules[i];
    Diagnostic d;
    d.severity = Severity::Warning;
    d.loc = r.loc;
    d.rule = r.match_text();
    if (matched[i] == 0) {
      d.code = "W-UNUSED-RULE";
      d.message = "rule " + std::to_string(i) + " (" + d.rule + ") matches no parameter";
      d.hint = "remove it or fix its pattern (`shardc inspect --match GLOB` lists FQNs)";
      sink.report(std::move(d));
    } else if (won[i] == 0) {
      d.code = "W-SHADOWED-RULE";
      d.message = "rule " + std::to_string(i) + " (" + d.rule +
                  ") never applies: every parameter it matches is taken by an earlier rule";
      d.hint = "move it above the broader rule, or remove it";
      sink.report(std::move(d));
    }
  }
}

Diagnostic param_diagnostic(const PlannedParam& p, std::string code, SourceLoc loc,
                            Severity severity) {
  Diagnostic d;
  d.severity = severity;
  d.code = std::move(code);
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

void GroupedReporter::add(Diagnostic d, const std::string& key) {
  const std::string full = d.code + '\x1f' + key;
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
