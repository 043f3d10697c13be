// The model's `params` list: entries and `repeat` groups (contract §3, §5.8).
// Two phases: build templates (checking every entry once, whatever its
// repeat count), then count and expand. Expansion never starts when the
// count passes kMaxExpandedParams.
#include <algorithm>
#include <array>
#include <charconv>
#include <string>

#include "frontend/model_internal.hpp"
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
void reserve_params(std::vector<Param>& out, std::size_t n) { reserve_large(out, n); }

class TemplateBuilder {
 public:
  TemplateBuilder(Reader& r, DType default_dtype) : r_(r), default_dtype_(default_dtype) {}

  std::vector<Entry> build_list(const Node& list, int depth) {
    std::vector<Entry> out;
    if (!r_.expect_seq(list, "`params`")) return out;
    out.reserve(list.items().size());
    for (const Node& item : list.items()) {
      if (!r_.expect_map(item, "a `params` entry")) continue;
      std::optional<Entry> e =
          item.find("repeat") != nullptr ? build_group(item, depth) : build_param(item);
      if (e) out.push_back(std::move(*e));
    }
    return out;
  }

  // A list without repeat groups: its params, built in place. false when any
  // error was reported.
  bool build_flat(const Node& list, std::vector<Param>& out) {
    std::size_t errors_before = r_.errors();
    reserve_params(out, out.size() + list.items().size());
    for (const Node& item : list.items()) {
      if (!r_.expect_map(item, "a `params` entry")) continue;
      std::optional<Entry> e = build_param(item);
      if (e && r_.errors() == errors_before) out.push_back(std::move(e->param));
    }
    return r_.errors() == errors_before;
  }

 private:
  std::optional<Entry> build_group(const Node& item, int depth) {
    r_.check_keys(item, {"repeat", "params"}, "a repeat group");
    if (depth >= kMaxRepeatDepth) {
      r_.error(item, "repeat groups nest deeper than " + std::to_string(kMaxRepeatDepth),
               "flatten the groups: one `repeat` may name several variables");
      return std::nullopt;
    }
    Entry e;
    e.group = true;
    e.param.loc = r_.loc(item);
    if (!parse_vars(*item.find("repeat"), e.vars)) return std::nullopt;
    const Node* children = item.find("params");
    if (children == nullptr) {
      r_.error(item, "repeat group has no `params` list", "add `params: [...]` to the group");
      return std::nullopt;
    }
    std::size_t outer = scope_.size();
    for (RepeatVar& v : e.vars) scope_.push_back(&v);
    e.children = build_list(*children, depth + 1);
    scope_.resize(outer);
    for (const RepeatVar& v : e.vars) {
      if (!v.used) {
        r_.error(v.loc, "repeat variable `" + v.name + "` is not used in any name",
                 "write `{" + v.name + "}` in the names, or remove the variable");
      }
    }
    return e;
  }

  bool parse_vars(const Node& repeat, std::vector<RepeatVar>& vars) {
    if (!r_.expect_map(repeat, "`repeat`")) return false;
    if (repeat.items().empty()) {
      r_.error(repeat, "`repeat` names no variable", "e.g. `repeat: {i: [0, 32]}`");
      return false;
    }
    bool ok = true;
    vars.clear();
    for (const Node& v : repeat.items()) ok = parse_var(v, vars) && ok;
    return ok;
  }

