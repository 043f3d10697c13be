// `fused:` on a model param entry (contract §5.12): the param is several
// logical tensors in one, with their extents, order and names:
//   fused: {parts: 3 | [4096, 1024, 1024], dim: 0, interleave: k | groups: G,
//           names: [q, k, v]}
// Normalized against the entry's shape here; E-MODEL when it does not fit.
#include <string>

#include "core/fused.hpp"
#include "frontend/model_internal.hpp"
#include "frontend/recipe_internal.hpp"

namespace shardc::fe {
namespace {

constexpr std::string_view kHint =
    "e.g. `fused: {parts: 3, dim: 1, names: [q, k, v]}` (GPT-2 c_attn), `fused: {parts: 2, "
    "dim: -1, interleave: 1, names: [gate, up]}` (gpt-oss gate_up_proj)";

std::vector<std::string> default_names(std::size_t count) {
  if (count == 3) return {"q", "k", "v"};
  if (count == 2) return {"gate", "up"};
  std::vector<std::string> out;
  for (std::size_t i = 0; i < count; ++i) out.push_back("part " + std::to_string(i));
  return out;
}

// The `dim` of `node` (`field`, e.g. "`fused.dim`"; 0 when absent) normalized against a param
// of `shape`: a negative dim counts from the end. nullopt (E-MODEL with `hint`) out of range.
std::optional<int> parse_param_dim(const Node& node, const Shape& shape, std::string_view field,
                                   std::string_view hint, Reader& reader) {
  const int ndim = static_cast<int>(shape.size());
  int dim = 0;
  if (const Node* dim_node = node.find("dim")) {
    const auto dim_value = parse_bounded(*dim_node, reader, field, -64, 63);
    if (!dim_value) return std::nullopt;
    dim = static_cast<int>(*dim_value);
  }
  const int norm = dim < 0 ? dim + ndim : dim;
  if (norm < 0 || norm >= ndim) {
    reader.error(node,
                 std::string(field) + " " + std::to_string(dim) +
                     " is out of range for a param with " + std::to_string(ndim) + " dims",
                 std::string(hint));
    return std::nullopt;
  }
  return norm;
}

}  // namespace

std::optional<FusedLayout> parse_fused(const Node& node, const Shape& shape, Reader& reader) {
  if (!reader.expect_map(node, "`fused`")) return std::nullopt;
  if (!reader.check_keys(node, {"parts", "dim", "interleave", "groups", "names", "order", "source"},
                         "`fused`"))
    return std::nullopt;
  const Node* parts = node.find("parts");
  if (parts == nullptr) {
    reader.error(node, "`fused` needs `parts` (a count or a list of extents)", std::string(kHint));
    return std::nullopt;
  }
  const std::optional<int> dim = parse_param_dim(node, shape, "`fused.dim`", kHint, reader);
  if (!dim) return std::nullopt;
  const int norm = *dim;
  const std::int64_t extent = shape[static_cast<std::size_t>(norm)];
  FusedLayout layout;
  layout.dim = norm;
  layout.source = "model description";
  if (parts->is_seq()) {
    if (parts->items().size() < 2 ||
        static_cast<std::int64_t>(parts->items().size()) > limits::kMaxParts) {
      reader.error(*parts,
                   "`fused.parts` must list 2.." + std::to_string(limits::kMaxParts) + " extents",
                   std::string(kHint));
      return std::nullopt;
    }
    std::int64_t sum = 0;
    for (const Node& item : parts->items()) {
      const auto part = parse_bounded(item, reader, "a fused part extent", 1, extent);
      if (!part) return std::nullopt;
      sum += *part;
      if (sum > extent) break;
      layout.parts.push_back(*part);
    }
    if (sum != extent) {
      reader.error(*parts,
                   "`fused.parts` do not add up to dim " + std::to_string(norm) + " extent " +
                       std::to_string(extent),
                   "the parts tile the dim exactly, in order");
      return std::nullopt;
    }
  } else {
    const auto count = parse_bounded(*parts, reader, "`fused.parts`", 2, limits::kMaxParts);
    if (!count) return std::nullopt;
    if (extent % *count != 0) {
      reader.error(*parts,
                   "dim " + std::to_string(norm) + " extent " + std::to_string(extent) +
                       " is not " + std::to_string(*count) + " equal parts",
                   "give the part extents as a list, e.g. `parts: [4096, 1024, 1024]`");
      return std::nullopt;
    }
    layout.parts.assign(static_cast<std::size_t>(*count), extent / *count);
  }
  const Node* interleave = node.find("interleave");
  const Node* groups = node.find("groups");
  if (interleave != nullptr && groups != nullptr) {
    reader.error(*groups, "`fused` takes `interleave` or `groups`, not both", std::string(kHint));
    return std::nullopt;
  }
  if (interleave != nullptr) {
    const auto block = parse_bounded(*interleave, reader, "`fused.interleave`", 1, extent);
    if (!block) return std::nullopt;
    for (std::int64_t part : layout.parts)
      if (part != layout.parts.front() || part % *block != 0) {
        reader.error(*interleave,
                     "`interleave: " + std::to_string(*block) +
                         "` needs equal parts that are whole blocks of it",
                     "for unequal parts (GQA q|k|v per KV group) say `groups: G`");
        return std::nullopt;
      }
    layout.groups = layout.parts.front() / *block;
  }
  if (groups != nullptr) {
    const auto group_count = parse_bounded(*groups, reader, "`fused.groups`", 1, extent);
    if (!group_count) return std::nullopt;
    for (std::int64_t part : layout.parts)
      if (part % *group_count != 0) {
        reader.error(*groups,
                     "part extent " + std::to_string(part) + " is not " +
                         std::to_string(*group_count) + " whole groups",
                     "every part holds the same number of elements in each group");
        return std::nullopt;
      }
    layout.groups = *group_count;
  }
  if (const Node* names = node.find("names")) {
    auto list = reader.get_string_list(*names, "`fused.names`");
    if (!list) return std::nullopt;
    if (list->size() != layout.parts.size()) {
      reader.error(*names,
                   "`fused.names` lists " + std::to_string(list->size()) + " names for " +
                       std::to_string(layout.parts.size()) + " parts",
                   "one name per part, in order");
      return std::nullopt;
    }
    layout.part_names = std::move(*list);
  } else {
    layout.part_names = default_names(layout.parts.size());
  }
  if (const Node* src = node.find("source")) {
    auto text = reader.get_string(*src, "`fused.source`");
    if (!text) return std::nullopt;
    layout.source = *text;
  }
  if (const Node* order = node.find("order")) {  // as import --format json writes it: a check
    auto text = reader.get_string(*order, "`fused.order`");
    if (!text) return std::nullopt;
    if (*text != fused_order_name(layout)) {
      reader.error(
          *order,
          "`fused.order` says " + *text + " but the parts and groups are " +
              fused_order_name(layout),
          "blocked: groups 1; interleaved: equal parts in groups; per-group: unequal parts");
      return std::nullopt;
    }
  }
  return layout;
}

std::optional<HeadIndexed> parse_head_indexed(const Node& node, const Shape& shape,
                                              Reader& reader) {
  constexpr std::string_view kHeadHint =
      "e.g. `head_indexed: {dim: 0}` (gpt-oss attention sinks, one per q head) or "
      "`head_indexed: {dim: 0, heads: kv}` (a per-KV-head norm)";
  if (!reader.expect_map(node, "`head_indexed`")) return std::nullopt;
  if (!reader.check_keys(node, {"dim", "heads", "source"}, "`head_indexed`")) return std::nullopt;
  const std::optional<int> dim =
      parse_param_dim(node, shape, "`head_indexed.dim`", kHeadHint, reader);
  if (!dim) return std::nullopt;
  HeadIndexed indexed;
  indexed.dim = *dim;
  indexed.source = "model description";
  if (const Node* heads = node.find("heads")) {
    auto text = reader.get_string(*heads, "`head_indexed.heads`");
    if (!text) return std::nullopt;
    if (*text != "q" && *text != "kv") {
      reader.error(*heads, "`head_indexed.heads` is `q` or `kv`, got " + describe(*heads),
                   std::string(kHeadHint));
      return std::nullopt;
    }
    indexed.kv = *text == "kv";
  }
  if (const Node* src = node.find("source")) {
    auto text = reader.get_string(*src, "`head_indexed.source`");
    if (!text) return std::nullopt;
    indexed.source = *text;
  }
  return indexed;
}

}  // namespace shardc::fe
