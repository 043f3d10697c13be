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
  for (const char digit : seg) {
    if (digit < '0' || digit > '9') return false;
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
      Split split;
      split.head_len = begin;
      std::from_chars(seg.data(), seg.data() + seg.size(), split.index);
      split.cut = end;
      return split;
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
  for (const CParam& param : params) {
    const std::optional<Split> split = split_index(param.name);
    if (!split) {
      out.push_back({{}, -1, 0, {&param}});
      continue;
    }
    const std::string_view head = std::string_view(param.name).substr(0, split->head_len);
    if (!out.empty() && !out.back().head.empty() && out.back().head == head &&
        out.back().index == split->index) {
      out.back().members.push_back(&param);
    } else {
      out.push_back({head, split->index, split->cut, {&param}});
    }
  }
  return out;
}

bool same_signature(const Block& left, const Block& right) {
  if (left.members.size() != right.members.size()) return false;
  for (std::size_t i = 0; i < left.members.size(); ++i) {
    const CParam& left_param = *left.members[i];
    const CParam& right_param = *right.members[i];
    if (std::string_view(left_param.name).substr(left.cut) !=
            std::string_view(right_param.name).substr(right.cut) ||
        left_param.src->shape != right_param.src->shape ||
        left_param.src->dtype != right_param.src->dtype ||
        left_param.src->requires_grad != right_param.src->requires_grad ||
        left_param.src->fused != right_param.src->fused ||
        left_param.src->head_indexed != right_param.src->head_indexed) {
      return false;
    }
  }
  return true;
}

std::vector<CParam> rewrite(const Block& block, std::string_view replacement) {
  std::vector<CParam> out;
  out.reserve(block.members.size());
  for (const CParam* member : block.members) {
    std::string name(block.head);
    name += replacement;
    name.append(member->name, block.cut, std::string::npos);
    out.push_back({std::move(name), member->src});
  }
  return out;
}

// Puts a lone block's index back in place of its marker. The markers of nested lone blocks
// sit in nesting order (each level's index is the first numeric segment after the outer
// one's marker), and the innermost is restored first: it is always the last marker. (The
// first one, as before, swapped the indices of `a.0.b.5120` into `a.5120.b.0`: found by
// fuzz_import, tests/fuzz/corpus/import/crash-6e74ae2f.)
void restore(Node& node, std::string_view text) {
  if (!node.repeat) {
    const auto at = node.param.name.rfind(kMarker);
    if (at != std::string::npos) node.param.name.replace(at, 1, text);
    return;
  }
  for (Node& child : node.children) restore(child, text);
}

std::vector<Node> compact(const std::vector<CParam>& params, std::size_t depth) {
  const std::string var =
      depth < std::size(kVarNames) ? std::string(kVarNames[depth]) : "v" + std::to_string(depth);
  const std::vector<Block> blocks = blocks_of(params);
  std::vector<Node> out;
  std::size_t pos = 0;
  while (pos < blocks.size()) {
    const Block& block = blocks[pos];
    if (block.head.empty()) {
      out.push_back(Node{false, *block.members[0], {}, 0, 0, {}});
      ++pos;
      continue;
    }
    std::size_t end = pos + 1;
    while (end < blocks.size() && blocks[end].head == block.head &&
           blocks[end].index == block.index + static_cast<std::int64_t>(end - pos) &&
           same_signature(block, blocks[end])) {
      ++end;
    }
    if (end - pos >= 2) {
      Node group{true, {}, var, block.index, block.index + static_cast<std::int64_t>(end - pos),
                 {}};
      group.children = compact(rewrite(block, "{" + var + "}"), depth + 1);
      out.push_back(std::move(group));
    } else {
      // A lone block: keep its literal index, but compact what is inside it.
      std::vector<Node> inner = compact(rewrite(block, std::string_view(&kMarker, 1)), depth + 1);
      for (Node& node : inner) {
        restore(node, std::to_string(block.index));
        out.push_back(std::move(node));
      }
    }
    pos = end;
  }
  return out;
}

std::string shape_yaml(const Shape& shape) { return imp::shape_text(shape); }

// {"parts": [..], "dim": d, "groups": G, "order": "...", "names": [..], "source": ".."}: the
// layout shardc plans a fused param by (model_fused.cpp reads it back).
std::string fused_json(const FusedLayout& layout) {
  std::string text = "{\"parts\": " + fused_parts_text(layout, true);
  text += ", \"dim\": " + std::to_string(layout.dim) +
          ", \"groups\": " + std::to_string(layout.groups) + ", \"order\": \"" +
          fused_order_name(layout) + "\", \"names\": [";
  for (std::size_t i = 0; i < layout.part_names.size(); ++i)
    text += (i ? ", " : "") + imp::json_string(layout.part_names[i]);
  return text + "], \"source\": " + imp::json_string(layout.source) + "}";
}

