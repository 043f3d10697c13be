// order_params: module registration order from the architecture rules, or
// the natural order (numeric segments as numbers) where no rule applies
// (contract §3.1).
#include <algorithm>
#include <charconv>
#include <limits>
#include <mutex>
#include <unordered_map>

#include "import/module_order.hpp"

namespace shardc {
namespace imp {
namespace {

ArchRules parse_rules(const ArchRuleText& text) {
  ArchRules rules;
  rules.base_prefix = std::string(text.base_prefix);
  std::string_view rest = text.text;
  while (!rest.empty()) {
    const auto nl = rest.find('\n');
    std::string_view line = rest.substr(0, nl);
    rest = nl == std::string_view::npos ? std::string_view{} : rest.substr(nl + 1);
    const auto colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    auto& kids = rules.children[std::string(line.substr(0, colon))];
    std::string_view names = line.substr(colon + 1);
    while (!names.empty()) {
      const auto start = names.find_first_not_of(' ');
      if (start == std::string_view::npos) break;
      names.remove_prefix(start);
      const auto end = names.find(' ');
      const std::string_view name = names.substr(0, end);
      kids.emplace(std::string(name), static_cast<std::int64_t>(kids.size()));
      names = end == std::string_view::npos ? std::string_view{} : names.substr(end);
    }
  }
  return rules;
}

const std::vector<ArchRules>& all_rules() {
  static const std::vector<ArchRules> rules = [] {
    std::vector<ArchRules> out;
    for (const ArchRuleText& text : arch_rule_texts()) out.push_back(parse_rules(text));
    return out;
  }();
  return rules;
}

// One segment's sort rank: known children by rule index, numbers by value,
// unknown names after both (then by name).
struct Rank {
  std::int64_t major = 0;
  std::string_view minor;
  friend bool operator<(const Rank& lhs, const Rank& rhs) {
    return lhs.major != rhs.major ? lhs.major < rhs.major : lhs.minor < rhs.minor;
  }
  friend bool operator==(const Rank& lhs, const Rank& rhs) = default;
};

constexpr std::int64_t kUnknown = std::numeric_limits<std::int64_t>::max();
constexpr std::int64_t kNumberBase = std::int64_t{1} << 40;  // numbers after named children

std::optional<std::int64_t> number(std::string_view seg) {
  if (seg.empty() || seg.size() > 12) return std::nullopt;
  std::int64_t value = 0;
  const auto [end, ec] = std::from_chars(seg.data(), seg.data() + seg.size(), value);
  if (ec != std::errc() || end != seg.data() + seg.size()) return std::nullopt;
  return value;
}

// Sort key of one name; `exact` cleared when some segment had no rule.
std::vector<Rank> key_of(std::string_view name, const ArchRules* rules, bool& exact) {
  std::vector<Rank> key;
  std::string parent;  // normalized path of the segments so far
  std::size_t pos = 0;
  while (pos <= name.size()) {
    const auto dot = name.find('.', pos);
    const std::string_view seg =
        name.substr(pos, dot == std::string_view::npos ? std::string_view::npos : dot - pos);
    const bool last = dot == std::string_view::npos;
    const std::optional<std::int64_t> index = number(seg);
    if (index) {
      key.push_back({kNumberBase + *index, {}});
    } else {
      Rank rank{kUnknown, seg};
      if (rules != nullptr) {
        const auto it = rules->children.find(parent);
        if (it != rules->children.end()) {
          if (const auto child = it->second.find(std::string(seg)); child != it->second.end()) {
            rank = {child->second, {}};
          }
        } else if (last) {
          const auto* leaf = std::find(kLeafOrder.begin(), kLeafOrder.end(), seg);
          if (leaf != kLeafOrder.end()) rank = {leaf - kLeafOrder.begin(), {}};
        }
      }
      if (rank.major == kUnknown) exact = false;
      key.push_back(rank);
    }
    if (pos > 0) parent += '.';
    parent += index ? std::string_view("#") : seg;
    if (last) break;
    pos = dot + 1;
  }
  return key;
}

// The name with numeric segments as `#` (a literal `#` doubled), and those numbers: names of one
// template share a key up to the numbers, so rules are looked up once per
// template (DeepSeek-V3: ~40 templates for 90k names).
std::string_view template_of(std::string_view name, std::string& buf,
                             std::vector<std::int64_t>& numbers) {
  buf.clear();
  numbers.clear();
  std::size_t pos = 0;
  for (;;) {
    const auto dot = name.find('.', pos);
    const std::string_view seg =
        name.substr(pos, dot == std::string_view::npos ? std::string_view::npos : dot - pos);
    if (pos > 0) buf += '.';
    if (const auto index = number(seg)) {
      buf += '#';
      numbers.push_back(*index);
    } else {
      // A literal '#' is doubled, so a segment that is "#" in the template is always a
      // number: the names "0" and "#" must not share a template (and its numbers).
      for (const char character : seg) {
        buf += character;
        if (character == '#') buf += '#';
      }
    }
    if (dot == std::string_view::npos) break;
    pos = dot + 1;
  }
  return buf;
}

}  // namespace

const ArchRules* find_arch_rules(const CheckpointConfig& config, TransformersOrder transformers) {
  const auto texts = arch_rule_texts();
  const auto& rules = all_rules();
  const int major = transformers == TransformersOrder::V5 ? 5 : 4;
  auto find = [&](std::string_view what) -> const ArchRules* {
    for (std::size_t i = 0; i < texts.size(); ++i) {
      if (texts[i].transformers_major != 0 && texts[i].transformers_major != major) continue;
      for (std::string_view key : texts[i].keys) {
        if (!key.empty() && key == what) return &rules[i];
      }
    }
    return nullptr;
  };
  for (const std::string& architecture : config.architectures) {
    if (const ArchRules* found = find(architecture)) return found;
  }
  return config.model_type.empty() ? nullptr : find(config.model_type);
}

}  // namespace imp

std::size_t order_params(std::vector<Param>& params, const CheckpointConfig& config,
                         TransformersOrder transformers) {
  const imp::ArchRules* rules = imp::find_arch_rules(config, transformers);
  struct Template {
    std::vector<imp::Rank> key;  // numbers as kNumberBase placeholders
    bool exact = true;
  };
  std::unordered_map<std::string, Template> templates;
  struct Item {
    std::vector<imp::Rank> key;
    std::size_t index;
  };
  std::vector<Item> items;
  items.reserve(params.size());
  std::size_t natural = 0;
  std::string buf;
  std::vector<std::int64_t> numbers;
  for (std::size_t i = 0; i < params.size(); ++i) {
    const std::string_view tmpl = imp::template_of(params[i].name, buf, numbers);
    auto it = templates.find(buf);
    if (it == templates.end()) {
      Template fresh;
      fresh.exact = rules != nullptr;
      fresh.key = imp::key_of(params[i].name, rules, fresh.exact);
      it = templates.emplace(std::string(tmpl), std::move(fresh)).first;
    }
    Item item{it->second.key, i};
    std::size_t k = 0;
    for (imp::Rank& rank : item.key) {
      if (rank.major >= imp::kNumberBase && rank.major != imp::kUnknown)
        rank.major = imp::kNumberBase + numbers.at(k++);
    }
    // Unknown segments keep their text: point it into this param's own name.
    if (!it->second.exact) item.key = imp::key_of(params[i].name, rules, it->second.exact);
    if (!it->second.exact) ++natural;
    items.push_back(std::move(item));
  }
  std::sort(items.begin(), items.end(), [](const Item& left, const Item& right) {
    return left.key != right.key ? left.key < right.key : left.index < right.index;
  });
  std::vector<Param> out;
  out.reserve(params.size());
  for (const Item& it : items) out.push_back(std::move(params[it.index]));
  params = std::move(out);
  return natural;
}

}  // namespace shardc
