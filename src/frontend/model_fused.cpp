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

}  // namespace

std::optional<FusedLayout> parse_fused(const Node& n, const Shape& shape, Reader& r) {
  if (!r.expect_map(n, "`fused`")) return std::nullopt;
  if (!r.check_keys(n, {"parts", "dim", "interleave", "groups", "names", "order", "source"},
                    "`fused`"))
    return std::nullopt;
  const Node* parts = n.find("parts");
  if (parts == nullptr) {
    r.error(n, "`fused` needs `parts` (a count or a list of extents)", std::string(kHint));
    return std::nullopt;
  }
  const int ndim = static_cast<int>(shape.size());
  int dim = 0;
  if (const Node* d = n.find("dim")) {
    const auto v = parse_bounded(*d, r, "`fused.dim`", -64, 63);
    if (!v) return std::nullopt;
    dim = static_cast<int>(*v);
  }
  const int norm = dim < 0 ? dim + ndim : dim;
  if (norm < 0 || norm >= ndim) {
    r.error(n,
            "`fused.dim` " + std::to_string(dim) + " is out of range for a param with " +
                std::to_string(ndim) + " dims",
            std::string(kHint));
    return std::nullopt;
  }
  const std::int64_t extent = shape[static_cast<std::size_t>(norm)];
  FusedLayout f;
  f.dim = norm;
  f.source = "model description";
  if (parts->is_seq()) {
    if (parts->items().size() < 2 ||
        static_cast<std::int64_t>(parts->items().size()) > limits::kMaxParts) {
      r.error(*parts,
              "`fused.parts` must list 2.." + std::to_string(limits::kMaxParts) + " extents",
              std::string(kHint));
      return std::nullopt;
    }
    std::int64_t sum = 0;
    for (const Node& item : parts->items()) {
      const auto v = parse_bounded(item, r, "a fused part extent", 1, extent);
      if (!v) return std::nullopt;
      sum += *v;
      if (sum > extent) break;
      f.parts.push_back(*v);
    }
    if (sum != extent) {
      r.error(*parts,
              "`fused.parts` do not add up to dim " + std::to_string(norm) + " extent " +
                  std::to_string(extent),
              "the parts tile the dim exactly, in order");
      return std::nullopt;
    }
  } else {
    const auto v = parse_bounded(*parts, r, "`fused.parts`", 2, limits::kMaxParts);
    if (!v) return std::nullopt;
    if (extent % *v != 0) {
      r.error(*parts,
              "dim " + std::to_string(norm) + " extent " + std::to_string(extent) + " is not " +
                  std::to_string(*v) + " equal parts",
              "give the part extents as a list, e.g. `parts: [4096, 1024, 1024]`");
      return std::nullopt;
    }
    f.parts.assign(static_cast<std::size_t>(*v), extent / *v);
  }
  const Node* interleave = n.find("interleave");
  const Node* groups = n.find("groups");
  if (interleave != nullptr && groups != nullptr) {
    r.error(*groups, "`fused` takes `interleave` or `groups`, not both", std::string(kHint));
    return std::nullopt;
  }
  if (interleave != nullptr) {
    const auto k = parse_bounded(*interleave, r, "`fused.interleave`", 1, extent);
    if (!k) return std::nullopt;
    for (std::int64_t p : f.parts)
      if (p != f.parts.front() || p % *k != 0) {
        r.error(*interleave,
                "`interleave: " + std::to_string(*k) +
                    "` needs equal parts that are whole blocks of it",
                "for unequal parts (GQA q|k|v per KV group) say `groups: G`");
        return std::nullopt;
      }
    f.groups = f.parts.front() / *k;
  }
  if (groups != nullptr) {
    const auto g = parse_bounded(*groups, r, "`fused.groups`", 1, extent);
    if (!g) return std::nullopt;
    for (std::int64_t p : f.parts)
      if (p % *g != 0) {
        r.error(
            *groups,
            "part extent " + std::to_string(p) + " is not " + std::to_string(*g) + " whole groups",
            "every part holds the same number of elements in each group");
        return std::nullopt;
      }
    f.groups = *g;
  }
  if (const Node* names = n.find("names")) {
    auto list = r.get_string_list(*names, "`fused.names`");
    if (!list) return std::nullopt;
    if (list->size() != f.parts.size()) {
      r.error(*names,
              "`fused.names` lists " + std::to_string(list->size()) + " names for " +
                  std::to_string(f.parts.size()) + " parts",
              "one name per part, in order");
      return std::nullopt;
    }
    f.part_names = std::move(*list);
  } else {
    f.part_names = default_names(f.parts.size());
  }
  if (const Node* src = n.find("source")) {
    auto text = r.get_string(*src, "`fused.source`");
    if (!text) return std::nullopt;
    f.source = *text;
  }
  if (const Node* order = n.find("order")) {  // as import --format json writes it: a check
    auto text = r.get_string(*order, "`fused.order`");
    if (!text) return std::nullopt;
    if (*text != fused_order_name(f)) {
      r.error(
          *order,
          "`fused.order` says " + *text + " but the parts and groups are " + fused_order_name(f),
          "blocked: groups 1; interleaved: equal parts in groups; per-group: unequal parts");
      return std::nullopt;
    }
  }
  return f;
}

std::optional<HeadIndexed> parse_head_indexed(const Node& n, const Shape& shape, Reader& r) {
  constexpr std::string_view kHeadHint =
      "e.g. `head_indexed: {dim: 0}` (gpt-oss attention sinks, one per q head) or "
      "`head_indexed: {dim: 0, heads: kv}` (a per-KV-head norm)";
  if (!r.expect_map(n, "`head_indexed`")) return std::nullopt;
  if (!r.check_keys(n, {"dim", "heads", "source"}, "`head_indexed`")) return std::nullopt;
  const int ndim = static_cast<int>(shape.size());
  int dim = 0;
  if (const Node* d = n.find("dim")) {
    const auto v = parse_bounded(*d, r, "`head_indexed.dim`", -64, 63);
    if (!v) return std::nullopt;
    dim = static_cast<int>(*v);
  }
  const int norm = dim < 0 ? dim + ndim : dim;
  if (norm < 0 || norm >= ndim) {
    r.error(n,
            "`head_indexed.dim` " + std::to_string(dim) + " is out of range for a param with " +
                std::to_string(ndim) + " dims",
            std::string(kHeadHint));
    return std::nullopt;
  }
  HeadIndexed h;
  h.dim = norm;
  h.source = "model description";
  if (const Node* heads = n.find("heads")) {
    auto text = r.get_string(*heads, "`head_indexed.heads`");
    if (!text) return std::nullopt;
    if (*text != "q" && *text != "kv") {
      r.error(*heads, "`head_indexed.heads` is `q` or `kv`, got " + describe(*heads),
              std::string(kHeadHint));
      return std::nullopt;
    }
    h.kv = *text == "kv";
  }
  if (const Node* src = n.find("source")) {
    auto text = r.get_string(*src, "`head_indexed.source`");
    if (!text) return std::nullopt;
    h.source = *text;
  }
  return h;
}

}  // namespace shardc::fe