  bool parse_var(const Node& v, std::vector<RepeatVar>& vars) {
    RepeatVar var{std::string(v.key()), 0, 0, r_.key_loc(v), false};
    if (!valid_var_name(var.name)) {
      r_.error(var.loc, "repeat variable `" + var.name + "` is not an identifier",
               "variable names are letters, digits and `_`, not starting with a digit");
      return false;
    }
    for (const RepeatVar& sibling : vars) {
      if (sibling.name == var.name) {
        r_.error(var.loc, "repeat variable `" + var.name + "` is listed twice",
                 "give each variable of a group a different name");
        return false;
      }
    }
    for (const RepeatVar* outer : scope_) {
      if (outer->name == var.name) {
        r_.error(var.loc,
                 "repeat variable `" + var.name +
                     "` is already bound by an "
                     "enclosing repeat",
                 "use a different name");
        return false;
      }
    }
    if (!v.is_seq() || v.items().size() != 2) {
      r_.error(v, "the range of `" + var.name + "` must be [start, stop], got " + describe(v),
               "ranges are half-open: [0, 32] gives 0..31");
      return false;
    }
    std::optional<std::int64_t> start = r_.get_int(v.items()[0], "a repeat start");
    std::optional<std::int64_t> stop = r_.get_int(v.items()[1], "a repeat stop");
    if (!start || !stop) return false;
    if (*stop <= *start) {
      r_.error(v,
               "the range [" + std::to_string(*start) + ", " + std::to_string(*stop) + ") of `" +
                   var.name + "` is " + (*stop == *start ? "empty" : "inverted"),
               "ranges are half-open [start, stop) with start < stop");
      return false;
    }
    var.start = *start;
    var.stop = *stop;
    vars.push_back(std::move(var));
    return true;
  }

