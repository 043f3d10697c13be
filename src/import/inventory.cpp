// import_model_file: a model description or plain inventory as an
// ImportedModel, keeping the inventory's raw attributes and header keys for
// the compact writer (as tools/compact_model.py wrote them).
#include <simdjson.h>

#include <charconv>

#include "core/fused.hpp"
#include "frontend/frontend.hpp"
#include "import/import_internal.hpp"

namespace shardc {
namespace {

// Inventory keys echoed as `# key: value` header comments.
constexpr std::string_view kCommentKeys[] = {"hf_repo", "architecture", "param_count",
                                             "num_tensors", "active_param_count"};

std::optional<RawAttribute> raw_value(std::string_view key, simdjson::dom::element v);

std::optional<std::string> scalar_json(simdjson::dom::element v, bool yaml) {
  switch (v.type()) {
    case simdjson::dom::element_type::INT64:
      return std::to_string(v.get_int64().value_unsafe());
    case simdjson::dom::element_type::UINT64:
      return std::to_string(v.get_uint64().value_unsafe());
    case simdjson::dom::element_type::DOUBLE: {
      char buf[64];
      const double d = v.get_double().value_unsafe();
      const auto res = std::to_chars(buf, buf + sizeof buf, d);
      std::string text(buf, res.ptr);
      if (text.find_first_of(".en") == std::string::npos) text += ".0";
      return text;
    }
    case simdjson::dom::element_type::BOOL:
      return v.get_bool().value_unsafe() ? "true" : "false";
    case simdjson::dom::element_type::NULL_VALUE:
      return "null";
    case simdjson::dom::element_type::STRING: {
      const std::string_view s = v.get_string().value_unsafe();
      return yaml ? imp::yaml_string(s) : imp::json_string(s);
    }
    case simdjson::dom::element_type::ARRAY: {
      std::string out = "[";
      bool first = true;
      for (simdjson::dom::element e : v.get_array().value_unsafe()) {
        const std::optional<std::string> item = scalar_json(e, yaml);
        if (!item) return std::nullopt;
        out += (first ? "" : ", ") + *item;
        first = false;
      }
      return out + "]";
    }
    default:
      return std::nullopt;  // objects are not attributes
  }
}

std::optional<RawAttribute> raw_value(std::string_view key, simdjson::dom::element v) {
  const std::optional<std::string> yaml = scalar_json(v, true);
  const std::optional<std::string> json = scalar_json(v, false);
  if (!yaml || !json) return std::nullopt;
  return RawAttribute{std::string(key), *yaml, *json};
}

std::string plain_text(simdjson::dom::element v) {
  std::string_view s;
  if (v.get_string().get(s) == simdjson::SUCCESS) return std::string(s);
  return scalar_json(v, false).value_or("");
}

// Raw attributes, header comments and the dtype of a JSON inventory.
void json_extras(const std::string& text, ImportedModel& im) {
  simdjson::dom::parser parser;
  const simdjson::padded_string padded(text);
  simdjson::dom::object root;
  if (parser.parse(padded).get_object().get(root) != simdjson::SUCCESS) return;
  for (std::string_view key : kCommentKeys) {
    simdjson::dom::element v;
    if (root[key].get(v) == simdjson::SUCCESS) im.comments.emplace_back(key, plain_text(v));
  }
  simdjson::dom::object attrs;
  if (root["attributes"].get_object().get(attrs) == simdjson::SUCCESS) {
    for (simdjson::dom::key_value_pair kv : attrs) {
      if (auto raw = raw_value(kv.key, kv.value)) im.raw_attributes.push_back(std::move(*raw));
    }
  }
  simdjson::dom::element tie;
  bool has_tie_attr = false;
  for (const RawAttribute& a : im.raw_attributes) has_tie_attr |= a.key == "tie_word_embeddings";
  bool tie_value = false;
  if (!has_tie_attr && root["tie_word_embeddings"].get(tie) == simdjson::SUCCESS &&
      tie.get_bool().get(tie_value) == simdjson::SUCCESS) {
    const std::string t = tie_value ? "true" : "false";
    im.raw_attributes.push_back({"tie_word_embeddings", t, t});
  }
  std::string_view dtype;
  if (root["dtype"].get_string().get(dtype) == simdjson::SUCCESS)
    im.default_dtype = std::string(dtype);
}

// Attributes of a YAML model, from the parsed values.
void typed_extras(const ModelAttributes& a, ImportedModel& im) {
  auto add = [&](const char* key, const std::optional<std::int64_t>& v) {
    if (v) im.raw_attributes.push_back({key, std::to_string(*v), std::to_string(*v)});
  };
  add("num_attention_heads", a.num_attention_heads);
  add("num_key_value_heads", a.num_key_value_heads);
  add("head_dim", a.head_dim);
  add("hidden_size", a.hidden_size);
  add("vocab_size", a.vocab_size);
  add("num_experts", a.num_experts);
  if (a.weight_block_size.size() == 2) {
    const std::string t = "[" + std::to_string(a.weight_block_size[0]) + ", " +
                          std::to_string(a.weight_block_size[1]) + "]";
    im.raw_attributes.push_back({"weight_block_size", t, t});
  }
  if (a.tie_word_embeddings) {
    const std::string t = *a.tie_word_embeddings ? "true" : "false";
    im.raw_attributes.push_back({"tie_word_embeddings", t, t});
  }
}

std::string base_name(const std::string& path) {
  const auto slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

}  // namespace

std::optional<ImportedModel> import_model_file(const std::string& path, const std::string& text,
                                               DiagnosticSink& sink) {
  std::optional<Model> model = parse_model(SourceFile{path, text}, sink);
  if (!model) return std::nullopt;
  ImportedModel im;
  im.model = std::move(*model);
  im.source = base_name(path);
  const auto first = text.find_first_not_of(" \t\r\n");
  if (first != std::string::npos && text[first] == '{') {
    json_extras(text, im);
    // Layouts the inventory's architecture decides and the name alone does not
    // (gpt-oss's interleaved gate|up): written as `fused:`, as for a checkpoint.
    std::string arch;
    for (const auto& [key, value] : im.comments)
      if (key == "architecture") arch = value;
    const ModelAttributes& attrs = im.model.attributes;
    for (Param& p : im.model.params) {
      if (p.fused || arch.empty()) continue;
      auto by_arch = known_fused(p.name, p.shape, attrs, arch);
      if (by_arch && by_arch != known_fused(p.name, p.shape, attrs, "")) p.fused = by_arch;
    }
  } else {
    typed_extras(im.model.attributes, im);
  }
  for (auto& comment : imp::prestacked_expert_comments(im.model))
    im.comments.push_back(std::move(comment));
  if (im.model.name.empty()) {
    std::string stem = im.source;
    if (const auto dot = stem.find('.'); dot != std::string::npos && dot > 0) stem.resize(dot);
    im.model.name = stem;
  }
  return im;
}

}  // namespace shardc
