// Hugging Face tensor-parallel plans (transformers' `model.tp_plan`) as shardc
// recipes: `shardc recipe --from-hf-tp-plan PLAN MODEL --tp N`.
//
// Source of each style's placement: transformers/distributed/tensor_parallel.py
// (ColwiseParallel shards a Linear weight on dim -2 and its bias on dim -1,
// RowwiseParallel the weight on dim -1 and replicates the bias, EmbeddingParallel
// "rowwise" the vocab rows, the Packed* styles the same dims part by part).
//
// An entry may name a param instead of a module (transformers 5.24
// `apply_tensor_parallelism`: `if name in parameters: style.shard_param(...)`), as
// the MoE plans name the experts' 3-D params (`experts.gate_up_proj`): the param
// gets what the style's `shard_param` gives a tensor of its rank — colwise
// Shard(ndim - 2), rowwise Shard(-1) (a `bias` leaf Replicate), packed_colwise
// `_StridedShard(ndim - 2, split_factor=2)` (Shard(-1) for 1-D), packed_rowwise
// `_StridedShard(-1, split_factor=2)` (Replicate for 1-D): the same labels, which
// shardc states as DTensor reads them (docs/shard-order.md). Module-forward styles
// with no param of their own (moe_tp_experts, moe_identity_expert, local_params)
// add no rule. The experts of Mixtral, Qwen3-MoE and DeepSeek-V3 are stored per
// expert in the checkpoint and fused by transformers' loader (conversion_mapping.py:
// MergeModulelist(dim=0), then Concatenate(dim=1) of gate and up): their entries name
// transformers' fused param, and the dump's `sources` says which checkpoint tensors
// make it. Each of those gets the placement transformers' loader gives it when it
// fills the fused DTensor (sharding_utils.py DtensorShardOperation.shard_tensor, the
// per-expert path: a tensor of one expert, dims shifted by the stacked dim 0, each
// sharded dim cut contiguously): `_StridedShard(1, sf=2)` of gate_up_proj is Shard(0)
// of each expert's gate and of its up, rowwise `Shard(-1)` of down_proj Shard(1) of
// each expert's down. A placement that is no per-tensor one (dim 0 of the stacked
// experts: expert parallelism) stays E-HF-TP-PLAN, naming the entry and why.
#include <simdjson.h>

#include <algorithm>
#include <array>
#include <sstream>
#include <vector>

#include "import/import.hpp"
#include "support/pattern.hpp"

