// The model's `params` list: entries and `repeat` groups (contract §3, §5.8).
// Two phases: build templates (checking every entry once, whatever its
// repeat count), then count and expand. Expansion never starts when the
// count passes kMaxExpandedParams.
#include <algorithm>
#include <array>
#include <charconv>
#include <string>

#include "frontend/model_internal.hpp"
#include "support/dtype.hpp"
#include "support/fqn.hpp"
#include "support/large_buffer.hpp"
#include "support/utf8.hpp"

namespace shardc::fe {
namespace {

struct RepeatVar {
  std::string name;
  std::int64_t start = 0;
  std::int64_t stop = 0;
  SourceLoc loc;
  bool used = false;
};

struct NamePiece {
  std::string literal;
  int slot = -1;  ///< >= 0: the repeat variable at this scope position
};

struct Entry {
  bool group = false;
  // A parameter template: `param` with its name in `pieces` when the name
  // substitutes variables (`param.name` is then empty).
  Param param;
  std::vector<NamePiece> pieces;
  // A repeat group.
  std::vector<RepeatVar> vars;
  std::vector<Entry> children;
};

// Params are appended front to back: huge pages for a large model's list.
void reserve_params(std::vector<Param>& out, std::size_t count) { reserve_large(out, count); }

class TemplateBuilder {
 public:
  TemplateBuilder(Reader& reader, DType default_dtype)
      : reader_(reader), default_dtype_(default_dtype) {}

  std::vector<Entry> build_list(const Node& list, int depth) {
    std::vector<Entry> out;
    if (!reader_.expect_seq(list, "`params`")) return out;
    out.reserve(list.items().size());
    for (const Node& item : list.items()) {
      if (!reader_.expect_map(item, "a `params` entry")) continue;
      std::optional<Entry> entry =
          item.find("repeat") != nullptr ? build_group(item, depth) : build_param(item);
      if (entry) out.push_back(std::move(*entry));
    }
    return out;
  }

  // A list without repeat groups: its params, built in place. false when any
  // error was reported.
  bool build_flat(const Node& list, std::vector<Param>& out) {
    std::size_t errors_before = reader_.errors();
    reserve_params(out, out.size() + list.items().size());
    for (const Node& item : list.items()) {
      if (!reader_.expect_map(item, "a `params` entry")) continue;
      std::optional<Entry> entry = build_param(item);
      if (entry && reader_.errors() == errors_before) out.push_back(std::move(entry->param));
    }
    return reader_.errors() == errors_before;
  }

 private:
  std::optional<Entry> build_group(const Node& item, int depth) {
    reader_.check_keys(item, {"repeat", "params"}, "a repeat group");
    if (depth >= kMaxRepeatDepth) {
      reader_.error(item, "repeat groups nest deeper than " + std::to_string(kMaxRepeatDepth),
                    "flatten the groups: one `repeat` may name several variables");
      return std::nullopt;
    }
    Entry entry;
    entry.group = true;
    entry.param.loc = reader_.loc(item);
    if (!parse_vars(*item.find("repeat"), entry.vars)) return std::nullopt;
    const Node* children = item.find("params");
    if (children == nullptr) {
      reader_.error(item, "repeat group has no `params` list", "add `params: [...]` to the group");
      return std::nullopt;
    }
    std::size_t outer = scope_.size();
    for (RepeatVar& var : entry.vars) scope_.push_back(&var);
    entry.children = build_list(*children, depth + 1);
    scope_.resize(outer);
    for (const RepeatVar& var : entry.vars) {
      if (!var.used) {
        reader_.error(var.loc, "repeat variable `" + var.name + "` is not used in any name",
                      "write `{" + var.name + "}` in the names, or remove the variable");
      }
    }
    return entry;
  }

  bool parse_vars(const Node& repeat, std::vector<RepeatVar>& vars) {
    if (!reader_.expect_map(repeat, "`repeat`")) return false;
    if (repeat.items().empty()) {
      reader_.error(repeat, "`repeat` names no variable", "e.g. `repeat: {i: [0, 32]}`");
      return false;
    }
    bool ok = true;
    vars.clear();
    for (const Node& var_node : repeat.items()) ok = parse_var(var_node, vars) && ok;
    return ok;
  }

