// Placement spelling (contract §4): torch `Shard(d)`, `Replicate()`, `Partial()`,
// `Partial(sum|avg|min|max)` and hyper-parallel DSL `shard(d)`, `replicate`,
// `partial`. Spaces inside the parentheses are tolerated.
#include <charconv>
#include <string>

#include "frontend/frontend.hpp"

namespace shardc {
namespace {

std::string_view trim(std::string_view text) {
  auto space = [](char character) { return character == ' ' || character == '\t'; };
  while (!text.empty() && space(text.front())) text.remove_prefix(1);
  while (!text.empty() && space(text.back())) text.remove_suffix(1);
  return text;
}

// Splits `Name(args)` into name and trimmed args; `Name` alone has no args.
bool split_call(std::string_view text, std::string_view& name, std::string_view& args,
                bool& has_parens) {
  std::size_t open = text.find('(');
  has_parens = open != std::string_view::npos;
  if (!has_parens) {
    name = text;
    args = {};
    return true;
  }
  if (text.back() != ')') return false;
  name = trim(text.substr(0, open));
  args = trim(text.substr(open + 1, text.size() - open - 2));
  return args.find_first_of("()") == std::string_view::npos;
}

std::optional<int> parse_dim(std::string_view args) {
  if (args.starts_with("dim")) {
    args = trim(args.substr(3));
    if (args.empty() || args.front() != '=') return std::nullopt;
    args = trim(args.substr(1));
  }
  if (!args.empty() && args.front() == '+') args.remove_prefix(1);
  int dim = 0;
  auto [ptr, ec] = std::from_chars(args.data(), args.data() + args.size(), dim);
  if (ec != std::errc() || ptr != args.data() + args.size() || args.empty()) return std::nullopt;
  return dim;
}

std::optional<std::string> parse_reduce_op(std::string_view args) {
  if (args.starts_with("reduce_op")) {
    args = trim(args.substr(9));
    if (args.empty() || args.front() != '=') return std::nullopt;
    args = trim(args.substr(1));
  }
  if (args.size() >= 2 && (args.front() == '"' || args.front() == '\'') &&
      args.back() == args.front()) {
    args = args.substr(1, args.size() - 2);
  }
  if (args.empty()) return std::string("sum");
  for (std::string_view op : {"sum", "avg", "min", "max"}) {
    if (args == op) return std::string(op);
  }
  return std::nullopt;
}

// `sf=F` / `split_factor=F` with 1 <= F < 2^31.
std::optional<std::int64_t> strided_factor(std::string_view args) {
  for (std::string_view key : {"split_factor", "sf"}) {
    if (!args.starts_with(key)) continue;
    args = trim(args.substr(key.size()));
    if (args.empty() || args.front() != '=') return std::nullopt;
    args = trim(args.substr(1));
    std::int64_t factor = 0;
    auto [ptr, ec] = std::from_chars(args.data(), args.data() + args.size(), factor);
    if (ec != std::errc() || ptr != args.data() + args.size() || factor < 1 ||
        factor > (std::int64_t{1} << 31))
      return std::nullopt;
    return factor;
  }
  return std::nullopt;
}

}  // namespace

std::optional<Placement> parse_placement(std::string_view text) {
  std::string_view trimmed = trim(text);
  std::string_view name;
  std::string_view args;
  bool parens = false;
  if (trimmed.empty() || !split_call(trimmed, name, args, parens)) return std::nullopt;
  Placement placement;
  placement.text = std::string(trimmed);
  if (name == "Shard" || name == "shard") {
    std::optional<int> dim = parens ? parse_dim(args) : std::nullopt;
    if (!dim) return std::nullopt;
    placement.kind = Placement::Kind::Shard;
    placement.dim = *dim;
    return placement;
  }
  if (name == "_StridedShard") {
    // DTensor's label of a shard order (docs/shard-order.md): `_StridedShard(d, sf=F)`,
    // also `dim=d`, `split_factor=F`. A Shard of dim d; the planner reads F from `text`.
    const std::size_t comma = args.find(',');
    std::optional<int> dim =
        comma == std::string_view::npos ? std::nullopt : parse_dim(trim(args.substr(0, comma)));
    std::optional<std::int64_t> factor = strided_factor(trim(args.substr(comma + 1)));
    if (!dim || !factor) return std::nullopt;
    placement.kind = Placement::Kind::Shard;
    placement.dim = *dim;
    return placement;
  }
  if (name == "Replicate" || name == "replicate") {
    if (!args.empty()) return std::nullopt;
    placement.kind = Placement::Kind::Replicate;
    return placement;
  }
  if (name == "Partial" || name == "partial") {
    std::optional<std::string> op = parse_reduce_op(args);
    if (!op) return std::nullopt;
    placement.kind = Placement::Kind::Partial;
    placement.reduce_op = *op;
    return placement;
  }
  return std::nullopt;
}

}  // namespace shardc