namespace shardc {
namespace {

struct StyleSpec {
  std::string_view style;
  std::string_view weight;  ///< placement of `.weight` ("" = replicated)
  std::string_view bias;    ///< placement of `.bias` ("" = replicated)
  bool packed = false;      ///< gate|up halves split part by part (`packed: {parts: 2}`)
};

constexpr std::array kStyles = {
    StyleSpec{"colwise", "Shard(-2)", "Shard(-1)"},
    StyleSpec{"colwise_rep", "Shard(-2)", "Shard(-1)"},
    StyleSpec{"colwise_gather_output", "Shard(-2)", "Shard(-1)"},
    StyleSpec{"rowwise", "Shard(-1)", ""},
    StyleSpec{"rowwise_rep", "Shard(-1)", ""},
    StyleSpec{"rowwise_split_input", "Shard(-1)", ""},
    StyleSpec{"embedding_rowwise", "Shard(0)", ""},
    StyleSpec{"embedding_colwise", "Shard(1)", ""},
    StyleSpec{"packed_colwise", "Shard(-2)", "Shard(-1)", true},
    StyleSpec{"packed_rowwise", "Shard(-1)", "", true},
    StyleSpec{"sequence_parallel", "", ""},
    StyleSpec{"replicated_with_grad_allreduce", "", ""},
    StyleSpec{"all_reduce", "", ""},
    StyleSpec{"replicate", "", ""},
    StyleSpec{"local_params", "", ""},
};

// Styles that only hook a module's forward: no param of their own to place
// (tensor_parallel.py MoeExpertsParallel, MoeIdentityParallel, LocalParamsParallel).
constexpr std::array<std::string_view, 3> kForwardOnly = {"moe_tp_experts", "moe_identity_expert",
                                                          "local_params"};

bool forward_only(std::string_view style) {
  for (std::string_view hook_style : kForwardOnly)
    if (hook_style == style) return true;
  return false;
}

// The placement a style's `shard_param` gives a param named by the entry itself ("" =
// replicated); nullopt when the style has no such rule (tensor_parallel.py, 5.24).
std::optional<std::string> direct_placement(std::string_view style, const Param& param) {
  const std::size_t ndim = param.shape.size();
  const bool bias = param.name.ends_with(".bias");
  if (style == "colwise" || style == "colwise_rep" || style == "colwise_gather_output")
    return ndim >= 2 ? "Shard(-2)" : "Shard(-1)";
  if (style == "rowwise" || style == "rowwise_rep" || style == "rowwise_split_input")
    return bias ? "" : "Shard(-1)";
  if (style == "packed_colwise") return ndim >= 2 ? "_StridedShard(-2, sf=2)" : "Shard(-1)";
  if (style == "packed_rowwise") return ndim >= 2 ? "_StridedShard(-1, sf=2)" : "";
  if (style == "replicate" || style == "replicated_with_grad_allreduce") return "";
  return std::nullopt;
}

const StyleSpec* find_style(std::string_view style) {
  for (const StyleSpec& spec : kStyles) {
    if (spec.style == style) return &spec;
  }
  return nullptr;
}

// A double-quoted YAML scalar (the patterns are FQN globs: no control characters).
std::string yaml_quoted(std::string_view text) {
  std::string out = "\"";
  for (const char ch : text) {
    if (ch == '"' || ch == '\\') out += '\\';
    out += ch;
  }
  return out + "\"";
}

// The packed dim of a placement `Shard(d)` as the recipe spells it.
std::string_view shard_dim_of(std::string_view placement) {
  return placement.substr(6, placement.size() - 7);
}

// A placement as the style gives it: "" (replicated), "Shard(d)" or
// "_StridedShard(d, sf=k)" (split_factor 1 for Shard).
struct PlacementLabel {
  bool replicated = true;
  std::int64_t dim = 0;
  std::int64_t split_factor = 1;
  bool strided = false;
};

std::optional<PlacementLabel> read_label(std::string_view text) {
  PlacementLabel label;
  if (text.empty()) return label;
  label.replicated = false;
  std::string_view rest;
  if (text.starts_with("Shard(") && text.ends_with(")")) {
    rest = text.substr(6, text.size() - 7);
  } else if (text.starts_with("_StridedShard(") && text.ends_with(")")) {
    label.strided = true;
    rest = text.substr(14, text.size() - 15);
    const std::size_t comma = rest.find(", sf=");
    if (comma == std::string_view::npos) return std::nullopt;
    label.split_factor = std::stoll(std::string(rest.substr(comma + 5)));
    rest = rest.substr(0, comma);
  } else {
    return std::nullopt;
  }
  label.dim = std::stoll(std::string(rest));
  return label;
}

std::string ops_text(const HfSource& source) {
  std::string text;
  for (const auto& [op, dim] : source.operations) {
    if (!text.empty()) text += " + ";
    text += op + (dim ? "(dim=" + std::to_string(*dim) + ")" : "()");
  }
  return text.empty() ? "a renaming" : text;
}

const Param* find_param(const Model& model, std::string_view name) {
  for (const Param& param : model.params)
    if (param.name == name) return &param;
  return nullptr;
}

// One checkpoint tensor's rule: its placement and the comment saying where it comes from.
struct PlacedTensor {
  std::string name;
  std::string placement;  ///< "" = replicated
  std::string comment;
  std::string packed_dim = {};  ///< a packed style's split dim (`packed: {parts: 2}`), or ""
};

// The placement transformers' loader gives each checkpoint tensor of `source` when the
// fused param has `placement` (sharding_utils.py DtensorShardOperation.shard_tensor:
// a renamed tensor is cut as the param; a tensor of one expert, the `tensor_idx`-th of
// the list MergeModulelist stacks, has the param's dim d as its dim d - 1 and each
// sharded dim cut contiguously, `_compute_contiguous_slice`, whatever the label's
// split factor). nullopt and `reason` when no placement of the tensor states it.
std::optional<std::vector<PlacedTensor>> place_sources(const HfSource& source,
                                                       const std::string& placement,
                                                       const Model& model,
                                                       const std::string& comment,
                                                       std::string& reason) {
  const std::optional<PlacementLabel> label = read_label(placement);
  const auto ndim = static_cast<std::int64_t>(source.shape.size());
  if (!label || ndim == 0) {
    reason = "its placement '" + placement + "' is not one shardc reads";
    return std::nullopt;
  }
  std::vector<PlacedTensor> out;
  if (source.operations.empty()) {  // a renaming: the checkpoint tensor is the param
    for (const auto& part : source.parts)
      for (const std::string& key : part) out.push_back({key, placement, comment});
    return out;
  }
  const bool merged = source.operations.front().first == "MergeModulelist" &&
                      source.operations.front().second.value_or(-1) == 0;
  const bool concatenated = source.operations.size() == 2 &&
                            source.operations.back().first == "Concatenate" &&
                            source.operations.back().second.has_value();
  if (!merged || source.operations.size() > 2 || (source.operations.size() == 2 && !concatenated)) {
    reason = "transformers makes it by " + ops_text(source) +
             ", and shardc translates only a renaming, MergeModulelist(dim=0), and "
             "MergeModulelist(dim=0) then Concatenate";
    return std::nullopt;
  }
  std::int64_t concat_dim = -1;
  if (concatenated) {
    concat_dim = *source.operations.back().second;
    if (concat_dim < 0) concat_dim += ndim;
  }
  const auto parts = static_cast<std::int64_t>(source.parts.size());
  if (parts == 0 || (!concatenated && parts != 1) || (concatenated && concat_dim < 1) ||
      (concatenated && source.shape[static_cast<std::size_t>(concat_dim)] % parts != 0)) {
    reason = "its " + std::to_string(parts) + " part(s) do not make a " + shape_text(source.shape) +
             " tensor by " + ops_text(source);
    return std::nullopt;
  }
  // every part: shape[0] tensors of shape[1:] (the concatenated dim split in `parts`)
  Shape tensor_shape(source.shape.begin() + 1, source.shape.end());
  if (concatenated) tensor_shape[static_cast<std::size_t>(concat_dim - 1)] /= parts;
  for (const auto& part : source.parts) {
    if (static_cast<std::int64_t>(part.size()) != source.shape.front()) {
      reason = "a part has " + std::to_string(part.size()) + " checkpoint tensors, not the " +
               std::to_string(source.shape.front()) + " of its dim 0";
      return std::nullopt;
    }
    for (const std::string& key : part) {
      const Param* param = find_param(model, key);
      if (param == nullptr || param->shape != tensor_shape) {
        reason = "its checkpoint tensor '" + key + "' " +
                 (param == nullptr
                      ? std::string("is not in the checkpoint")
                      : "is " + shape_text(param->shape) + ", not " + shape_text(tensor_shape));
        return std::nullopt;
      }
    }
  }
  std::string tensor_placement;
  if (!label->replicated) {
    const std::int64_t dim = label->dim < 0 ? label->dim + ndim : label->dim;
    if (dim == 0) {
      reason = "'" + placement +
               "' splits the stacked experts (dim 0): it deals whole experts to ranks, "
               "which is expert parallelism, no placement of one expert's tensor (write an "
               "`experts` entry with an ep axis, docs/experts.md)";
      return std::nullopt;
    }
    if (dim == concat_dim && !(label->strided && label->split_factor == parts)) {
      reason = "'" + placement + "' cuts the dim Concatenate joins " + std::to_string(parts) +
               " parts on as one run, while transformers' loader cuts each part on its own "
               "(DtensorShardOperation): only _StridedShard(" +
               std::to_string(dim) + ", sf=" + std::to_string(parts) + ") is that";
      return std::nullopt;
    }
    if (dim != concat_dim && label->strided) {
      reason = "'" + placement + "' is strided on a dim the converter does not concatenate";
      return std::nullopt;
    }
    tensor_placement = "Shard(" + std::to_string(dim - 1) + ")";
  }
  for (std::size_t i = 0; i < source.parts.size(); ++i) {
    const std::string which =
        parts > 1 ? " (part " + std::to_string(i + 1) + " of " + std::to_string(parts) + ")" : "";
    for (const std::string& key : source.parts[i])
      out.push_back({key, tensor_placement, comment + which});
  }
  return out;
}

// `name` with every all-digit segment as `*` (the layer and expert indices).
std::string generalized(std::string_view name) {
  std::string out;
  std::size_t begin = 0;
  while (begin <= name.size()) {
    const std::size_t end = std::min(name.find('.', begin), name.size());
    const std::string_view segment = name.substr(begin, end - begin);
    if (!out.empty()) out += '.';
    const bool digits =
        !segment.empty() &&
        std::all_of(segment.begin(), segment.end(), [](char ch) { return ch >= '0' && ch <= '9'; });
    out += digits ? std::string_view("*") : segment;
    begin = end + 1;
  }
  return out;
}

// The rules placing `placed`: one rule per run of names that differ only in their
// indices and share a placement, when its pattern takes no other param of `model`;
// else one rule per name.
void emit_placed(std::ostringstream& rules, const std::vector<PlacedTensor>& placed,
                 const Model& model) {
  struct Group {
    std::string pattern;
    const PlacedTensor* first = nullptr;
    std::vector<const PlacedTensor*> members;
  };
  std::vector<Group> groups;
  for (const PlacedTensor& tensor : placed) {
    const std::string pattern = generalized(tensor.name);
    auto group = std::find_if(groups.begin(), groups.end(), [&](const Group& known) {
      return known.pattern == pattern && known.first->placement == tensor.placement &&
             known.first->comment == tensor.comment;
    });
    if (group == groups.end()) group = groups.insert(groups.end(), Group{pattern, &tensor, {}});
    group->members.push_back(&tensor);
  }
  const auto emit = [&](const std::string& match, const PlacedTensor& tensor) {
    rules << "  - match: " << yaml_quoted(match) << "    # " << tensor.comment << "\n";
    if (tensor.placement.empty()) {
      rules << "    placements: {}\n";
    } else {
      rules << "    placements: {tp: " << yaml_quoted(tensor.placement) << "}\n";
    }
    if (!tensor.packed_dim.empty()) {
      rules << "    packed: {parts: 2, dim: " << tensor.packed_dim << "}\n";
    }
  };
  for (const Group& group : groups) {
    std::string error;
    const std::optional<Pattern> pattern = Pattern::compile(group.pattern, error);
    std::size_t taken = 0;
    if (pattern) {
      for (const Param& param : model.params) taken += pattern->match(param.name) ? 1 : 0;
    }
    if (pattern && taken == group.members.size()) {
      emit(group.pattern, *group.first);
    } else {
      for (const PlacedTensor* tensor : group.members) emit(tensor->name, *tensor);
    }
  }
}

// The ep_plan key that takes a tp_plan key (transformers' mixin.py: a tp rule whose name
// is an ep rule's or lies below it is dropped), or null.
const std::string* ep_override(const HfTpPlan& plan, const std::string& tp_key) {
  for (const auto& [ep_key, ep_style] : plan.ep_entries)
    if (tp_key == ep_key || (tp_key.size() > ep_key.size() && tp_key.starts_with(ep_key) &&
                             tp_key[ep_key.size()] == '.'))
      return &ep_key;
  return nullptr;
}

bool all_digits(std::string_view segment) {
  return !segment.empty() && std::all_of(segment.begin(), segment.end(),
                                         [](char ch) { return ch >= '0' && ch <= '9'; });
}

std::vector<std::string> segments_of(std::string_view name) {
  std::vector<std::string> out;
  std::size_t begin = 0;
  while (begin <= name.size()) {
    const std::size_t end = std::min(name.find('.', begin), name.size());
    out.emplace_back(name.substr(begin, end - begin));
    begin = end + 1;
  }
  return out;
}

// An `experts` entry stacking one source pattern's per-expert checkpoint tensors `keys`
// (expert 0 first, as MergeModulelist stacks them): the segment that counts 0, 1, ... is
// `{E}`, every other all-digit segment a capture `{L}`, `{L2}`, ...; the stacked param is
// the pattern without its `{E}` segment and a trailing `weight`. nullopt and `reason` when the keys
// do not count their experts in one segment.
std::optional<std::pair<std::string, std::string>> per_expert_entry(
    const std::vector<std::string>& keys, std::string& reason) {
  const std::vector<std::string> first = segments_of(keys.front());
  std::optional<std::size_t> expert_at;
  for (std::size_t i = 0; i < first.size(); ++i) {
    bool counts = all_digits(first[i]);
    for (std::size_t e = 0; counts && e < keys.size(); ++e) {
      const std::vector<std::string> seg = segments_of(keys[e]);
      counts = seg.size() == first.size() && seg[i] == std::to_string(e);
    }
    if (counts) expert_at = i;
  }
  if (!expert_at || keys.size() < 2) {
    reason = "its checkpoint tensors ('" + keys.front() +
             "', ...) do not count the experts 0, 1, ... in one name segment";
    return std::nullopt;
  }
  std::string match;
  std::string stack;
  int captures = 0;
  for (std::size_t i = 0; i < first.size(); ++i) {
    std::string seg = first[i];
    if (i == *expert_at) {
      seg = "{E}";
    } else if (all_digits(seg)) {
      seg = ++captures == 1 ? "{L}" : "{L" + std::to_string(captures) + "}";
    }
    match += (match.empty() ? "" : ".") + seg;
    // the stacked param is named like the module's (`experts.w1`, as transformers'
    // `experts.gate_up_proj`): a trailing `weight` segment goes
    const bool leaf = i + 1 == first.size() && seg == "weight";
    if (i != *expert_at && !leaf) stack += (stack.empty() ? "" : ".") + seg;
  }
  return std::pair{match, stack};
}

// The `experts` entries of the ep_plan (`hf_tp_plan_recipe`), written to `out`; false
// after reporting.
bool ep_entries_text(const HfTpPlan& plan, const Model& model, HfParallelSizes sizes,
                     const SourceLoc& loc, DiagnosticSink& sink, std::ostringstream& out) {
  if (sizes.ep != sizes.tp) {
    sink.error(DiagCode::EHfTpPlan, loc,
               "--ep " + std::to_string(sizes.ep) + " with --tp " + std::to_string(sizes.tp) +
                   ": transformers 5.24 lays experts out on (pp, dp_replicate, efsdp, ep) with "
                   "efsdp = fsdp x tp / ep and needs ep a multiple of tp dividing fsdp x tp, so "
                   "without FSDP ep equals tp",
               "use --ep " + std::to_string(sizes.tp) +
                   " (expert parallelism with FSDP is not translated: write the recipe's "
                   "expert_mesh and fsdp.expert_shard by hand, docs/experts.md)");
    return false;
  }
  if (plan.ep_entries.empty()) {
    sink.error(
        DiagCode::EHfTpPlan, loc,
        "--ep " + std::to_string(sizes.ep) + ": the plan file has no `ep_plan` (" +
            (plan.architecture.empty() ? std::string("the architecture") : plan.architecture) +
            " has no base_model_ep_plan, or the dump predates it)",
        "dump the plan again with tools/hf_tp_plan.py; without an ep_plan transformers "
        "refuses ep_size > 1 too");
    return false;
  }
  std::vector<std::pair<std::string, std::string>> seen;  // (match, stack) already written
  bool ok = true;
  for (const auto& [pattern_text, style] : plan.ep_entries) {
    if (style == "ep_dispatch_experts") {
      out << "  # " << pattern_text
          << ": ep_dispatch_experts hooks the module's forward (tokens to their experts)\n";
      continue;
    }
    if (style != "grouped_gemm") {
      sink.error(DiagCode::EHfTpPlan, loc,
                 "'" + pattern_text + "': ep style '" + style + "' has no shardc translation",
                 "grouped_gemm (Shard(0) of the stacked experts on ep) and ep_dispatch_experts "
                 "are translated; write an `experts` entry by hand (docs/experts.md)");
      ok = false;
      continue;
    }
    std::string error;
    const std::optional<Pattern> pattern = Pattern::compile(pattern_text, error);
    if (!pattern) {
      sink.error(DiagCode::EHfTpPlan, loc, "'" + pattern_text + "' is not a pattern: " + error);
      ok = false;
      continue;
    }
    const bool prestacked =
        std::any_of(model.params.begin(), model.params.end(),
                    [&](const Param& param) { return pattern->match(param.name); });
    if (prestacked) {
      out << "  - match: " << yaml_quoted(pattern_text)
          << "    # grouped_gemm: the checkpoint stores it stacked [E, ...]\n"
             "    stacked_dim: 0\n    placements: {ep: Shard(0)}\n";
      continue;
    }
    bool any = false;
    for (const HfSource& source : plan.sources) {
      if (!pattern->match(source.param)) continue;
      any = true;
      std::string reason;
      const bool merged = !source.operations.empty() &&
                          source.operations.front().first == "MergeModulelist" &&
                          source.operations.front().second.value_or(-1) == 0;
      if (!merged) {
        reason = "transformers makes it by " + ops_text(source) +
                 ", not by stacking per-expert tensors (MergeModulelist(dim=0))";
      }
      for (const auto& part : source.parts) {
        if (!reason.empty()) break;
        const auto entry = per_expert_entry(part, reason);
        if (!entry) break;
        if (std::find(seen.begin(), seen.end(), *entry) != seen.end()) continue;
        seen.push_back(*entry);
        out << "  - match: " << yaml_quoted(entry->first) << "    # grouped_gemm: " << pattern_text
            << " is " << ops_text(source) << " of these\n    stack: " << yaml_quoted(entry->second)
            << "\n    placements: {ep: Shard(0)}\n";
      }
      if (!reason.empty()) {
        sink.error(DiagCode::EHfTpPlan, loc,
                   "'" + pattern_text + "' (grouped_gemm) names '" + source.param +
                       "', which transformers builds from checkpoint tensors: " + reason,
                   "write the `experts` entry by hand (docs/experts.md)");
        ok = false;
        break;
      }
    }
    if (!any && ok) {
      sink.error(DiagCode::EHfTpPlan, loc,
                 "'" + pattern_text +
                     "' (grouped_gemm) matches no param of the model, and the plan file lists "
                     "no `sources` that make one",
                 "dump the plan from the checkpoint directory (`tools/hf_tp_plan.py "
                 "CHECKPOINT`), which writes transformers' conversion of its tensors");
      ok = false;
    }
  }
  return ok;
}

}  // namespace

std::optional<HfTpPlan> parse_hf_tp_plan(std::string_view json, const std::string& path,
                                         DiagnosticSink& sink) {
  const auto fail = [&](const std::string& what) {
    sink.error(DiagCode::EHfTpPlan, SourceLoc{path, 0, 0}, "'" + path + "': " + what,
               "write it with `tools/hf_tp_plan.py CHECKPOINT -o plan.json` (transformers' "
               "model.tp_plan)");
    return std::nullopt;
  };
  simdjson::dom::parser parser;
  const simdjson::padded_string padded(json);
  simdjson::dom::object root;
  if (parser.parse(padded).get(root) != simdjson::SUCCESS) return fail("not a JSON object");
  std::string_view format;
  if (root["format"].get(format) != simdjson::SUCCESS || format != "shardc.hf-tp-plan/v1") {
    return fail("`format` is not \"shardc.hf-tp-plan/v1\"");
  }
  HfTpPlan plan;
  std::string_view text;
  if (root["architecture"].get(text) == simdjson::SUCCESS) plan.architecture = text;
  if (root["transformers"].get(text) == simdjson::SUCCESS) plan.transformers_version = text;
  simdjson::dom::object entries;
  if (root["tp_plan"].get(entries) != simdjson::SUCCESS) {
    return fail("`tp_plan` is missing or not an object of module pattern -> style");
  }
  for (const auto field : entries) {
    std::string_view style;
    if (field.value.get(style) != simdjson::SUCCESS) {
      return fail("the style of '" + std::string(field.key) + "' is not a string");
    }
    plan.entries.emplace_back(std::string(field.key), std::string(style));
  }
  if (plan.entries.empty()) return fail("`tp_plan` is empty (the architecture has no plan)");
  simdjson::dom::object ep_entries;
  const simdjson::error_code ep_error = root["ep_plan"].get(ep_entries);
  if (ep_error != simdjson::NO_SUCH_FIELD && ep_error != simdjson::SUCCESS)
    return fail("`ep_plan` is not an object of pattern -> style");
  if (ep_error == simdjson::SUCCESS) {
    for (const auto field : ep_entries) {
      std::string_view style;
      if (field.value.get(style) != simdjson::SUCCESS)
        return fail("the ep style of '" + std::string(field.key) + "' is not a string");
      plan.ep_entries.emplace_back(std::string(field.key), std::string(style));
    }
  }
  simdjson::dom::object sources;
  const simdjson::error_code sources_error = root["sources"].get(sources);
  if (sources_error == simdjson::NO_SUCH_FIELD) return plan;
  if (sources_error != simdjson::SUCCESS) return fail("`sources` is not an object");
  for (const auto field : sources) {
    const std::string where = "the source of '" + std::string(field.key) + "'";
    HfSource source;
    source.param = field.key;
    simdjson::dom::array shape;
    simdjson::dom::array operations;
    simdjson::dom::array parts;
    if (field.value["shape"].get(shape) != simdjson::SUCCESS ||
        field.value["operations"].get(operations) != simdjson::SUCCESS ||
        field.value["parts"].get(parts) != simdjson::SUCCESS) {
      return fail(where + " lacks `shape`, `operations` or `parts`");
    }
    for (const auto extent : shape) {
      std::int64_t value = 0;
      if (extent.get(value) != simdjson::SUCCESS || value < 0) {
        return fail(where + ": `shape` is not a list of extents");
      }
      source.shape.push_back(value);
    }
    for (const auto operation : operations) {
      std::string_view op;
      if (operation["op"].get(op) != simdjson::SUCCESS)
        return fail(where + ": an operation has no `op`");
      std::int64_t dim = 0;
      std::optional<std::int64_t> op_dim;
      if (operation["dim"].get(dim) == simdjson::SUCCESS) op_dim = dim;
      source.operations.emplace_back(std::string(op), op_dim);
    }
    for (const auto part : parts) {
      simdjson::dom::array keys;
      if (part.get(keys) != simdjson::SUCCESS)
        return fail(where + ": a part is not a list of keys");
      std::vector<std::string>& out = source.parts.emplace_back();
      for (const auto key : keys) {
        std::string_view text_key;
        if (key.get(text_key) != simdjson::SUCCESS) return fail(where + ": a key is not a string");
        out.emplace_back(text_key);
      }
    }
    plan.sources.push_back(std::move(source));
  }
  return plan;
}

std::optional<std::string> hf_tp_plan_recipe(const HfTpPlan& plan, const Model& model,
                                             HfParallelSizes sizes, const std::string& path,
                                             DiagnosticSink& sink) {
  const SourceLoc loc{path, 0, 0};
  std::ostringstream rules;
  std::ostringstream expert_entries;
  bool ok = true;
  if (sizes.ep > 1 && !ep_entries_text(plan, model, sizes, loc, sink, expert_entries))
    return std::nullopt;
  for (const auto& entry : plan.entries) {
    // named references, not a structured binding: the lambdas below capture them
    const std::string& module_pattern = entry.first;
    const std::string& style = entry.second;
    if (sizes.ep > 1) {
      if (const std::string* over = ep_override(plan, module_pattern)) {
        rules << "  # " << module_pattern << ": " << style << " (tp_plan) dropped: the ep_plan's '"
              << *over << "' takes the module (EP rules take precedence)\n";
        continue;
      }
    }
    // An entry naming params itself (the MoE plans' 3-D expert params)
    std::string error;
    const std::optional<Pattern> direct = Pattern::compile(module_pattern, error);
    if (!direct) {
      sink.error(DiagCode::EHfTpPlan, loc,
                 "'" + module_pattern + "' is not a module pattern: " + error);
      ok = false;
      continue;
    }
    std::vector<const Param*> named;
    for (const Param& param : model.params)
      if (direct->match(param.name)) named.push_back(&param);
    std::vector<const HfSource*> built;  // params transformers builds from other tensors
    if (named.empty()) {
      for (const HfSource& source : plan.sources)
        if (direct->match(source.param)) built.push_back(&source);
    }
    if (!built.empty()) {
      std::vector<PlacedTensor> placed;
      for (const HfSource* source : built) {
        Param fused;
        fused.name = source->param;
        fused.shape = source->shape;
        const std::optional<std::string> placement = direct_placement(style, fused);
        std::string reason = "style '" + style + "' has no shardc translation for a param";
        std::optional<std::vector<PlacedTensor>> tensors;
        if (placement) {
          const std::string label = placement->empty() ? "replicated" : *placement;
          tensors = place_sources(
              *source, *placement, model,
              style + ": " + module_pattern + " is " + label + ", made by " + ops_text(*source),
              reason);
        }
        if (!tensors) {
          sink.error(DiagCode::EHfTpPlan, loc,
                     "'" + module_pattern + "' (" + style + ") names '" + source->param +
                         "', which transformers builds from checkpoint tensors: " + reason,
                     "write the rules for its checkpoint tensors by hand");
          ok = false;
          placed.clear();
          break;
        }
        placed.insert(placed.end(), tensors->begin(), tensors->end());
      }
      emit_placed(rules, placed, model);
      continue;
    }
    if (!named.empty()) {
      std::vector<std::pair<std::string, std::string>> placed;  // param name -> placement
      for (const Param* param : named) {
        const std::optional<std::string> placement = direct_placement(style, *param);
        if (!placement) break;
        placed.emplace_back(param->name, *placement);
      }
      if (placed.size() != named.size()) {
        sink.error(DiagCode::EHfTpPlan, loc,
                   "'" + module_pattern + "' names params and style '" + style +
                       "' has no shardc translation for a param",
                   "write the rule for these params by hand");
        ok = false;
        continue;
      }
      const bool one_rule =
          std::all_of(placed.begin(), placed.end(), [&](const auto& named_placement) {
            return named_placement.second == placed.front().second;
          });
      const auto emit = [&](const std::string& match, const std::string& placement) {
        rules << "  - match: " << yaml_quoted(match) << "    # " << style << " (a param)\n";
        if (placement.empty()) {
          rules << "    placements: {}\n";
        } else {
          rules << "    placements: {tp: " << yaml_quoted(placement) << "}\n";
        }
      };
      if (one_rule) {
        emit(direct->text(), placed.front().second);
      } else {
        for (const auto& [name, placement] : placed) emit(name, placement);
      }
      continue;
    }
    if (forward_only(style)) {
      const std::string prefix = module_pattern + ".**";
      const std::optional<Pattern> inside = Pattern::compile(prefix, error);
      const bool exists =
          inside &&
          (std::any_of(model.params.begin(), model.params.end(),
                       [&](const Param& param) { return inside->match(param.name); }) ||
           std::any_of(plan.sources.begin(), plan.sources.end(),
                       [&](const HfSource& source) { return inside->match(source.param); }));
      const bool twin =
          std::any_of(plan.entries.begin(), plan.entries.end(), [&](const auto& other) {
            return other.first == "model." + module_pattern && other.second == style;
          });
      if (exists || twin) {
        rules << "  # " << module_pattern << ": " << style
              << " hooks the module's forward (its params are placed by their own entries)\n";
        continue;
      }
    }
    const StyleSpec* spec = find_style(style);
    if (spec == nullptr) {
      sink.error(DiagCode::EHfTpPlan, loc,
                 "'" + module_pattern + "': style '" + style + "' has no shardc translation",
                 "write the rule for these params by hand (MoE experts: an `experts` entry "
                 "with `placements: {ep: Shard(0)}`)");
      ok = false;
      continue;
    }
    int matched_suffixes = 0;
    for (const auto& [suffix, placement] : {std::pair{std::string_view(".weight"), spec->weight},
                                            std::pair{std::string_view(".bias"), spec->bias}}) {
      error.clear();
      const std::optional<Pattern> pattern =
          Pattern::compile(module_pattern + std::string(suffix), error);
      if (!pattern) {
        sink.error(DiagCode::EHfTpPlan, loc,
                   "'" + module_pattern + "' is not a module pattern: " + error);
        ok = false;
        break;
      }
      bool any = false;
      for (const Param& param : model.params) {
        if (pattern->match(param.name)) {
          any = true;
          break;
        }
      }
      if (!any) {
        // a module whose params the checkpoint stores under other names: a renaming
        // takes the rule to the checkpoint's names; a param made of several tensors
        // by a module style has no translation
        std::vector<PlacedTensor> renamed;
        for (const HfSource& source : plan.sources) {
          if (!pattern->match(source.param)) continue;
          ++matched_suffixes;
          if (!source.operations.empty()) {
            sink.error(DiagCode::EHfTpPlan, loc,
                       "'" + module_pattern + "' (" + style + ") places '" + source.param +
                           "', which transformers makes by " + ops_text(source) +
                           ": a module style on a param made of several checkpoint "
                           "tensors has no shardc translation",
                       "write the rules for its checkpoint tensors by hand");
            ok = false;
            break;
          }
          for (const auto& part : source.parts)
            for (const std::string& key : part)
              renamed.push_back(
                  {key, std::string(placement), style + " (transformers' " + pattern->text() + ")",
                   spec->packed && !placement.empty() ? std::string(shard_dim_of(placement))
                                                      : std::string()});
        }
        emit_placed(rules, renamed, model);
        continue;
      }
      ++matched_suffixes;
      rules << "  - match: " << yaml_quoted(pattern->text()) << "    # " << style << "\n";
      if (placement.empty()) {
        rules << "    placements: {}\n";
        continue;
      }
      rules << "    placements: {tp: " << placement << "}\n";
      if (spec->packed) rules << "    packed: {parts: 2, dim: " << shard_dim_of(placement) << "}\n";
    }
    const auto twin =
        std::find_if(plan.entries.begin(), plan.entries.end(), [&](const auto& other) {
          return other.first == "model." + module_pattern && other.second == style;
        });
    if (matched_suffixes == 0 && ok && twin != plan.entries.end()) {
      // Llama-4's tp_plan lists the base plan twice, bare and with the base model's prefix:
      // transformers applies the bare copy to nothing (no module has that name)
      rules << "  # " << module_pattern << ": " << style << " (as 'model." << module_pattern
            << "')\n";
      continue;
    }
    const bool experts = module_pattern.find("experts") != std::string::npos;
    if (matched_suffixes == 0 && ok && !experts) {
      // a module this configuration does not build (Llama-4 Scout: every layer MoE, so no
      // dense `feed_forward.gate_proj`): transformers applies the entry to nothing too
      rules << "  # " << module_pattern << ": " << style
            << " matches no param of this model (transformers applies it to nothing)\n";
      continue;
    }
    if (matched_suffixes == 0 && ok) {
      sink.error(DiagCode::EHfTpPlan, loc,
                 "'" + module_pattern + "' (" + style + ") matches no param of the model" +
                     ": transformers 5 fuses the checkpoint's per-expert tensors into this "
                     "one 3-D param at load (its weight converter), and the plan file "
                     "lists no `sources` saying which checkpoint tensors make it",
                 "dump the plan from the checkpoint directory (`tools/hf_tp_plan.py "
                 "CHECKPOINT`), which writes transformers' conversion of its tensors");
      ok = false;
    }
  }
  if (!ok) return std::nullopt;
  std::ostringstream out;
  out << "# transformers' tensor-parallel plan of "
      << (plan.architecture.empty() ? "the model" : plan.architecture)
      << (plan.transformers_version.empty() ? ""
                                            : " (transformers " + plan.transformers_version + ")")
      << " as a shardc recipe\n# (shardc recipe --from-hf-tp-plan). Each rule names the style it "
         "comes from.\nformat: shardc.recipe/v1\nmesh:\n  - {name: tp, size: "
      << sizes.tp << "}\n";
  if (sizes.ep > 1) {
    out << "# transformers' expert mesh (pp, dp_replicate, efsdp, ep) with efsdp = fsdp x tp / ep "
           "= 1:\n# the same ranks, ep coordinate = tp coordinate\nexpert_mesh:\n  - {name: ep, "
           "size: "
        << sizes.ep << "}\nexperts:\n"
        << expert_entries.str();
  }
  out << "rules:\n"
      << rules.str()
      << "  - match: \"**\"    # everything the plan does not name: replicated\n"
         "    placements: {}\ntied: auto\n";
  return out.str();
}

}  // namespace shardc