  bool parse_var(const Node& node, std::vector<RepeatVar>& vars) {
    RepeatVar var{std::string(node.key()), 0, 0, reader_.key_loc(node), false};
    if (!is_identifier(var.name)) {
      reader_.error(var.loc, "repeat variable `" + var.name + "` is not an identifier",
                    "variable names are letters, digits and `_`, not starting with a digit");
      return false;
    }
    for (const RepeatVar& sibling : vars) {
      if (sibling.name == var.name) {
        reader_.error(var.loc, "repeat variable `" + var.name + "` is listed twice",
                      "give each variable of a group a different name");
        return false;
      }
    }
    for (const RepeatVar* outer : scope_) {
      if (outer->name == var.name) {
        reader_.error(var.loc,
                      "repeat variable `" + var.name +
                          "` is already bound by an "
                          "enclosing repeat",
                      "use a different name");
        return false;
      }
    }
    if (!node.is_seq() || node.items().size() != 2) {
      reader_.error(node,
                    "the range of `" + var.name + "` must be [start, stop], got " + describe(node),
                    "ranges are half-open: [0, 32] gives 0..31");
      return false;
    }
    std::optional<std::int64_t> start = reader_.get_int(node.items()[0], "a repeat start");
    std::optional<std::int64_t> stop = reader_.get_int(node.items()[1], "a repeat stop");
    if (!start || !stop) return false;
    if (*stop <= *start) {
      reader_.error(node,
                    "the range [" + std::to_string(*start) + ", " + std::to_string(*stop) +
                        ") of `" + var.name + "` is " + (*stop == *start ? "empty" : "inverted"),
                    "ranges are half-open [start, stop) with start < stop");
      return false;
    }
    var.start = *start;
    var.stop = *stop;
    vars.push_back(std::move(var));
    return true;
  }

  // Index of a param entry key in {name, shape, dtype, requires_grad, fused,
  // head_indexed}, or -1.
  static int param_key(std::string_view key) {
    if (key == "name") return 0;
    if (key == "shape") return 1;
    if (key == "dtype") return 2;
    if (key == "requires_grad") return 3;
    if (key == "fused") return 4;
    if (key == "head_indexed") return 5;
    return -1;
  }

  std::optional<Entry> build_param(const Node& item) {
    // One pass over the entry's keys; any unknown or repeated key takes the
    // reporting path (check_keys).
    std::array<const Node*, 6> slot{};
    bool ok = item.items().size() <= slot.size();
    for (std::size_t i = 0; ok && i < item.items().size(); ++i) {
      int k = param_key(item.items()[i].key());
      ok = k >= 0 && slot[static_cast<std::size_t>(k)] == nullptr;
      if (ok) slot[static_cast<std::size_t>(k)] = &item.items()[i];
    }
    if (!ok) {
      ok = reader_.check_keys(item,
                              {"name", "shape", "dtype", "requires_grad", "fused", "head_indexed"},
                              "a param entry");
      slot = {item.find("name"),          item.find("shape"), item.find("dtype"),
              item.find("requires_grad"), item.find("fused"), item.find("head_indexed")};
    }
    Entry entry;
    entry.param.loc = reader_.loc(item);
    entry.param.dtype = default_dtype_;
    const Node* name = slot[0];
    const Node* shape = slot[1];
    if (name == nullptr || shape == nullptr) {
      reader_.error(
          item, std::string("param entry has no `") + (name == nullptr ? "name" : "shape") + "`",
          "a param entry is {name: FQN, shape: [...]} (optional dtype, requires_grad); a "
          "group is {repeat: {...}, params: [...]}");
      return std::nullopt;
    }
    if (name->is_scalar() && !has_brace(name->text())) {
      // No variable to substitute: check the text, skip template compilation.
      if (check_name_text(*name, name->text())) {
        entry.param.name = std::string(name->text());
      } else {
        ok = false;
      }
    } else {
      ok = compile_name(*name, entry.pieces) && ok;
    }
    std::optional<Shape> parsed_shape = parse_shape(*shape, reader_);
    ok = parsed_shape.has_value() && ok;
    if (parsed_shape) entry.param.shape = std::move(*parsed_shape);
    if (const Node* dtype = slot[2]) {
      std::optional<DType> parsed_dtype = parse_dtype_node(*dtype, reader_);
      ok = parsed_dtype.has_value() && ok;
      if (parsed_dtype) entry.param.dtype = *parsed_dtype;
    }
    // An integer or bool tensor cannot require grad in torch: frozen unless it says
    // otherwise, and saying `requires_grad: true` is an error (trial C 8: an int64
    // position_ids in a plain inventory was planned trainable and FSDP-sharded).
    entry.param.requires_grad = can_require_grad(entry.param.dtype);
    if (const Node* rg = slot[3]) {
      std::optional<bool> requires_grad = reader_.get_bool(*rg, "`requires_grad`");
      ok = requires_grad.has_value() && ok;
      if (requires_grad && *requires_grad && !can_require_grad(entry.param.dtype)) {
        reader_.error(*rg,
                      "`requires_grad: true` on a param of dtype " +
                          std::string(dtype_name(entry.param.dtype)) +
                          ": torch lets only floating point tensors require gradients",
                      "drop `requires_grad` (integer and bool params are frozen), or give the "
                      "param its floating point dtype");
        ok = false;
      } else if (requires_grad) {
        entry.param.requires_grad = *requires_grad;
      }
    }
    if (const Node* fused = slot[4]; fused != nullptr && parsed_shape) {
      entry.param.fused = parse_fused(*fused, entry.param.shape, reader_);
      ok = entry.param.fused.has_value() && ok;
    }
    if (const Node* head = slot[5]; head != nullptr && parsed_shape) {
      entry.param.head_indexed = parse_head_indexed(*head, entry.param.shape, reader_);
      ok = entry.param.head_indexed.has_value() && ok;
    }
    if (!ok) return std::nullopt;
    return entry;
  }

