// The compact model writer: folds runs of identical numbered blocks into
// nested `repeat` groups (the algorithm of the former tools/compact_model.py,
// byte for byte) and renders YAML or the plain inventory JSON.
#include <charconv>
#include <map>

#include "core/fused.hpp"
#include "import/import_internal.hpp"

namespace shardc {
namespace {

struct CParam {
  std::string name;
  const Param* src = nullptr;  // shape and dtype
};

struct Node {
  bool repeat = false;
  CParam param;
  std::string var;
  std::int64_t start = 0;
  std::int64_t stop = 0;
  std::vector<Node> children;
};

// Repeat variable names by nesting depth: layers, experts, then anything deeper.
constexpr std::string_view kVarNames[] = {"i", "e", "j", "k", "m", "n"};
constexpr char kMarker = '\0';  // hides a lone block's own index from split_index

struct Split {
  std::size_t head_len = 0;  // length of "prefix." (ends with the dot)
  std::int64_t index = -1;
  std::size_t cut = 0;  // head_len + digits
};

bool numeric(std::string_view seg) {
  if (seg.empty() || seg.size() > 18) return false;
  if (seg.size() > 1 && seg[0] == '0') return false;  // keeps str(int(seg)) == seg
  for (const char c : seg) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

// First purely numeric dot-segment after the first one.
std::optional<Split> split_index(std::string_view name) {
  std::size_t pos = name.find('.');
  while (pos != std::string_view::npos) {
    const std::size_t begin = pos + 1;
    const std::size_t end = std::min(name.find('.', begin), name.size());
    const std::string_view seg = name.substr(begin, end - begin);
    if (numeric(seg)) {
      Split s;
      s.head_len = begin;
      std::from_chars(seg.data(), seg.data() + seg.size(), s.index);
      s.cut = end;
      return s;
    }
    pos = end < name.size() ? end : std::string_view::npos;
  }
  return std::nullopt;
}

struct Block {
  std::string_view head;  // empty: a param without an index
  std::int64_t index = -1;
  std::size_t cut = 0;
  std::vector<const CParam*> members;
};

std::vector<Block> blocks_of(const std::vector<CParam>& params) {
  std::vector<Block> out;
  for (const CParam& p : params) {
    const std::optional<Split> s = split_index(p.name);
    if (!s) {
      out.push_back({{}, -1, 0, {&p}});
      continue;
    }
    const std::string_view head = std::string_view(p.name).substr(0, s->head_len);
    if (!out.empty() && !out.back().head.empty() && out.back().head == head &&
        out.back().index == s->index) {
      out.back().members.push_back(&p);
    } else {
      out.push_back({head, s->index, s->cut, {&p}});
    }
  }
  return out;
}

bool same_signature(const Block& a, const Block& b) {
  if (a.members.size() != b.members.size()) return false;
  for (std::size_t i = 0; i < a.members.size(); ++i) {
    const CParam& x = *a.members[i];
    const CParam& y = *b.members[i];
    if (std::string_view(x.name).substr(a.cut) != std::string_view(y.name).substr(b.cut) ||
        x.src->shape != y.src->shape || x.src->dtype != y.src->dtype ||
        x.src->requires_grad != y.src->requires_grad || x.src->fused != y.src->fused ||
        x.src->head_indexed != y.src->head_indexed) {
      return false;
    }
  }
  return true;
}

std::vector<CParam> rewrite(const Block& b, std::string_view replacement) {
  std::vector<CParam> out;
  out.reserve(b.members.size());
  for (const CParam* p : b.members) {
    std::string name(b.head);
    name += replacement;
    name.append(p->name, b.cut, std::string::npos);
    out.push_back({std::move(name), p->src});
  }
  return out;
}

// Puts a lone block's index back in place of its marker. The markers of nested lone blocks
// sit in nesting order (each level's index is the first numeric segment after the outer
// one's marker), and the innermost is restored first: it is always the last marker. (The
// first one, as before, swapped the indices of `a.0.b.5120` into `a.5120.b.0`: found by
// fuzz_import, tests/fuzz/corpus/import/crash-6e74ae2f.)
void restore(Node& n, std::string_view text) {
  if (!n.repeat) {
    const auto at = n.param.name.rfind(kMarker);
    if (at != std::string::npos) n.param.name.replace(at, 1, text);
    return;
  }
  for (Node& c : n.children) restore(c, text);
}

std::vector<Node> compact(const std::vector<CParam>& params, std::size_t depth) {
  const std::string var =
      depth < std::size(kVarNames) ? std::string(kVarNames[depth]) : "v" + std::to_string(depth);
  const std::vector<Block> blocks = blocks_of(params);
  std::vector<Node> out;
  std::size_t pos = 0;
  while (pos < blocks.size()) {
    const Block& b = blocks[pos];
    if (b.head.empty()) {
      out.push_back(Node{false, *b.members[0], {}, 0, 0, {}});
      ++pos;
      continue;
    }
    std::size_t end = pos + 1;
    while (end < blocks.size() && blocks[end].head == b.head &&
           blocks[end].index == b.index + static_cast<std::int64_t>(end - pos) &&
           same_signature(b, blocks[end])) {
      ++end;
    }
    if (end - pos >= 2) {
      Node r{true, {}, var, b.index, b.index + static_cast<std::int64_t>(end - pos), {}};
      r.children = compact(rewrite(b, "{" + var + "}"), depth + 1);
      out.push_back(std::move(r));
    } else {
      // A lone block: keep its literal index, but compact what is inside it.
      std::vector<Node> inner = compact(rewrite(b, std::string_view(&kMarker, 1)), depth + 1);
      for (Node& n : inner) {
        restore(n, std::to_string(b.index));
        out.push_back(std::move(n));
      }
    }
    pos = end;
  }
  return out;
}

std::string shape_yaml(const Shape& shape) { return imp::shape_text(shape); }

// {"parts": [..], "dim": d, "groups": G, "order": "...", "names": [..], "source": ".."}: the
// layout shardc plans a fused param by (model_fused.cpp reads it back).
std::string fused_json(const FusedLayout& f) {
  std::string t = "{\"parts\": " + fused_parts_text(f, true);
  t += ", \"dim\": " + std::to_string(f.dim) + ", \"groups\": " + std::to_string(f.groups) +
       ", \"order\": \"" + fused_order_name(f) + "\", \"names\": [";
  for (std::size_t i = 0; i < f.part_names.size(); ++i)
    t += (i ? ", " : "") + imp::json_string(f.part_names[i]);
  return t + "], \"source\": " + imp::json_string(f.source) + "}";
}

// `, fused: {parts: 2, dim: 2, interleave: 1, names: [gate, up]}` (model_fused.cpp reads it).
std::string fused_yaml(const FusedLayout& f) {
  const bool equal = fused_parts_equal(f);
  std::string t = ", fused: {parts: " + fused_parts_text(f);
  t += ", dim: " + std::to_string(f.dim);
  if (f.groups > 1) {
    t += equal ? ", interleave: " + std::to_string(f.parts.front() / f.groups)
               : ", groups: " + std::to_string(f.groups);
  }
  t += ", names: [";
  for (std::size_t i = 0; i < f.part_names.size(); ++i)
    t += (i ? ", " : "") + imp::yaml_string(f.part_names[i]);
  return t + "]}";
}

// `, head_indexed: {dim: 0}` / `{dim: 0, heads: kv}` (model_fused.cpp reads it).
std::string head_indexed_yaml(const HeadIndexed& h) {
  return ", head_indexed: {dim: " + std::to_string(h.dim) + (h.kv ? ", heads: kv}" : "}");
}

std::string head_indexed_json(const HeadIndexed& h) {
  return "{\"dim\": " + std::to_string(h.dim) + ", \"heads\": \"" + (h.kv ? "kv" : "q") + "\"}";
}

// The typed attributes of a sub-model, as `key: value` pairs in kAttrs order.
std::vector<std::pair<std::string, std::int64_t>> sub_attributes(const ModelAttributes& a) {
  std::vector<std::pair<std::string, std::int64_t>> out;
  const auto add = [&](const char* key, const std::optional<std::int64_t>& v) {
    if (v) out.emplace_back(key, *v);
  };
  add("num_attention_heads", a.num_attention_heads);
  add("num_key_value_heads", a.num_key_value_heads);
  add("head_dim", a.head_dim);
  add("hidden_size", a.hidden_size);
  add("vocab_size", a.vocab_size);
  add("num_experts", a.num_experts);
  return out;
}

std::string submodels_yaml(const Model& m) {
  if (m.submodels.empty()) return {};
  std::string out = "submodels:\n";
  for (const SubModel& s : m.submodels) {
    out += "  - {prefix: " + imp::yaml_string(s.prefix);
    if (!s.config.empty()) out += ", config: " + imp::yaml_string(s.config);
    out += ", attributes: {";
    bool first = true;
    for (const auto& [key, value] : sub_attributes(s.attributes)) {
      out += (first ? "" : ", ") + key + ": " + std::to_string(value);
      first = false;
    }
    out += "}}\n";
  }
  return out;
}

std::string submodels_json(const Model& m) {
  if (m.submodels.empty()) return {};
  std::string out = "  \"submodels\": [";
  for (std::size_t i = 0; i < m.submodels.size(); ++i) {
    const SubModel& s = m.submodels[i];
    out += (i ? ", " : "") + std::string("{\"prefix\": ") + imp::json_string(s.prefix);
    if (!s.config.empty()) out += ", \"config\": " + imp::json_string(s.config);
    out += ", \"attributes\": {";
    bool first = true;
    for (const auto& [key, value] : sub_attributes(s.attributes)) {
      out += (first ? "" : ", ") + imp::json_string(key) + ": " + std::to_string(value);
      first = false;
    }
    out += "}}";
  }
  return out + "],\n";
}

void emit(const std::vector<Node>& nodes, std::size_t indent, DType dflt, std::string& out) {
  const std::string pad(indent, ' ');
  for (const Node& n : nodes) {
    if (!n.repeat) {
      out += pad + "- {name: " + imp::yaml_string(n.param.name) +
             ", shape: " + shape_yaml(n.param.src->shape);
      if (n.param.src->dtype != dflt)
        out += ", dtype: " + std::string(dtype_name(n.param.src->dtype));
      if (!n.param.src->requires_grad) out += ", requires_grad: false";
      if (n.param.src->fused) out += fused_yaml(*n.param.src->fused);
      if (n.param.src->head_indexed) out += head_indexed_yaml(*n.param.src->head_indexed);
      out += "}\n";
      continue;
    }
    out += pad + "- repeat: {" + n.var + ": [" + std::to_string(n.start) + ", " +
           std::to_string(n.stop) + "]}\n";
    out += pad + "  params:\n";
    emit(n.children, indent + 4, dflt, out);
  }
}

// The inventory's dtype, else the most common one (first seen wins a tie).
DType default_dtype(const ImportedModel& m) {
  if (m.default_dtype) {
    if (const auto d = parse_dtype(*m.default_dtype)) return *d;
  }
  std::map<DType, std::size_t> counts;
  std::vector<DType> seen;
  for (const Param& p : m.model.params) {
    if (counts[p.dtype]++ == 0) seen.push_back(p.dtype);
  }
  DType best = DType::Float32;
  std::size_t best_count = 0;
  for (const DType d : seen) {
    if (counts[d] > best_count) {
      best = d;
      best_count = counts[d];
    }
  }
  return best;
}

std::string model_name(const ImportedModel& m) {
  return m.model.name.empty() ? "model" : m.model.name;
}

}  // namespace

std::string render_model_yaml(const ImportedModel& m) {
  std::vector<CParam> params;
  params.reserve(m.model.params.size());
  for (const Param& p : m.model.params) params.push_back({p.name, &p});
  const std::vector<Node> nodes = compact(params, 0);
  const DType dflt = default_dtype(m);
  const std::string name = model_name(m);
  // Comments carry config.json strings and paths: one line each, whatever they contain.
  std::string out = "# " + imp::comment_text(name) +
                    ": compact shardc model description, generated by shardc import\n";
  out += "# from " + imp::comment_text(m.source) +
         " (do not edit by hand; regenerate with shardc import).\n";
  for (const auto& [key, value] : m.comments)
    out += "# " + imp::comment_text(key) + ": " + imp::comment_text(value) + "\n";
  out += "format: shardc.model/v1\nname: " + imp::yaml_string(name) + "\n";
  out += "dtype: " + std::string(dtype_name(dflt)) + "\n";
  if (!m.model.module_order.empty()) {
    if (m.model.module_order == "natural")
      out +=
          "# natural: sorted by name (no exact module-order rules); validate warns "
          "W-MODULE-ORDER until tools/dump_model.py confirms the order\n";
    out += "module_order: " + m.model.module_order + "\n";
  }
  if (!m.raw_attributes.empty()) {
    out += "attributes:\n";
    for (const RawAttribute& a : m.raw_attributes)
      out += "  " + imp::yaml_string(a.key) + ": " + a.yaml + "\n";
  }
  out += submodels_yaml(m.model);
  out += "params:\n";
  emit(nodes, 2, dflt, out);
  if (!m.model.tied.empty()) {
    out += "tied:\n";
    for (const TiePair& t : m.model.tied) {
      out += "  - [" + imp::yaml_string(t.source) + ", " + imp::yaml_string(t.alias) + "]\n";
    }
  }
  return out;
}

std::string render_model_json(const ImportedModel& m) {
  const DType dflt = default_dtype(m);
  // Every known fused layout is listed (not only those the YAML must carry), so the
  // table of shardc/fused.hpp can be compared with the architecture's modules.
  std::string arch;
  for (const auto& [key, value] : m.comments)
    if (key == "architecture") arch = value;
  std::string out = "{\n  \"model\": " + imp::json_string(model_name(m)) + ",\n";
  out += "  \"dtype\": \"" + std::string(dtype_name(dflt)) + "\",\n";
  if (!m.model.module_order.empty())
    out += "  \"module_order\": " + imp::json_string(m.model.module_order) + ",\n";
  out += submodels_json(m.model);
  if (m.model.attributes.tie_word_embeddings) {
    out += std::string("  \"tie_word_embeddings\": ") +
           (*m.model.attributes.tie_word_embeddings ? "true" : "false") + ",\n";
  }
  out += "  \"tied_weights\": {";
  for (std::size_t i = 0; i < m.model.tied.size(); ++i) {
    out += (i > 0 ? ", " : "") + imp::json_string(m.model.tied[i].alias) + ": " +
           imp::json_string(m.model.tied[i].source);
  }
  out += "},\n  \"attributes\": {";
  for (std::size_t i = 0; i < m.raw_attributes.size(); ++i) {
    out += (i > 0 ? ", " : "") + imp::json_string(m.raw_attributes[i].key) + ": " +
           m.raw_attributes[i].json;
  }
  out += "},\n  \"params\": [\n";
  for (std::size_t i = 0; i < m.model.params.size(); ++i) {
    Param p = m.model.params[i];
    if (!p.fused) p.fused = known_fused(p.name, p.shape, m.model.attributes, arch);
    out += "    {\"name\": " + imp::json_string(p.name) +
           ", \"shape\": " + imp::shape_text(p.shape) + ", \"dtype\": \"" +
           std::string(dtype_name(p.dtype)) + "\"";
    if (!p.requires_grad) out += ", \"requires_grad\": false";
    if (p.fused) out += ", \"fused\": " + fused_json(*p.fused);
    if (p.head_indexed) out += ", \"head_indexed\": " + head_indexed_json(*p.head_indexed);
    out += i + 1 < m.model.params.size() ? "},\n" : "}\n";
  }
  out += "  ]\n}\n";
  return out;
}

}  // namespace shardc
