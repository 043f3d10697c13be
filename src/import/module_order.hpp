// Module-order rules (internal to src/import): the per-architecture tables
// of module_order_rules.cpp, parsed once, and lookups into them.
#pragma once

#include <array>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "import/import.hpp"

namespace shardc::imp {

/// One architecture's rules as text (see module_order_rules.cpp).
struct ArchRuleText {
  std::array<std::string_view, 4> keys;  ///< architectures / model_type values; "" unused
  std::string_view base_prefix;          ///< prefix the hub files may omit (GPT-2: "transformer")
  std::string_view text;                 ///< `parent: child child ...` lines
  /// The transformers major version whose modules these are (4 or 5); 0: both.
  int transformers_major = 0;
};

std::span<const ArchRuleText> arch_rule_texts();

/// Parsed rules: normalized parent path -> child name -> rank.
struct ArchRules {
  std::string base_prefix;
  std::unordered_map<std::string, std::unordered_map<std::string, std::int64_t>> children;
};

/// The rules for a config (architectures first, then model_type) as the modules of
/// `transformers` register their children; nullptr when none.
const ArchRules* find_arch_rules(const CheckpointConfig& config,
                                 TransformersOrder transformers = TransformersOrder::V4);

/// Leaf parameter order inside a module without its own rule
/// (FP8Linear registers weight, then weight_scale_inv, then bias).
inline constexpr std::array<std::string_view, 3> kLeafOrder = {"weight", "weight_scale_inv",
                                                               "bias"};

}  // namespace shardc::imp
