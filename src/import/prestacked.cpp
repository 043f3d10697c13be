// The `experts` entry an imported model's pre-stacked experts need (docs/experts.md):
// transformers stores the routed experts of gpt-oss (GptOssExperts), Llama-4
// (Llama4TextExperts) and, in transformers 5, Mixtral / Qwen3-MoE / DeepSeek-V3
// (MixtralExperts, Qwen3MoeExperts, DeepseekV3Experts, filled by conversion_mapping.py's
// MergeModulelist(dim=0) + Concatenate(dim=1)) as one [E, ...] tensor per layer and
// projection, `<prefix>.experts.<tensor>`. Import keeps them as they are and says, in the
// model's header, which entry places them.
#include <string>
#include <utility>
#include <vector>

#include "import/import_internal.hpp"

namespace shardc::imp {
namespace {

bool all_digits(std::string_view text) {
  if (text.empty()) return false;
  for (char character : text)
    if (character < '0' || character > '9') return false;
  return true;
}

// `model.layers.*.mlp.experts.*` for `model.layers.3.mlp.experts.gate_up_proj`, or "" when
// the name has no `experts` segment followed by exactly one tensor name.
std::string stacked_pattern(std::string_view name) {
  std::vector<std::string_view> segs;
  std::size_t start = 0;
  for (std::size_t i = 0; i <= name.size(); ++i) {
    if (i < name.size() && name[i] != '.') continue;
    segs.push_back(name.substr(start, i - start));
    start = i + 1;
  }
  if (segs.size() < 2 || segs[segs.size() - 2] != "experts") return "";
  std::string out;
  for (std::size_t i = 0; i + 1 < segs.size(); ++i) {
    out += all_digits(segs[i]) ? std::string("*") : std::string(segs[i]);
    out += '.';
  }
  return out + "*";
}

}  // namespace

std::vector<std::pair<std::string, std::string>> prestacked_expert_comments(const Model& model) {
  std::vector<std::pair<std::string, std::string>> out;
  const auto& experts = model.attributes.num_experts;
  if (!experts || *experts < 1) return out;
  std::vector<std::string> patterns;
  for (const Param& param : model.params) {
    if (param.shape.size() < 2 || param.shape[0] != *experts) continue;
    const std::string pattern = stacked_pattern(param.name);
    if (pattern.empty()) continue;
    bool seen = false;
    for (const std::string& known : patterns) seen = seen || known == pattern;
    if (!seen) patterns.push_back(pattern);
    if (patterns.size() == 8) break;  // a header line each; real models have one or two
  }
  for (const std::string& pattern : patterns)
    out.emplace_back("experts", "pre-stacked [" + std::to_string(*experts) +
                                    ", ...] expert tensors; a recipe places them with "
                                    "`experts: [{match: \"" +
                                    pattern +
                                    "\", stacked_dim: 0, placements: {ep: Shard(0)}}]` "
                                    "(docs/experts.md)");
  return out;
}

}  // namespace shardc::imp
