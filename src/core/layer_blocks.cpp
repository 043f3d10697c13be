// Layer blocks by stack (src/core/layer_blocks.hpp).
#include "core/layer_blocks.hpp"

#include <algorithm>
#include <set>
#include <utility>

namespace shardc {

std::optional<LayerBlock> layer_block(std::string_view fqn) {
  std::size_t pos = 0;
  bool after = false;
  while (pos <= fqn.size()) {
    std::size_t dot = fqn.find('.', pos);
    if (dot == std::string_view::npos) dot = fqn.size();
    const std::string_view seg = fqn.substr(pos, dot - pos);
    if (after) {
      if (seg.empty() || seg.size() > 9 ||
          seg.find_first_not_of("0123456789") != std::string_view::npos)
        return std::nullopt;
      std::int64_t index = 0;
      for (const char ch : seg) index = index * 10 + (ch - '0');
      return LayerBlock{fqn.substr(0, pos - 1), index};
    }
    after = seg == "layers" || seg == "h" || seg == "layer" || seg == "blocks";
    pos = dot + 1;
  }
  return std::nullopt;
}

std::string decoder_stack(const std::vector<std::string_view>& fqns,
                          std::optional<std::int64_t> num_hidden_layers) {
  // Stacks in model order with their distinct blocks.
  std::vector<std::pair<std::string_view, std::set<std::int64_t>>> stacks;
  for (const std::string_view fqn : fqns) {
    const std::optional<LayerBlock> block = layer_block(fqn);
    if (!block) continue;
    auto found = std::find_if(stacks.begin(), stacks.end(),
                              [&block](const auto& entry) { return entry.first == block->stack; });
    if (found == stacks.end()) {
      stacks.emplace_back(block->stack, std::set<std::int64_t>{});
      found = std::prev(stacks.end());
    }
    found->second.insert(block->index);
  }
  if (stacks.empty()) return {};
  if (num_hidden_layers) {
    const auto count = std::count_if(stacks.begin(), stacks.end(), [&](const auto& entry) {
      return static_cast<std::int64_t>(entry.second.size()) == *num_hidden_layers;
    });
    if (count == 1) {
      for (const auto& [stack, blocks] : stacks)
        if (static_cast<std::int64_t>(blocks.size()) == *num_hidden_layers)
          return std::string(stack);
    }
  }
  std::size_t best = 0;
  for (std::size_t i = 1; i < stacks.size(); ++i)
    if (stacks[i].second.size() >= stacks[best].second.size()) best = i;
  return std::string(stacks[best].first);
}

std::int64_t decoder_block(std::string_view fqn, std::string_view decoder) {
  const std::optional<LayerBlock> block = layer_block(fqn);
  if (!block || block->stack != decoder) return -1;
  return block->index;
}

bool is_position_embedding(std::string_view fqn) {
  const bool wpe_segment = fqn.rfind("wpe.", 0) == 0 || fqn.find(".wpe.") != std::string_view::npos;
  return wpe_segment || fqn.find("position_embeddings") != std::string_view::npos ||
         fqn.find("embed_positions") != std::string_view::npos;
}

bool has_vocab_name(std::string_view fqn) {
  for (std::string_view name : {"embed_tokens.weight", "lm_head.weight", "wte.weight",
                                "tok_embeddings.weight", "word_embeddings.weight", "output.weight",
                                "output_layer.weight", "embed_in.weight", "embed_out.weight"})
    if (fqn.ends_with(name)) return true;
  return false;
}

}  // namespace shardc