  static bool has_brace(std::string_view text) {
    return std::any_of(text.begin(), text.end(),
                       [](char character) { return character == '{' || character == '}'; });
  }

  // Printable ASCII, no empty segment: the common case, in one pass.
  static bool plain_ascii_name(std::string_view name) {
    if (name.empty() || name.front() == '.' || name.back() == '.') return false;
    char prev = 0;
    for (char character : name) {
      auto code = static_cast<unsigned char>(character);
      if (code <= 0x20 || code >= 0x7F || (character == '.' && prev == '.')) return false;
      prev = character;
    }
    return true;
  }

  bool check_name_text(const Node& at, std::string_view name) {
    if (plain_ascii_name(name)) return true;
    // The rule every reader shares (checkpoint names too); braces are repeat variables here.
    const std::string_view why = fqn_problem(name, true);
    if (why.empty()) return true;
    reader_.error(
        at, "parameter name " + (is_valid_utf8(name) ? describe(at) + " " : "") + std::string(why),
        "names are dot-separated FQNs such as `model.layers.0.mlp.up_proj.weight`");
    return false;
  }

  bool compile_name(const Node& at, std::vector<NamePiece>& pieces) {
    std::optional<std::string> text = reader_.get_string(at, "`name`");
    if (!text || !check_name_text(at, *text)) return false;
    std::size_t i = 0;
    std::string literal;
    while (i < text->size()) {
      char character = (*text)[i];
      if (character == '}') return name_error(at, "has a `}` without `{`");
      if (character != '{') {
        literal.push_back(character);
        ++i;
        continue;
      }
      std::size_t close = text->find('}', i);
      if (close == std::string::npos) return name_error(at, "has an unclosed `{`");
      std::string var = text->substr(i + 1, close - i - 1);
      int slot = bind(var);
      if (slot < 0) {
        reader_.error(at,
                      "`{" + var + "}` in " + describe(at) + " is not bound by an enclosing repeat",
                      bound_hint(var));
        return false;
      }
      pieces.push_back(NamePiece{std::move(literal), -1});
      literal.clear();
      pieces.push_back(NamePiece{{}, slot});
      i = close + 1;
    }
    if (!literal.empty()) pieces.push_back(NamePiece{std::move(literal), -1});
    return true;
  }

  bool name_error(const Node& at, const std::string& why) {
    reader_.error(at, "parameter name " + describe(at) + " " + why,
                  "`{var}` substitutes a repeat variable; braces are not allowed otherwise");
    return false;
  }

  int bind(const std::string& var) {
    for (std::size_t k = scope_.size(); k-- > 0;) {
      if (scope_[k]->name == var) {
        scope_[k]->used = true;
        return static_cast<int>(k);
      }
    }
    return -1;
  }