// `, fused: {parts: 2, dim: 2, interleave: 1, names: [gate, up]}` (model_fused.cpp reads it).
std::string fused_yaml(const FusedLayout& layout) {
  const bool equal = fused_parts_equal(layout);
  std::string text = ", fused: {parts: " + fused_parts_text(layout);
  text += ", dim: " + std::to_string(layout.dim);
  if (layout.groups > 1) {
    text += equal ? ", interleave: " + std::to_string(layout.parts.front() / layout.groups)
                  : ", groups: " + std::to_string(layout.groups);
  }
  text += ", names: [";
  for (std::size_t i = 0; i < layout.part_names.size(); ++i)
    text += (i ? ", " : "") + imp::yaml_string(layout.part_names[i]);
  return text + "]}";
}

// `, head_indexed: {dim: 0}` / `{dim: 0, heads: kv}` (model_fused.cpp reads it).
std::string head_indexed_yaml(const HeadIndexed& indexed) {
  return ", head_indexed: {dim: " + std::to_string(indexed.dim) +
         (indexed.kv ? ", heads: kv}" : "}");
}

std::string head_indexed_json(const HeadIndexed& indexed) {
  return "{\"dim\": " + std::to_string(indexed.dim) + ", \"heads\": \"" +
         (indexed.kv ? "kv" : "q") + "\"}";
}

std::string submodels_yaml(const Model& model) {
  if (model.submodels.empty()) return {};
  std::string out = "submodels:\n";
  for (const SubModel& sub : model.submodels) {
    out += "  - {prefix: " + imp::yaml_string(sub.prefix);
    if (!sub.config.empty()) out += ", config: " + imp::yaml_string(sub.config);
    out += ", attributes: {";
    bool first = true;
    for (const auto& [key, value] : imp::int_attributes(sub.attributes)) {
      out += (first ? "" : ", ") + key + ": " + std::to_string(value);
      first = false;
    }
    out += "}}\n";
  }
  return out;
}

std::string submodels_json(const Model& model) {
  if (model.submodels.empty()) return {};
  std::string out = "  \"submodels\": [";
  for (std::size_t i = 0; i < model.submodels.size(); ++i) {
    const SubModel& sub = model.submodels[i];
    out += (i ? ", " : "") + std::string("{\"prefix\": ") + imp::json_string(sub.prefix);
    if (!sub.config.empty()) out += ", \"config\": " + imp::json_string(sub.config);
    out += ", \"attributes\": {";
    bool first = true;
    for (const auto& [key, value] : imp::int_attributes(sub.attributes)) {
      out += (first ? "" : ", ") + imp::json_string(key) + ": " + std::to_string(value);
      first = false;
    }
    out += "}}";
  }
  return out + "],\n";
}

void emit(const std::vector<Node>& nodes, std::size_t indent, DType dflt, std::string& out) {
  const std::string pad(indent, ' ');
  for (const Node& node : nodes) {
    if (!node.repeat) {
      out += pad + "- {name: " + imp::yaml_string(node.param.name) +
             ", shape: " + shape_yaml(node.param.src->shape);
      if (node.param.src->dtype != dflt)
        out += ", dtype: " + std::string(dtype_name(node.param.src->dtype));
      if (!node.param.src->requires_grad) out += ", requires_grad: false";
      if (node.param.src->fused) out += fused_yaml(*node.param.src->fused);
      if (node.param.src->head_indexed) out += head_indexed_yaml(*node.param.src->head_indexed);
      out += "}\n";
      continue;
    }
    out += pad + "- repeat: {" + node.var + ": [" + std::to_string(node.start) + ", " +
           std::to_string(node.stop) + "]}\n";
    out += pad + "  params:\n";
    emit(node.children, indent + 4, dflt, out);
  }
}

// The inventory's dtype, else the most common one (first seen wins a tie).
DType default_dtype(const ImportedModel& imported) {
  if (imported.default_dtype) {
    if (const auto dtype = parse_dtype(*imported.default_dtype)) return *dtype;
  }
  std::map<DType, std::size_t> counts;
  std::vector<DType> seen;
  for (const Param& param : imported.model.params) {
    if (counts[param.dtype]++ == 0) seen.push_back(param.dtype);
  }
  DType best = DType::Float32;
  std::size_t best_count = 0;
  for (const DType dtype : seen) {
    if (counts[dtype] > best_count) {
      best = dtype;
      best_count = counts[dtype];
    }
  }
  return best;
}

std::string model_name(const ImportedModel& imported) {
  return imported.model.name.empty() ? "model" : imported.model.name;
}

}  // namespace

std::vector<std::pair<std::string, std::int64_t>> imp::int_attributes(
    const ModelAttributes& attributes) {
  std::vector<std::pair<std::string, std::int64_t>> out;
  const auto add = [&](const char* key, const std::optional<std::int64_t>& value) {
    if (value) out.emplace_back(key, *value);
  };
  add("num_attention_heads", attributes.num_attention_heads);
  add("num_key_value_heads", attributes.num_key_value_heads);
  add("head_dim", attributes.head_dim);
  add("hidden_size", attributes.hidden_size);
  add("vocab_size", attributes.vocab_size);
  add("num_experts", attributes.num_experts);
  // The architecture sizes the activation model and `cost` read (a model file's attributes
  // lost them on `import --format json`: cost then refused the inventory).
  add("num_hidden_layers", attributes.num_hidden_layers);
  add("intermediate_size", attributes.intermediate_size);
  add("moe_intermediate_size", attributes.moe_intermediate_size);
  add("num_experts_per_tok", attributes.num_experts_per_tok);
  add("n_shared_experts", attributes.n_shared_experts);
  add("q_lora_rank", attributes.q_lora_rank);
  add("kv_lora_rank", attributes.kv_lora_rank);
  add("qk_nope_head_dim", attributes.qk_nope_head_dim);
  add("qk_rope_head_dim", attributes.qk_rope_head_dim);
  add("v_head_dim", attributes.v_head_dim);
  add("first_k_dense_replace", attributes.first_k_dense_replace);
  return out;
}

