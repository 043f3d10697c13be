// Checks of SPEC §5.7 that look at resolved placements: `even`
// divisibility (E-EVEN), attention heads vs tp (E-HEADS), experts vs ep
// (E-EXPERTS under even, W-EXPERTS otherwise).
#include <numeric>
#include <set>
#include <string>
#include <string_view>

#include "passes.hpp"

namespace shardc::passes {
namespace {

const std::set<std::string_view>& qkv_modules() {
  static const std::set<std::string_view> names = {"q_proj",   "k_proj", "v_proj",
                                                   "qkv_proj", "qkv",    "linear_qkv",
                                                   "wqkv",     "Wqkv",   "query_key_value"};
  return names;
}

// The module name of a `...module.weight` FQN, or empty.
std::string_view weight_module(std::string_view fqn) {
  constexpr std::string_view suffix = ".weight";
  if (fqn.size() <= suffix.size() || fqn.substr(fqn.size() - suffix.size()) != suffix) return {};
  std::string_view mod = fqn.substr(0, fqn.size() - suffix.size());
  const auto dot = mod.rfind('.');
  return dot == std::string_view::npos ? mod : mod.substr(dot + 1);
}

std::string axes_text(const DimSplit& s, const Mesh& mesh) {
  std::string t;
  for (int a : s.axes) t += (t.empty() ? "" : "x") + mesh.axes[static_cast<std::size_t>(a)].name;
  return t;
}

void check_even(const PlannedParam& p, const Plan& plan, const Recipe& recipe,
                GroupedReporter& rep) {
  const Mesh& mesh = plan.mesh_of(p);
  for (std::size_t d = 0; d < p.geometry.per_dim.size(); ++d) {
    std::int64_t len = p.global_shape[d];
    for (const DimSplit& s : p.geometry.per_dim[d]) {
      if (s.rule != SplitRule::Even) continue;
      if (len % s.ways != 0) {
        if (p.mesh == MeshKind::Expert && d == 0) return;  // E-EXPERTS reports it
        Diagnostic diag = param_diagnostic(p, "E-EVEN", rule_loc(p, recipe));
        diag.message = p.name + " dim " + std::to_string(d) + ": extent " + std::to_string(len) +
                       " is not divisible by " + std::to_string(s.ways) + " (" +
                       axes_text(s, mesh) + ") under uneven: even";
        diag.hint = "use uneven: chunk (torch.chunk) or balanced, or a divisible mesh size";
        rep.add(std::move(diag), std::to_string(p.rule.index) + ":" + std::to_string(d));
        return;
      }
      len /= s.ways;
    }
  }
}

// Divisors of g in increasing order, for hints. Bounded work for hostile
// counts (g may be near 2^63): tries k up to 2^20 and lists at most 64.
std::string divisors_text(std::int64_t g) {
  constexpr std::int64_t kMaxTried = std::int64_t{1} << 20;
  constexpr int kMaxListed = 64;
  std::string t;
  int listed = 0;
  std::int64_t k = 1;
  for (; k <= g && k <= kMaxTried && listed < kMaxListed; ++k) {
    if (g % k != 0) continue;
    t += (t.empty() ? "" : ", ") + std::to_string(k);
    ++listed;
  }
  if (k <= g) t += ", ... (the divisors of " + std::to_string(g) + ")";
  return t;
}

void check_heads(const PlannedParam& p, const Model& model, const Recipe& recipe,
                 GroupedReporter& rep) {
  if (p.mesh != MeshKind::Dense || p.geometry.per_dim.empty()) return;
  if (!qkv_modules().count(weight_module(p.name))) return;
  const auto& heads = model.attributes.num_attention_heads;
  if (!heads || *heads <= 0) return;
  const std::int64_t kv = model.attributes.num_key_value_heads.value_or(*heads);
  std::int64_t tp = 1;
  for (const DimSplit& s : p.geometry.per_dim[0])
    if (!s.fsdp) tp *= s.ways;
  if (tp <= 1 || (*heads % tp == 0 && kv % tp == 0)) return;
  Diagnostic d = param_diagnostic(p, "E-HEADS", rule_loc(p, recipe));
  d.message = p.name + " is sharded on dim 0 over tp=" + std::to_string(tp) + " but " +
              std::to_string(*heads) + " attention heads and " + std::to_string(kv) +
              " KV heads do not divide by " + std::to_string(tp);
  d.hint = "valid tp sizes: " + divisors_text(std::gcd(*heads, kv));
  rep.add(std::move(d), std::to_string(p.rule.index) + ":" + std::to_string(tp));
}

void check_experts(const PlannedParam& p, const Plan& plan, const Recipe& recipe,
                   DiagnosticSink& sink) {
  if (p.mesh != MeshKind::Expert || p.geometry.per_dim.empty()) return;
  const std::int64_t e = p.global_shape[0];
  std::int64_t ep = 1;
  for (const DimSplit& s : p.geometry.per_dim[0])
    if (!s.fsdp) ep *= s.ways;
  if (ep <= 1 || e % ep == 0) return;
  Diagnostic d = param_diagnostic(p, "", rule_loc(p, recipe));
  if (p.uneven == SplitRule::Even) {
    d.code = "E-EXPERTS";
    d.message = "stacked " + p.name + ": " + std::to_string(e) +
                " experts over ep=" + std::to_string(ep) + " do not divide under uneven: even";
    d.hint = "valid ep sizes divide " + std::to_string(e) + ": " + divisors_text(e);
    sink.report(std::move(d));
    return;
  }
  d.severity = Severity::Warning;
  d.code = "W-EXPERTS";
  d.message = "stacked " + p.name + ": " + std::to_string(e) +
              " experts over ep=" + std::to_string(ep) + " (" + split_rule_name(p.uneven) + ")";
  // Expert range of each ep coordinate: the dim-0 pieces of the non-FSDP splits.
  const Mesh& mesh = plan.mesh_of(p);
  std::vector<std::int64_t> coords(mesh.axes.size(), 0);
  std::string ranges;
  // At most kMaxListed coordinates: ep may be near 2^31 on hostile meshes.
  constexpr std::int64_t kMaxListed = 256;
  for (std::int64_t k = 0; k < ep && k < kMaxListed; ++k) {
    std::int64_t rem = k;
    for (auto it = p.geometry.per_dim[0].rbegin(); it != p.geometry.per_dim[0].rend(); ++it) {
      if (it->fsdp) continue;
      for (std::size_t i = it->axes.size(); i-- > 0;) {
        coords[static_cast<std::size_t>(it->axes[i])] = rem % it->axis_sizes[i];
        rem /= it->axis_sizes[i];
      }
    }
    std::int64_t start = 0;
    std::int64_t len = e;
    for (const DimSplit& s : p.geometry.per_dim[0]) {
      if (s.fsdp) continue;
      const Piece piece = split_piece(len, s.ways, split_coord(s, coords), s.rule);
      start += piece.start;
      len = piece.size;
    }
    d.ranges.emplace_back(start, start + len);
    ranges += (ranges.empty() ? "" : ", ") + std::to_string(k) + ": [" + std::to_string(start) +
              ", " + std::to_string(start + len) + ")";
  }
  if (ep > kMaxListed) ranges += ", ... (" + std::to_string(ep - kMaxListed) + " more)";
  d.hint = "experts per ep coordinate: " + ranges +
           "; frameworks differ on uneven experts (this plan uses " + split_rule_name(p.uneven) +
           ")";
  sink.report(std::move(d));
}

}  // namespace

void run_checks(const std::vector<PlannedParam>& params, const Plan& plan, const Model& model,
                const Recipe& recipe, DiagnosticSink& sink) {
  GroupedReporter even;
  GroupedReporter heads;
  for (const PlannedParam& p : params) {
    if (p.geometry.per_dim.size() != p.global_shape.size()) continue;  // placements failed
    check_even(p, plan, recipe, even);
    check_heads(p, model, recipe, heads);
    check_experts(p, plan, recipe, sink);
  }
  even.flush(sink);
  heads.flush(sink);
}

}  // namespace shardc::passes