  std::string bound_hint(const std::string& var) const {
    if (scope_.empty()) return "wrap the entry in `repeat: {" + var + ": [0, N]}`";
    std::string names;
    for (const RepeatVar* bound : scope_) names += (names.empty() ? "" : ", ") + bound->name;
    return "variables bound here: " + names;
  }

  Reader& reader_;
  DType default_dtype_;
  std::vector<RepeatVar*> scope_;
};

// Saturating count of expanded params; reports the deepest group past the cap.
std::size_t count(const std::vector<Entry>& entries, Reader& reader, bool& reported) {
  std::size_t total = 0;
  for (const Entry& entry : entries) {
    std::size_t expanded = 1;
    if (entry.group) {
      expanded = count(entry.children, reader, reported);
      for (const RepeatVar& var : entry.vars) {
        auto range = static_cast<std::uint64_t>(var.stop) - static_cast<std::uint64_t>(var.start);
        expanded = range > kMaxExpandedParams ? kMaxExpandedParams + 1 : expanded * range;
        expanded = std::min(expanded, kMaxExpandedParams + 1);
      }
      if (expanded > kMaxExpandedParams && !reported) {
        reader.error(entry.param.loc,
                     "this repeat group expands to more than 10,000,000 parameters",
                     "the model may have at most 10,000,000 parameters after expansion");
        reported = true;
      }
    }
    total = std::min(total + expanded, kMaxExpandedParams + 1);
  }
  return total;
}

std::string expand_name(const std::vector<NamePiece>& pieces,
                        const std::vector<std::int64_t>& env) {
  std::string out;
  for (const NamePiece& piece : pieces) {
    if (piece.slot < 0) {
      out += piece.literal;
      continue;
    }
    char buf[24];
    auto res = std::to_chars(buf, buf + sizeof buf, env[static_cast<std::size_t>(piece.slot)]);
    out.append(buf, res.ptr);
  }
  return out;
}

bool advance(std::vector<std::int64_t>& env, std::size_t base, const std::vector<RepeatVar>& vars) {
  for (std::size_t i = vars.size(); i-- > 0;) {
    if (++env[base + i] < vars[i].stop) return true;
    env[base + i] = vars[i].start;
  }
  return false;
}

// `last_use`: the entries are expanded once (not inside a repeat group), so
// their names, shapes and locations move into the params.
void expand(std::vector<Entry>& entries, std::vector<std::int64_t>& env, std::vector<Param>& out,
            bool last_use) {
  for (Entry& entry : entries) {
    if (!entry.group) {
      if (last_use) {
        out.push_back(std::move(entry.param));
      } else {
        out.push_back(entry.param);
      }
      if (!entry.pieces.empty()) out.back().name = expand_name(entry.pieces, env);
      continue;
    }
    std::size_t base = env.size();
    for (const RepeatVar& var : entry.vars) env.push_back(var.start);
    do {
      expand(entry.children, env, out, false);
    } while (advance(env, base, entry.vars));
    env.resize(base);
  }
}

}  // namespace

bool parse_params(const Node& params, Reader& reader, DType default_dtype,
                  std::vector<Param>& out) {
  std::size_t errors_before = reader.errors();
  TemplateBuilder builder(reader, default_dtype);
  if (params.is_seq() && std::none_of(params.items().begin(), params.items().end(),
                                      [](const Node& item) { return item.find("repeat"); })) {
    // A plain inventory: at most one param per node, far below the cap.
    std::size_t before = out.size();
    if (builder.build_flat(params, out)) return true;
    out.erase(out.begin() + static_cast<std::ptrdiff_t>(before), out.end());
    return false;
  }
  std::vector<Entry> entries = builder.build_list(params, 0);
  if (reader.errors() != errors_before) return false;
  bool reported = false;
  std::size_t total = count(entries, reader, reported);
  if (total > kMaxExpandedParams) {
    if (!reported) {
      reader.error(params, "the model expands to more than 10,000,000 parameters",
                   "the model may have at most 10,000,000 parameters after expansion");
    }
    return false;
  }
  reserve_params(out, total);
  std::vector<std::int64_t> env;
  expand(entries, env, out, true);
  return true;
}

}  // namespace shardc::fe
