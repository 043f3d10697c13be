// Checks of contract §5.7 that look at resolved placements: `even`
// divisibility (E-EVEN), attention heads vs tp (E-HEADS), experts vs ep
// (E-EXPERTS under even, W-EXPERTS otherwise).
#include <algorithm>
#include <numeric>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>

#include "core/fused.hpp"
#include "planner/passes.hpp"
#include "support/limits.hpp"

namespace shardc::passes {
namespace {

__extension__ typedef __int128 i128;  // head fractions: extents up to 2^62 times head counts

// Which head count a sharded attention projection must divide (contract §5.8,
// extended): the module name, the tensor dim whose rows (or columns) are
// head-major, and which counts it carries.
enum HeadCounts { kQ = 1, kKV = 2 };
struct HeadModule {
  int dim;     ///< tensor dim (of an nn.Linear weight/bias) that is head-major
  int counts;  ///< kQ, kKV or both (fused q|k|v)
};

// Sources: Hugging Face Llama/Qwen/Mistral (q_proj k_proj v_proj o_proj),
// DeepSeek-V2/V3 and Kimi-K2 MLA (q_b_proj and kv_b_proj are head-major on
// their outputs; o_proj on its inputs), Meta/torchtitan (wq wk wv wo), Phi-3
// (qkv_proj), Megatron (linear_qkv, linear_proj), GPT-NeoX (query_key_value),
// MPT (Wqkv), InternLM (wqkv).
const HeadModule* head_module(std::string_view module) {
  struct Entry {
    std::string_view name;
    HeadModule m;
  };
  static const Entry table[] = {
      {"q_proj", {0, kQ}},
      {"wq", {0, kQ}},
      {"q_b_proj", {0, kQ}},
      {"kv_b_proj", {0, kQ}},
      {"k_proj", {0, kKV}},
      {"v_proj", {0, kKV}},
      {"wk", {0, kKV}},
      {"wv", {0, kKV}},
      {"qkv_proj", {0, kQ | kKV}},
      {"qkv", {0, kQ | kKV}},
      {"linear_qkv", {0, kQ | kKV}},
      {"wqkv", {0, kQ | kKV}},
      {"Wqkv", {0, kQ | kKV}},
      {"query_key_value", {0, kQ | kKV}},
      {"o_proj", {1, kQ}},
      {"wo", {1, kQ}},
      {"linear_proj", {1, kQ}},
  };
  for (const Entry& entry : table)
    if (entry.name == module) return &entry.m;
  return nullptr;
}

// The module name of a `...module.weight` / `...module.bias` FQN, and
// whether it is a bias (1-D: its only dim is the output dim).
std::string_view param_module(std::string_view fqn, bool& bias) {
  bias = false;
  for (std::string_view suffix : {std::string_view(".weight"), std::string_view(".bias")}) {
    if (fqn.size() <= suffix.size() || fqn.substr(fqn.size() - suffix.size()) != suffix) continue;
    bias = suffix == ".bias";
    std::string_view mod = fqn.substr(0, fqn.size() - suffix.size());
    const auto dot = mod.rfind('.');
    return dot == std::string_view::npos ? mod : mod.substr(dot + 1);
  }
  return {};
}

// Divisors of g in increasing order, for hints. Bounded work for hostile
// counts (g may be near 2^63): tries k up to 2^20 and lists at most 64.
std::string divisors_text(std::int64_t heads_gcd) {
  constexpr std::int64_t kMaxTried = std::int64_t{1} << 20;
  constexpr int kMaxListed = 64;
  std::string text;
  int listed = 0;
  std::int64_t k = 1;
  for (; k <= heads_gcd && k <= kMaxTried && listed < kMaxListed; ++k) {
    if (heads_gcd % k != 0) continue;
    text += (text.empty() ? "" : ", ") + std::to_string(k);
    ++listed;
  }
  if (k <= heads_gcd) text += ", ... (the divisors of " + std::to_string(heads_gcd) + ")";
  return text;
}

// The extents a dim's rule splits act on: the parts of a packed dim, else
// the whole extent.
std::vector<std::int64_t> split_lengths(const PlannedParam& param, std::size_t d) {
  if (!param.geometry.parts.empty() && static_cast<std::size_t>(param.geometry.parts_dim) == d)
    return param.geometry.parts;
  return {param.global_shape[d]};
}

// E-UNIT: an extent that is not a whole number of the rule's units (a split
// would cut one). E-EVEN: `even` and a (unit) count that does not divide.
// Both name the param, the unit and the valid sizes.
void check_even(const PlannedParam& param, const Plan& plan, const Recipe& recipe,
                GroupedReporter& rep) {
  const Mesh& mesh = plan.mesh_of(param);
  for (std::size_t d = 0; d < param.geometry.per_dim.size(); ++d) {
    for (std::int64_t len : split_lengths(param, d)) {
      bool first = true;
      for (const DimSplit& split : param.geometry.per_dim[d]) {
        if (split.fsdp) continue;
        const std::int64_t unit = std::max<std::int64_t>(1, split.unit);
        const std::string what =
            param.name + " dim " + std::to_string(d) + ": extent " + std::to_string(len);
        if (first && unit > 1 && len % unit != 0) {
          Diagnostic diag = param_diagnostic(param, DiagCode::EUnit, rule_loc(param, recipe));
          diag.message = what + " is not a whole number of units of " + std::to_string(unit) +
                         " rows: a split would cut a unit";
          diag.hint = "the unit must divide the extent (a head is head_dim rows)";
          rep.add(std::move(diag), std::to_string(param.rule.index) + ":" + std::to_string(d));
          return;
        }
        first = false;
        const std::int64_t units = len / unit;
        if (split.rule == SplitRule::Even && units % split.ways != 0) {
          if (stacked_expert(param) && d == 0) return;  // E-EXPERTS reports it
          Diagnostic diag = param_diagnostic(param, DiagCode::EEven, rule_loc(param, recipe));
          diag.message =
              unit > 1 ? what + " (" + std::to_string(units) + " units of " + std::to_string(unit) +
                             " rows) cannot split evenly over " + std::to_string(split.ways) +
                             " (" + split_axes_text(split, mesh) + ") without cutting a unit"
                       : what + " is not divisible by " + std::to_string(split.ways) + " (" +
                             split_axes_text(split, mesh) + ") under uneven: even";
          if (units < split.ways) {
            // chunk / balanced would leave ranks without a unit (for a head
            // unit: TP ranks with no attention rows): never offer them.
            diag.hint = "valid sizes (divisors of " + std::to_string(units) +
                        (unit > 1 ? " units): " : "): ") + divisors_text(units) + "; " +
                        std::to_string(units) + " < " + std::to_string(split.ways) +
                        ", so chunk or balanced would leave " + std::to_string(split.ways - units) +
                        " ranks with nothing";
          } else {
            diag.hint = (unit > 1 ? "valid sizes (divisors of " + std::to_string(units) +
                                        " units): " + divisors_text(units) + "; or "
                                  : std::string("use ")) +
                        "uneven: chunk (torch.chunk) or balanced" +
                        (unit > 1 ? " (whole units per rank)" : ", or a divisible mesh size");
          }
          rep.add(std::move(diag), std::to_string(param.rule.index) + ":" + std::to_string(d));
          return;
        }
        len = split_piece(len, 0, split).size;
      }
    }
  }
}

// E-PAD: a padded extent whose padded tensor would not fit the front end's
// numel bound (hostile pad multiples x mesh sizes).
void check_padded_size(const PlannedParam& param, const Recipe& recipe, GroupedReporter& rep) {
  if (param.uneven != SplitRule::Pad) return;
  constexpr std::int64_t kLimit = limits::kMaxNumel;
  std::int64_t total = 1;
  bool over = false;
  for (std::size_t d = 0; d < param.geometry.per_dim.size() && !over; ++d) {
    std::int64_t len = std::max<std::int64_t>(1, param.global_shape[d]);
    for (const DimSplit& split : param.geometry.per_dim[d]) {
      if (split.fsdp || split.rule != SplitRule::Pad) continue;
      over = over || __builtin_mul_overflow(split_piece(len, 0, split).size, split.ways, &len) ||
             len >= kLimit;
    }
    over = over || __builtin_mul_overflow(total, len, &total) || total >= kLimit;
  }
  if (!over) return;
  Diagnostic diag = param_diagnostic(param, DiagCode::EPad, rule_loc(param, recipe));
  diag.message = param.name + ": the padded tensor would have 2^62 or more elements";
  diag.hint = "use a smaller pad multiple";
  rep.add(std::move(diag), std::to_string(param.rule.index));
}

// The tp sharding the head-major dim of `p` (product of its rule splits).
std::int64_t head_tp(const PlannedParam& param, int dim) {
  std::int64_t tp = 1;
  if (dim >= static_cast<int>(param.geometry.per_dim.size())) return 1;
  for (const DimSplit& split : param.geometry.per_dim[static_cast<std::size_t>(dim)])
    if (!split.fsdp) tp *= split.ways;
  return tp;
}

// E-HEADS: a head-major dim sharded over tp must hold whole heads. Only the
// counts the projection carries are checked (q heads on q/o projections and
// MLA's q_b_proj / kv_b_proj, KV heads on k/v, both on fused qkv), so KV
// projections replicated on purpose never fail the q split. The message names
// only the counts that fail; the hint lists the tp sizes that divide them.
void check_heads(const PlannedParam& param, const Model& model, const Recipe& recipe,
                 GroupedReporter& rep) {
  if (param.mesh != MeshKind::Dense || param.geometry.per_dim.empty()) return;
  bool bias = false;
  const HeadModule* hm = head_module(param_module(param.name, bias));
  if (hm == nullptr || (bias && hm->dim != 0)) return;
  if (hm->dim >= static_cast<int>(param.global_shape.size()))
    return;  // a row-parallel bias is not split by head
  // A vision or audio tower's projections are checked against its own head
  // counts (issue 27: a 16-head vision q_proj at tp 5 passed on the 40 text heads).
  const ModelAttributes& attrs = model.attributes_of(param.name);
  const auto& heads = attrs.num_attention_heads;
  const std::int64_t tp = head_tp(param, hm->dim);
  if (tp <= 1) return;
  if (!heads || *heads <= 0) {
    // Nothing to check against: say so, once per rule and tp (W-HEADS-UNKNOWN).
    Diagnostic diag = param_diagnostic(param, DiagCode::WHeadsUnknown, rule_loc(param, recipe),
                                       Severity::Warning);
    diag.message = param.name + " is sharded by head (dim " + std::to_string(hm->dim) +
                   ") over tp=" + std::to_string(tp) +
                   " but the model gives no num_attention_heads: whole heads per rank not checked";
    diag.hint = std::string(diag_code_info(DiagCode::WHeadsUnknown).fix);
    rep.add(std::move(diag),
            "heads-unknown:" + std::to_string(param.rule.index) + ":" + std::to_string(tp));
    return;
  }
  const std::int64_t kv = attrs.num_key_value_heads.value_or(*heads);
  // A rule whose `unit` is a whole number of heads splits whole heads
  // (chunk / balanced / pad may then give ranks different head counts).
  const std::int64_t count = ((hm->counts & kQ) != 0 ? *heads : 0) +
                             ((hm->counts & kKV) != 0 ? (hm->counts & kQ ? 2 : 1) * kv : 0);
  const std::int64_t extent = param.global_shape[static_cast<std::size_t>(hm->dim)];
  // Megatron-Core names KV heads "query groups" (num_query_groups); its
  // linear_qkv holds, per group, the group's q heads then its k and v head.
  const bool megatron = param_module(param.name, bias) == "linear_qkv";
  const std::string kv_name = megatron ? " query groups (KV heads)" : " KV heads";
  // The tp sizes a hint suggests must pass every heads rule of the attention,
  // not only this projection's: q heads and KV heads (issue: tp 16 offered for a
  // q_proj of 32 heads when k_proj's 8 KV heads fail it).
  const std::int64_t heads_gcd = std::gcd(*heads, kv);
  if (megatron && (hm->counts & kKV) != 0 && kv > 0 && !param.geometry.parts.empty() &&
      param.geometry.parts_dim == hm->dim && extent % kv == 0) {
    // issue 29: `packed` q|k|v blocks (right for Phi-3's qkv_proj) on
    // Megatron's per-group linear_qkv took rows of groups 0, 4 and 6 on rank 0.
    Diagnostic diag = param_diagnostic(param, DiagCode::EHeads, rule_loc(param, recipe));
    diag.message =
        param.name + " is packed in " + std::to_string(param.geometry.parts.size()) +
        " parts on dim " + std::to_string(hm->dim) + " split over tp=" + std::to_string(tp) +
        ", but Megatron-Core's linear_qkv is laid out by query group (each group's " +
        std::to_string(*heads / kv) + " q heads, then its k and v head: " + std::to_string(kv) +
        " groups of " + std::to_string(extent / kv) +
        " rows; attention.py get_query_key_value_tensors): each part's piece would take "
        "rows of several groups";
    diag.hint =
        "drop `packed` and split whole query groups with `unit: " + std::to_string(extent / kv) +
        "`; valid tp sizes: " + divisors_text(kv);
    rep.add(std::move(diag),
            std::to_string(param.rule.index) + ":" + std::to_string(tp) + ":packed");
    return;
  }
  const bool whole_units = param.unit > 1 && param.uneven != SplitRule::Even && count > 0 &&
                           extent % count == 0 && param.unit % (extent / count) == 0;
  if (whole_units) {
    // chunk / balanced / pad split whole units; fewer units than tp ranks
    // leave ranks with no head at all (issue 29: `uneven: balanced` at tp 16
    // with 8 query groups planned 8 TP ranks without attention rows).
    const std::int64_t units = extent / param.unit;
    if (units >= tp) return;
    Diagnostic diag = param_diagnostic(param, DiagCode::EHeads, rule_loc(param, recipe));
    const std::string unit_name =
        megatron && (hm->counts & kKV) != 0 && kv > 0 && param.unit * kv == extent
            ? " query groups"
            : " units of " + std::to_string(param.unit) + " rows";
    diag.message = param.name + " is sharded on dim " + std::to_string(hm->dim) +
                   " over tp=" + std::to_string(tp) + " in whole units, but it has only " +
                   std::to_string(units) + unit_name + ": " + std::to_string(tp - units) + " of " +
                   std::to_string(tp) + " tp ranks would hold no attention rows";
    diag.hint = "valid tp sizes: " + divisors_text(std::gcd(heads_gcd, units)) +
                (megatron ? " (Megatron-Core requires num_query_groups % tp == 0)" : "");
    rep.add(std::move(diag),
            std::to_string(param.rule.index) + ":" + std::to_string(tp) + ":units");
    return;
  }
  // Packed q | k | v with replicated parts (vLLM's num_kv_head_replicas): q splits over
  // tp / R_q ways, k and v over tp / R_kv.
  std::int64_t q_tp = tp;
  std::int64_t kv_tp = tp;
  const auto& replicas = param.geometry.part_replicas;
  const bool qkv_parts = (hm->counts & kQ) != 0 && (hm->counts & kKV) != 0 &&
                         param.geometry.parts.size() == 3 && param.geometry.parts_dim == hm->dim;
  if (qkv_parts && replicas.size() == 3) {
    q_tp = tp / replicas[0];
    kv_tp = tp / std::max(replicas[1], replicas[2]);
  }
  const bool q_fails = (hm->counts & kQ) != 0 && *heads % q_tp != 0;
  const bool kv_fails = (hm->counts & kKV) != 0 && kv % kv_tp != 0;
  if (!q_fails && !kv_fails) return;
  std::string what;
  if (q_fails) what = std::to_string(*heads) + " attention heads";
  if (kv_fails) what += (what.empty() ? "" : " and ") + std::to_string(kv) + kv_name;
  Diagnostic diag = param_diagnostic(param, DiagCode::EHeads, rule_loc(param, recipe));
  const SubModel* sub = model.submodel_of(param.name);
  const std::int64_t ways = kv_fails ? kv_tp : q_tp;
  diag.message = param.name + " is sharded on dim " + std::to_string(hm->dim) +
                 " over tp=" + std::to_string(tp) + " but its " + what + " do" + " not divide by " +
                 std::to_string(ways) +
                 (ways != tp ? " (tp " + std::to_string(tp) + " over the part's replicas)" : "") +
                 (sub != nullptr ? " (sub-model `" + sub->prefix + "`" +
                                       (sub->config.empty() ? "" : ", " + sub->config) + ")"
                                 : "");
  diag.hint = "valid tp sizes: " + divisors_text(heads_gcd) +
              (kv != *heads ? " (dividing both the " + std::to_string(*heads) +
                                  " attention heads and the " + std::to_string(kv) + kv_name + ")"
                            : std::string());
  if (qkv_parts && !q_fails && kv > 0 && tp % kv == 0) {
    // Fewer KV heads than tp: keep q split by head and give every rank one KV head, shared by
    // tp / kv consecutive ranks (vLLM QKVParallelLinear, num_kv_head_replicas).
    const std::string kv_replicas = std::to_string(tp / kv);
    const auto& parts = param.geometry.parts;
    diag.hint +=
        "; or replicate the KV heads as vLLM does: `packed: {dim: " + std::to_string(hm->dim) +
        ", parts: [{name: q, size: " + std::to_string(parts[0]) +
        "}, {name: k, size: " + std::to_string(parts[1]) + ", replicas: " + kv_replicas +
        "}, {name: v, size: " + std::to_string(parts[2]) + ", replicas: " + kv_replicas + "}]}`";
  }
  rep.add(std::move(diag), std::to_string(param.rule.index) + ":" + std::to_string(tp) + ":" +
                               std::to_string(hm->counts));
}

// E-HEADS: a 1-D `q_norm` / `k_norm` weight (or bias) split by a rule. Every rank needs
// all of it: of [head_dim] it is shared by every head (Qwen3 / Gemma-3: RMSNorm over each
// head's head_dim entries, q_norm(q.view(..., head_dim)); transformers' tp plans keep it
// `replicated_with_grad_allreduce`); of [heads x head_dim] it normalises the whole
// projection output at once (OLMo-2: q_norm(q_proj(x)); its tp plan gathers q_proj's
// output, `colwise_gather_output`, and keeps the norm whole). A split norm reads the
// wrong entries with local tensors. Cohere's 2-D [heads, head_dim] norms are head-indexed
// (check_head_indexed).
void check_norm_split(const PlannedParam& param, const Model& model, const Recipe& recipe,
                      GroupedReporter& rep) {
  if (param.global_shape.size() != 1 || param.geometry.per_dim.size() != 1) return;
  bool bias = false;
  const std::string_view module = param_module(param.name, bias);
  if (module != "q_norm" && module != "k_norm") return;
  const std::int64_t tp = head_tp(param, 0);
  if (tp <= 1) return;
  const ModelAttributes& attrs = model.attributes_of(param.name);
  const std::int64_t extent = param.global_shape[0];
  const std::optional<std::int64_t> head_dim = attrs.head_dim_or_derived();
  std::string what = "a norm over its whole extent";
  if (head_dim && extent == *head_dim)
    what = "shared by every head (an RMSNorm over each head's " + std::to_string(extent) +
           " head_dim entries, as Qwen3's and Gemma-3's q_norm / k_norm)";
  else if (head_dim && extent % *head_dim == 0)
    what = "a norm over the whole projection output (" + std::to_string(extent / *head_dim) +
           " heads x " + std::to_string(*head_dim) +
           " at once, as OLMo-2's q_norm(q_proj(x)), whose tp plan gathers the projection's "
           "output first)";
  Diagnostic diag = param_diagnostic(param, DiagCode::EHeads, rule_loc(param, recipe));
  diag.message = param.name + " [" + std::to_string(extent) + "] is split on dim 0 over " +
                 std::to_string(tp) + " ways, but it is " + what +
                 ": every rank needs all of it, a rank holding " + std::to_string(extent / tp) +
                 " of its entries normalises with the wrong ones";
  diag.hint =
      "replicate it over the tp axes (transformers' tp plans: `replicated_with_grad_allreduce`); "
      "an `fsdp:` split is fine (storage only)";
  rep.add(std::move(diag), "norm:" + std::to_string(param.rule.index) + ":" + std::to_string(tp));
}

// The rule splits (FSDP excluded, ways > 1) of dim `dim` of `p`.
std::vector<DimSplit> head_chain(const PlannedParam& param, int dim) {
  std::vector<DimSplit> out;
  if (dim < 0 || static_cast<std::size_t>(dim) >= param.geometry.per_dim.size()) return out;
  for (const DimSplit& split : param.geometry.per_dim[static_cast<std::size_t>(dim)])
    if (!split.fsdp && split.ways > 1) out.push_back(split);
  return out;
}

bool same_chain(const std::vector<DimSplit>& first, const std::vector<DimSplit>& second) {
  if (first.size() != second.size()) return false;
  for (std::size_t i = 0; i < first.size(); ++i)
    if (first[i].axes != second[i].axes || first[i].ways != second[i].ways ||
        first[i].rule != second[i].rule)
      return false;
  return true;
}

std::string chain_text(const std::vector<DimSplit>& chain, const Mesh& mesh) {
  if (chain.empty()) return "replicated";
  std::string text;
  for (const DimSplit& split : chain)
    text += (text.empty() ? "" : ", then ") + split_axes_text(split, mesh) + " (" +
            std::to_string(split.ways) + " ways, " + split_rule_name(split.rule) + ")";
  return "split over " + text;
}

// The attention module of a head-indexed param: `a.self_attn.sinks` ->
// `a.self_attn`, `a.self_attn.q_norm.weight` -> `a.self_attn`.
std::string_view attention_module(std::string_view fqn) {
  auto dot = fqn.rfind('.');
  if (dot == std::string_view::npos) return {};
  const std::string_view leaf = fqn.substr(dot + 1);
  fqn = fqn.substr(0, dot);
  if (leaf == "weight" || leaf == "bias") {
    dot = fqn.rfind('.');
    if (dot == std::string_view::npos) return {};
    fqn = fqn.substr(0, dot);
  }
  return fqn;
}

// The projection of `module` whose head-major rows a head-indexed param
// follows: q (q_proj, wq, q_b_proj, a fused qkv) or, for `kv`, k (k_proj, wk, a
// fused qkv).
const PlannedParam* head_projection(
    std::string_view module, bool kv, const std::vector<PlannedParam>& params,
    const std::unordered_map<std::string_view, std::size_t>& by_name) {
  static constexpr std::string_view kQ[] = {"q_proj", "wq",   "q_b_proj",        "qkv_proj",  "qkv",
                                            "wqkv",   "Wqkv", "query_key_value", "linear_qkv"};
  static constexpr std::string_view kK[] = {"k_proj", "wk",   "qkv_proj",        "qkv",
                                            "wqkv",   "Wqkv", "query_key_value", "linear_qkv"};
  const auto try_names = [&](const auto& names) -> const PlannedParam* {
    for (std::string_view name : names) {
      const std::string fqn = std::string(module) + "." + std::string(name) + ".weight";
      if (const auto it = by_name.find(fqn); it != by_name.end()) return &params[it->second];
    }
    return nullptr;
  };
  return kv ? try_names(kK) : try_names(kQ);
}

// W-HEAD-INDEXED / E-HEADS (contract §5.13): a head-indexed param must be
// split on its head dim exactly as its projection's head rows are (same axes,
// ways and rule), so each rank holds the entries of the heads it computes.
// The first rank coordinate (other axes at 0) whose piece of `have` (extent
// `heads`) covers other heads than its piece of `want` (extent `rows`, head-major):
// (rank, its entries [s, e), the heads of its projection rows [hs, he)); nullopt when
// every coordinate agrees. Bounded: at most 4096 coordinates, else the chains are
// compared split by split.
struct HeadMismatch {
  std::int64_t rank = 0;
  std::int64_t start = 0;
  std::int64_t end = 0;
  std::int64_t head_start = 0;
  std::int64_t head_end = 0;
};

std::optional<HeadMismatch> head_mismatch(std::int64_t rows, const std::vector<DimSplit>& want,
                                          std::int64_t heads, const std::vector<DimSplit>& have,
                                          const Mesh& mesh) {
  constexpr std::int64_t kMaxCoords = 4096;
  std::vector<int> axes;
  for (const auto* chain : {&want, &have})
    for (const DimSplit& split : *chain)
      for (int axis : split.axes)
        if (std::find(axes.begin(), axes.end(), axis) == axes.end()) axes.push_back(axis);
  std::int64_t total = 1;
  for (int axis : axes) {
    total *= mesh.axes[static_cast<std::size_t>(axis)].size;
    if (total > kMaxCoords) {
      if (same_chain(want, have)) return std::nullopt;
      return HeadMismatch{};
    }
  }
  std::vector<std::int64_t> stride(mesh.axes.size(), 1);
  for (std::size_t a = mesh.axes.size(); a-- > 1;) stride[a - 1] = stride[a] * mesh.axes[a].size;
  std::vector<std::int64_t> coords(mesh.axes.size(), 0);
  for (std::int64_t k = 0; k < total; ++k) {
    std::int64_t rem = k;
    for (std::size_t i = axes.size(); i-- > 0;) {
      const auto axis = static_cast<std::size_t>(axes[i]);
      coords[axis] = rem % mesh.axes[axis].size;
      rem /= mesh.axes[axis].size;
    }
    const DimPiece row_piece = apply_chain(rows, want, coords);
    const DimPiece head_piece = apply_chain(heads, have, coords);
    // Same heads: the pieces cover the same fraction of their extents.
    const i128 qs = static_cast<i128>(row_piece.start) * heads;
    const i128 qe = static_cast<i128>(row_piece.start + row_piece.real) * heads;
    const i128 vs = static_cast<i128>(head_piece.start) * rows;
    const i128 ve = static_cast<i128>(head_piece.start + head_piece.real) * rows;
    if (qs == vs && (qe == ve || (row_piece.real == 0 && head_piece.real == 0))) continue;
    std::int64_t rank = 0;
    for (std::size_t a = 0; a < coords.size(); ++a) rank += coords[a] * stride[a];
    return HeadMismatch{rank, head_piece.start, head_piece.start + head_piece.real,
                        static_cast<std::int64_t>(qs / rows), static_cast<std::int64_t>(qe / rows)};
  }
  return std::nullopt;
}

// W-HEAD-INDEXED / E-HEADS (contract §5.13): a head-indexed param must be
// split on its head dim as its projection's head rows are, so that each rank
// holds the entries of the heads it computes (whatever split rule gives them).
// The plan's params, by name, with the plan and recipe: what a check of one
// param against another reads.
struct ParamLookup {
  const std::vector<PlannedParam>& params;
  const std::unordered_map<std::string_view, std::size_t>& by_name;
  const Plan& plan;
  const Recipe& recipe;
};

void check_head_indexed(const PlannedParam& param, const HeadIndexed& indexed,
                        const ParamLookup& lookup, GroupedReporter& rep) {
  const PlannedParam* proj =
      head_projection(attention_module(param.name), indexed.kv, lookup.params, lookup.by_name);
  if (proj == nullptr || proj->mesh != param.mesh ||
      proj->geometry.per_dim.size() != proj->global_shape.size() || proj->global_shape.empty())
    return;
  const std::vector<DimSplit> want = head_chain(*proj, 0);
  const std::vector<DimSplit> have = head_chain(param, indexed.dim);
  if (want.empty() && have.empty()) return;
  // A packed projection (q|k|v parts on dim 0) splits each part: its q (first) part
  // carries the q heads, the k part the KV heads.
  std::int64_t rows = proj->global_shape[0];
  if (!proj->geometry.parts.empty() && proj->geometry.parts_dim == 0)
    rows = proj->geometry.parts[indexed.kv && proj->geometry.parts.size() > 1 ? 1 : 0];
  const std::int64_t heads = param.global_shape[static_cast<std::size_t>(indexed.dim)];
  const Mesh& mesh = lookup.plan.mesh_of(param);
  const std::optional<HeadMismatch> bad = head_mismatch(rows, want, heads, have, mesh);
  if (!bad) return;
  const std::string what = std::string(indexed.kv ? "KV head" : "q head");
  const bool replicated = have.empty();
  Diagnostic diag = param_diagnostic(param, replicated ? DiagCode::WHeadIndexed : DiagCode::EHeads,
                                     rule_loc(param, lookup.recipe),
                                     replicated ? Severity::Warning : Severity::Error);
  diag.message = param.name + " is indexed by " + what + " on dim " + std::to_string(indexed.dim) +
                 " (" + indexed.source + "), but it is " + chain_text(have, mesh) + " while " +
                 proj->name + " holds its heads " + chain_text(want, mesh) + ": rank " +
                 std::to_string(bad->rank) + " holds entries " + std::to_string(bad->start) + ".." +
                 std::to_string(bad->end - 1) + " but computes heads " +
                 std::to_string(bad->head_start) + ".." + std::to_string(bad->head_end - 1) +
                 (replicated ? " (every head's entries, not those of its own heads)" : "");
  diag.hint = want.empty() ? "replicate it as " + proj->name + " is"
                           : "split dim " + std::to_string(indexed.dim) + " as " + proj->name +
                                 "'s dim 0: `Shard(" + std::to_string(indexed.dim) + ")` over " +
                                 split_axes_text(want.front(), mesh) + " with its rule's `uneven`";
  rep.add(std::move(diag), std::to_string(param.rule.index) + ":" + (replicated ? "r" : "s") + ":" +
                               std::to_string(proj->rule.index));
}

// A bitsandbytes quantization state and the weight it belongs to: 8-bit `X.SCB`
// (one absmax scale per weight row: Int8Params.SCB, int8_vectorwise_dequant(weight,
// SCB) in transformers integrations/bitsandbytes.py) -> `X.weight`, per row; 4-bit
// `X.weight.absmax`, `.quant_map`, `.nested_absmax`, `.nested_quant_map`,
// `.quant_state.bitsandbytes__nf4|fp4` (quantizer_bnb_4bit.py serialized_names: blocks
// of the flattened weight) -> `X.weight`, per block.
struct QuantState {
  std::string weight;
  bool per_row = false;
};

std::optional<QuantState> quant_state_of(std::string_view fqn) {
  if (fqn.ends_with(".SCB"))
    return QuantState{std::string(fqn.substr(0, fqn.size() - 4)) + ".weight", true};
  for (std::string_view leaf : {".weight.absmax", ".weight.quant_map", ".weight.nested_absmax",
                                ".weight.nested_quant_map"}) {
    if (fqn.ends_with(leaf))
      return QuantState{std::string(fqn.substr(0, fqn.size() - leaf.size())) + ".weight", false};
  }
  if (const auto at = fqn.find(".weight.quant_state."); at != std::string_view::npos)
    return QuantState{std::string(fqn.substr(0, at)) + ".weight", false};
  return std::nullopt;
}

// E-QUANT-STATE: a quantization state must follow its weight's rule split
// (vllm#11802: at tp 2 the int8 weight was row-split while its per-row SCB was
// replicated, silently). A per-row state follows the weight's dim 0; a per-block state
// of the flattened weight cannot follow any rule split.
void check_quant_state(const PlannedParam& param, const QuantState& quant,
                       const ParamLookup& lookup, GroupedReporter& rep) {
  const auto it = lookup.by_name.find(quant.weight);
  if (it == lookup.by_name.end()) return;
  const PlannedParam& weight = lookup.params[it->second];
  if (weight.geometry.per_dim.size() != weight.global_shape.size() || weight.global_shape.empty())
    return;
  const Mesh& mesh = lookup.plan.mesh_of(param);
  Diagnostic diag = param_diagnostic(param, DiagCode::EQuantState, rule_loc(param, lookup.recipe));
  if (quant.per_row) {
    if (param.global_shape.size() != 1 || param.global_shape[0] != weight.global_shape[0]) return;
    const std::vector<DimSplit> want = head_chain(weight, 0);
    const std::vector<DimSplit> have = head_chain(param, 0);
    if (same_chain(want, have) && weight.mesh == param.mesh) return;
    diag.message = param.name + " holds one scale per row of " + weight.name +
                   " (bitsandbytes SCB), but it " + "is " + chain_text(have, mesh) +
                   " while the weight's rows are " + chain_text(want, lookup.plan.mesh_of(weight)) +
                   ": a rank would dequantize its rows with other rows' scales";
    diag.hint = want.empty() ? "replicate it as its weight's rows are"
                             : "give it its weight's rule: `Shard(0)` over " +
                                   split_axes_text(want.front(), lookup.plan.mesh_of(weight)) +
                                   " with the same `uneven`";
  } else {
    bool split = false;
    for (int dim = 0; dim < static_cast<int>(weight.global_shape.size()); ++dim)
      split = split || !head_chain(weight, dim).empty();
    for (int dim = 0; dim < static_cast<int>(param.global_shape.size()); ++dim)
      split = split || !head_chain(param, dim).empty();
    if (!split) return;
    diag.message = param.name + " is a bitsandbytes 4-bit state of " + weight.name +
                   " (blocks of the flattened weight), but the weight or the state is split by a "
                   "rule: the blocks of a rank's piece are not a piece of the state";
    diag.hint =
        "replicate the 4-bit weight and its states over the rule axes (FSDP may shard "
        "them), or plan the dequantized checkpoint";
  }
  rep.add(std::move(diag), std::to_string(param.rule.index) + ":" +
                               std::to_string(weight.rule.index) +
                               (quant.per_row ? ":row" : ":block"));
}

void check_experts(const PlannedParam& param, const Plan& plan, const Recipe& recipe,
                   GroupedReporter& rep) {
  if (!stacked_expert(param) || param.geometry.per_dim.empty()) return;
  const std::int64_t experts = param.global_shape[0];
  std::int64_t ep = 1;
  for (const DimSplit& split : param.geometry.per_dim[0])
    if (!split.fsdp) ep *= split.ways;
  if (ep <= 1 || experts % ep == 0) return;
  Diagnostic diag = param_diagnostic(param, DiagCode::EExperts, rule_loc(param, recipe));
  if (param.uneven == SplitRule::Even) {
    diag.code = DiagCode::EExperts;
    diag.message = "stacked " + param.name + ": " + std::to_string(experts) +
                   " experts over ep=" + std::to_string(ep) + " do not divide under uneven: even";
    diag.hint = "valid ep sizes divide " + std::to_string(experts) + ": " + divisors_text(experts);
    rep.add(std::move(diag), std::to_string(param.rule.index) + ":" + std::to_string(experts));
    return;
  }
  diag.severity = Severity::Warning;
  diag.code = DiagCode::WExperts;
  diag.message = "stacked " + param.name + ": " + std::to_string(experts) +
                 " experts over ep=" + std::to_string(ep) + " (" + split_rule_name(param.uneven) +
                 ")";
  // Expert range of each ep coordinate: the dim-0 pieces of the non-FSDP splits.
  const Mesh& mesh = plan.mesh_of(param);
  std::vector<std::int64_t> coords(mesh.axes.size(), 0);
  std::string ranges;
  // At most kMaxListed coordinates: ep may be near 2^31 on hostile meshes.
  constexpr std::int64_t kMaxListed = 256;
  for (std::int64_t k = 0; k < ep && k < kMaxListed; ++k) {
    std::int64_t rem = k;
    for (auto it = param.geometry.per_dim[0].rbegin(); it != param.geometry.per_dim[0].rend();
         ++it) {
      if (it->fsdp) continue;
      for (std::size_t i = it->axes.size(); i-- > 0;) {
        coords[static_cast<std::size_t>(it->axes[i])] = rem % it->axis_sizes[i];
        rem /= it->axis_sizes[i];
      }
    }
    std::int64_t start = 0;
    std::int64_t len = experts;
    for (const DimSplit& split : param.geometry.per_dim[0]) {
      if (split.fsdp) continue;
      const Piece piece = split_piece(len, split_coord(split, coords), split);
      start += piece.start;
      len = piece.size;
    }
    diag.ranges.emplace_back(start, start + len);
    ranges += (ranges.empty() ? "" : ", ") + std::to_string(k) + ": [" + std::to_string(start) +
              ", " + std::to_string(start + len) + ")";
  }
  if (ep > kMaxListed) ranges += ", ... (" + std::to_string(ep - kMaxListed) + " more)";
  diag.hint = "experts per ep coordinate: " + ranges +
              "; frameworks differ on uneven experts (this plan uses " +
              split_rule_name(param.uneven) + ")";
  // One warning per (entry, E, ep): every stacked param of an entry gets the
  // same expert ranges, so the flood groups as "(and N more like it)".
  rep.add(std::move(diag), std::to_string(param.rule.index) + ":" + std::to_string(experts) + ":" +
                               std::to_string(ep) + ":" + split_rule_name(param.uneven));
}

}  // namespace

void run_checks(const std::vector<PlannedParam>& params, const Plan& plan, const Model& model,
                const Recipe& recipe, DiagnosticSink& sink) {
  GroupedReporter even;
  GroupedReporter heads;
  GroupedReporter head_indexed;
  GroupedReporter experts;
  // The model's `head_indexed:` entries, else the names and shapes shardc knows.
  std::vector<std::optional<HeadIndexed>> indexed(params.size());
  std::vector<std::optional<QuantState>> quant(params.size());
  bool any_head_indexed = false;
  for (std::size_t i = 0; i < params.size(); ++i) {
    const PlannedParam& param = params[i];
    indexed[i] = param.head_indexed;
    if (!indexed[i] && param.stacked_from.empty())
      indexed[i] =
          known_head_indexed(param.name, param.global_shape, model.attributes_of(param.name), "");
    quant[i] = quant_state_of(param.name);
    any_head_indexed = any_head_indexed || indexed[i].has_value() || quant[i].has_value();
  }
  std::unordered_map<std::string_view, std::size_t> by_name;
  if (any_head_indexed) {
    by_name.reserve(params.size());
    for (std::size_t i = 0; i < params.size(); ++i) by_name.emplace(params[i].name, i);
  }
  const ParamLookup lookup{params, by_name, plan, recipe};
  for (std::size_t i = 0; i < params.size(); ++i) {
    const PlannedParam& param = params[i];
    if (param.geometry.per_dim.size() != param.global_shape.size()) continue;  // placements failed
    check_even(param, plan, recipe, even);
    check_padded_size(param, recipe, even);
    check_heads(param, model, recipe, heads);
    check_norm_split(param, model, recipe, heads);
    if (indexed[i] && static_cast<std::size_t>(indexed[i]->dim) < param.global_shape.size())
      check_head_indexed(param, *indexed[i], lookup, head_indexed);
    if (quant[i]) check_quant_state(param, *quant[i], lookup, heads);
    check_experts(param, plan, recipe, experts);
  }
  even.flush(sink);
  heads.flush(sink);
  head_indexed.flush(sink);
  experts.flush(sink);
}

std::string split_axes_text(const DimSplit& split, const Mesh& mesh) {
  std::string text;
  for (int axis : split.axes)
    text += (text.empty() ? "" : "x") + mesh.axes[static_cast<std::size_t>(axis)].name;
  return text;
}

}  // namespace shardc::passes