std::string render_model_yaml(const ImportedModel& imported) {
  std::vector<CParam> params;
  params.reserve(imported.model.params.size());
  for (const Param& param : imported.model.params) params.push_back({param.name, &param});
  const std::vector<Node> nodes = compact(params, 0);
  const DType dflt = default_dtype(imported);
  const std::string name = model_name(imported);
  // Comments carry config.json strings and paths: one line each, whatever they contain.
  std::string out = "# " + imp::comment_text(name) +
                    ": compact shardc model description, generated by shardc import\n";
  out += "# from " + imp::comment_text(imported.source) +
         " (do not edit by hand; regenerate with shardc import).\n";
  for (const auto& [key, value] : imported.comments)
    out += "# " + imp::comment_text(key) + ": " + imp::comment_text(value) + "\n";
  out += "format: shardc.model/v1\nname: " + imp::yaml_string(name) + "\n";
  out += "dtype: " + std::string(dtype_name(dflt)) + "\n";
  if (!imported.model.module_order.empty()) {
    if (imported.model.module_order == "natural")
      out +=
          "# natural: sorted by name (no exact module-order rules); validate warns "
          "W-MODULE-ORDER until tools/dump_model.py confirms the order\n";
    out += "module_order: " + imported.model.module_order + "\n";
  }
  if (!imported.raw_attributes.empty()) {
    out += "attributes:\n";
    for (const RawAttribute& attribute : imported.raw_attributes)
      out += "  " + imp::yaml_string(attribute.key) + ": " + attribute.yaml + "\n";
  }
  out += submodels_yaml(imported.model);
  out += "params:\n";
  emit(nodes, 2, dflt, out);
  if (!imported.model.tied.empty()) {
    out += "tied:\n";
    for (const TiePair& tie : imported.model.tied) {
      out += "  - [" + imp::yaml_string(tie.source) + ", " + imp::yaml_string(tie.alias) + "]\n";
    }
  }
  return out;
}

std::string render_model_json(const ImportedModel& imported) {
  const DType dflt = default_dtype(imported);
  // Every known fused layout is listed (not only those the YAML must carry), so the
  // table of shardc/fused.hpp can be compared with the architecture's modules.
  std::string arch;
  for (const auto& [key, value] : imported.comments)
    if (key == "architecture") arch = value;
  std::string out = "{\n  \"model\": " + imp::json_string(model_name(imported)) + ",\n";
  out += "  \"dtype\": \"" + std::string(dtype_name(dflt)) + "\",\n";
  if (!imported.model.module_order.empty())
    out += "  \"module_order\": " + imp::json_string(imported.model.module_order) + ",\n";
  out += submodels_json(imported.model);
  if (imported.model.attributes.tie_word_embeddings) {
    out += std::string("  \"tie_word_embeddings\": ") +
           (*imported.model.attributes.tie_word_embeddings ? "true" : "false") + ",\n";
  }
  out += "  \"tied_weights\": {";
  for (std::size_t i = 0; i < imported.model.tied.size(); ++i) {
    out += (i > 0 ? ", " : "") + imp::json_string(imported.model.tied[i].alias) + ": " +
           imp::json_string(imported.model.tied[i].source);
  }
  out += "},\n  \"attributes\": {";
  for (std::size_t i = 0; i < imported.raw_attributes.size(); ++i) {
    out += (i > 0 ? ", " : "") + imp::json_string(imported.raw_attributes[i].key) + ": " +
           imported.raw_attributes[i].json;
  }
  out += "},\n  \"params\": [\n";
  for (std::size_t i = 0; i < imported.model.params.size(); ++i) {
    Param param = imported.model.params[i];
    if (!param.fused)
      param.fused = known_fused(param.name, param.shape, imported.model.attributes, arch);
    out += "    {\"name\": " + imp::json_string(param.name) +
           ", \"shape\": " + imp::shape_text(param.shape) + ", \"dtype\": \"" +
           std::string(dtype_name(param.dtype)) + "\"";
    if (!param.requires_grad) out += ", \"requires_grad\": false";
    if (param.fused) out += ", \"fused\": " + fused_json(*param.fused);
    if (param.head_indexed) out += ", \"head_indexed\": " + head_indexed_json(*param.head_indexed);
    out += i + 1 < imported.model.params.size() ? "},\n" : "}\n";
  }
  out += "  ]\n}\n";
  return out;
}

}  // namespace shardc