  static bool valid_var_name(std::string_view s) {
    if (s.empty() || (s[0] >= '0' && s[0] <= '9')) return false;
    return std::all_of(s.begin(), s.end(), [](char c) {
      return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
    });
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
      ok = r_.check_keys(item, {"name", "shape", "dtype", "requires_grad", "fused", "head_indexed"},
                         "a param entry");
      slot = {item.find("name"),          item.find("shape"), item.find("dtype"),
              item.find("requires_grad"), item.find("fused"), item.find("head_indexed")};
    }
    Entry e;
    e.param.loc = r_.loc(item);
    e.param.dtype = default_dtype_;
    const Node* name = slot[0];
    const Node* shape = slot[1];
    if (name == nullptr || shape == nullptr) {
      r_.error(item,
               std::string("param entry has no `") + (name == nullptr ? "name" : "shape") + "`",
               "a param entry is {name: FQN, shape: [...]} (optional dtype, requires_grad); a "
               "group is {repeat: {...}, params: [...]}");
      return std::nullopt;
    }
    if (name->is_scalar() && !has_brace(name->text())) {
      // No variable to substitute: check the text, skip template compilation.
      if (check_name_text(*name, name->text())) {
        e.param.name = std::string(name->text());
      } else {
        ok = false;
      }
    } else {
      ok = compile_name(*name, e.pieces) && ok;
    }
    std::optional<Shape> s = parse_shape(*shape, r_);
    ok = s.has_value() && ok;
    if (s) e.param.shape = std::move(*s);
    if (const Node* dtype = slot[2]) {
      std::optional<DType> t = parse_dtype_node(*dtype, r_);
      ok = t.has_value() && ok;
      if (t) e.param.dtype = *t;
    }
    if (const Node* rg = slot[3]) {
      std::optional<bool> b = r_.get_bool(*rg, "`requires_grad`");
      ok = b.has_value() && ok;
      if (b) e.param.requires_grad = *b;
    }
    if (const Node* fused = slot[4]; fused != nullptr && s) {
      e.param.fused = parse_fused(*fused, e.param.shape, r_);
      ok = e.param.fused.has_value() && ok;
    }
    if (const Node* head = slot[5]; head != nullptr && s) {
      e.param.head_indexed = parse_head_indexed(*head, e.param.shape, r_);
      ok = e.param.head_indexed.has_value() && ok;
    }
    if (!ok) return std::nullopt;
    return e;
  }

  static bool has_brace(std::string_view text) {
    return std::any_of(text.begin(), text.end(), [](char c) { return c == '{' || c == '}'; });
  }

  // Printable ASCII, no empty segment: the common case, in one pass.
  static bool plain_ascii_name(std::string_view name) {
    if (name.empty() || name.front() == '.' || name.back() == '.') return false;
    char prev = 0;
    for (char c : name) {
      auto u = static_cast<unsigned char>(c);
      if (u <= 0x20 || u >= 0x7F || (c == '.' && prev == '.')) return false;
      prev = c;
    }
    return true;
  }

  bool check_name_text(const Node& at, std::string_view name) {
    if (plain_ascii_name(name)) return true;
    // The rule every reader shares (checkpoint names too); braces are repeat variables here.
    const std::string_view why = fqn_problem(name, true);
    if (why.empty()) return true;
    r_.error(at,
             "parameter name " + (is_valid_utf8(name) ? describe(at) + " " : "") + std::string(why),
             "names are dot-separated FQNs such as `model.layers.0.mlp.up_proj.weight`");
    return false;
  }

  bool compile_name(const Node& at, std::vector<NamePiece>& pieces) {
    std::optional<std::string> text = r_.get_string(at, "`name`");
    if (!text || !check_name_text(at, *text)) return false;
    std::size_t i = 0;
    std::string literal;
    while (i < text->size()) {
      char c = (*text)[i];
      if (c == '}') return name_error(at, "has a `}` without `{`");
      if (c != '{') {
        literal.push_back(c);
        ++i;
        continue;
      }
      std::size_t close = text->find('}', i);
      if (close == std::string::npos) return name_error(at, "has an unclosed `{`");
      std::string var = text->substr(i + 1, close - i - 1);
      int slot = bind(var);
      if (slot < 0) {
        r_.error(at, "`{" + var + "}` in " + describe(at) + " is not bound by an enclosing repeat",
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
    r_.error(at, "parameter name " + describe(at) + " " + why,
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
    for (const RepeatVar* v : scope_) names += (names.empty() ? "" : ", ") + v->name;
    return "variables bound here: " + names;
  }

  Reader& r_;
  DType default_dtype_;
  std::vector<RepeatVar*> scope_;
};

// Saturating count of expanded params; reports the deepest group past the cap.
std::size_t count(const std::vector<Entry>& entries, Reader& r, bool& reported) {
  std::size_t total = 0;
  for (const Entry& e : entries) {
    std::size_t n = 1;
    if (e.group) {
      n = count(e.children, r, reported);
      for (const RepeatVar& v : e.vars) {
        auto range = static_cast<std::uint64_t>(v.stop) - static_cast<std::uint64_t>(v.start);
        n = range > kMaxExpandedParams ? kMaxExpandedParams + 1 : n * range;
        n = std::min(n, kMaxExpandedParams + 1);
      }
      if (n > kMaxExpandedParams && !reported) {
        r.error(e.param.loc, "this repeat group expands to more than 10,000,000 parameters",
                "the model may have at most 10,000,000 parameters after expansion");
        reported = true;
      }
    }
    total = std::min(total + n, kMaxExpandedParams + 1);
  }
  return total;
}

std::string expand_name(const std::vector<NamePiece>& pieces,
                        const std::vector<std::int64_t>& env) {
  std::string out;
  for (const NamePiece& p : pieces) {
    if (p.slot < 0) {
      out += p.literal;
      continue;
    }
    char buf[24];
    auto res = std::to_chars(buf, buf + sizeof buf, env[static_cast<std::size_t>(p.slot)]);
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
  for (Entry& e : entries) {
    if (!e.group) {
      if (last_use) {
        out.push_back(std::move(e.param));
      } else {
        out.push_back(e.param);
      }
      if (!e.pieces.empty()) out.back().name = expand_name(e.pieces, env);
      continue;
    }
    std::size_t base = env.size();
    for (const RepeatVar& v : e.vars) env.push_back(v.start);
    do {
      expand(e.children, env, out, false);
    } while (advance(env, base, e.vars));
    env.resize(base);
  }
}

}  // namespace

bool parse_params(const Node& params, Reader& r, DType default_dtype, std::vector<Param>& out) {
  std::size_t errors_before = r.errors();
  TemplateBuilder builder(r, default_dtype);
  if (params.is_seq() && std::none_of(params.items().begin(), params.items().end(),
                                      [](const Node& item) { return item.find("repeat"); })) {
    // A plain inventory: at most one param per node, far below the cap.
    std::size_t before = out.size();
    if (builder.build_flat(params, out)) return true;
    out.erase(out.begin() + static_cast<std::ptrdiff_t>(before), out.end());
    return false;
  }
  std::vector<Entry> entries = builder.build_list(params, 0);
  if (r.errors() != errors_before) return false;
  bool reported = false;
  std::size_t total = count(entries, r, reported);
  if (total > kMaxExpandedParams) {
    if (!reported) {
      r.error(params, "the model expands to more than 10,000,000 parameters",
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
