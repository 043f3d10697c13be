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

std::optional<RawAttribute> raw_value(std::string_view key, simdjson::dom::element element);

std::optional<std::string> scalar_json(simdjson::dom::element element, bool yaml) {
  switch (element.type()) {
    case simdjson::dom::element_type::INT64:
      return std::to_string(element.get_int64().value_unsafe());
    case simdjson::dom::element_type::UINT64:
      return std::to_string(element.get_uint64().value_unsafe());
    case simdjson::dom::element_type::DOUBLE: {
      char buf[64];
      const double number = element.get_double().value_unsafe();
      const auto res = std::to_chars(buf, buf + sizeof buf, number);
      std::string text(buf, res.ptr);
      if (text.find_first_of(".en") == std::string::npos) text += ".0";
      return text;
    }
    case simdjson::dom::element_type::BOOL:
      return element.get_bool().value_unsafe() ? "true" : "false";
    case simdjson::dom::element_type::NULL_VALUE:
      return "null";
    case simdjson::dom::element_type::STRING: {
      const std::string_view text = element.get_string().value_unsafe();
      return yaml ? imp::yaml_string(text) : imp::json_string(text);
    }
    case simdjson::dom::element_type::ARRAY: {
      std::string out = "[";
      bool first = true;
      for (simdjson::dom::element entry : element.get_array().value_unsafe()) {
        const std::optional<std::string> item = scalar_json(entry, yaml);
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

std::optional<RawAttribute> raw_value(std::string_view key, simdjson::dom::element element) {
  const std::optional<std::string> yaml = scalar_json(element, true);
  const std::optional<std::string> json = scalar_json(element, false);
  if (!yaml || !json) return std::nullopt;
  return RawAttribute{std::string(key), *yaml, *json};
}

std::string plain_text(simdjson::dom::element element) {
  std::string_view text;
  if (element.get_string().get(text) == simdjson::SUCCESS) return std::string(text);
  return scalar_json(element, false).value_or("");
}

// Raw attributes, header comments and the dtype of a JSON inventory.
void json_extras(const std::string& text, ImportedModel& im) {
  simdjson::dom::parser parser;
  const simdjson::padded_string padded(text);
  simdjson::dom::object root;
  if (parser.parse(padded).get_object().get(root) != simdjson::SUCCESS) return;
  for (std::string_view key : kCommentKeys) {
    simdjson::dom::element value;
    if (root[key].get(value) == simdjson::SUCCESS) im.comments.emplace_back(key, plain_text(value));
  }
  simdjson::dom::object attrs;
  if (root["attributes"].get_object().get(attrs) == simdjson::SUCCESS) {
    for (simdjson::dom::key_value_pair kv : attrs) {
      if (auto raw = raw_value(kv.key, kv.value)) im.raw_attributes.push_back(std::move(*raw));
    }
  }
  simdjson::dom::element tie;
  bool has_tie_attr = false;
  for (const RawAttribute& attribute : im.raw_attributes)
    has_tie_attr |= attribute.key == "tie_word_embeddings";
  bool tie_value = false;
  if (!has_tie_attr && root["tie_word_embeddings"].get(tie) == simdjson::SUCCESS &&
      tie.get_bool().get(tie_value) == simdjson::SUCCESS) {
    const std::string flag = tie_value ? "true" : "false";
    im.raw_attributes.push_back({"tie_word_embeddings", flag, flag});
  }
  std::string_view dtype;
  if (root["dtype"].get_string().get(dtype) == simdjson::SUCCESS)
    im.default_dtype = std::string(dtype);
}

// Attributes of a YAML model, from the parsed values.
void typed_extras(const ModelAttributes& attributes, ImportedModel& im) {
  for (const auto& [key, value] : imp::int_attributes(attributes))
    im.raw_attributes.push_back({key, std::to_string(value), std::to_string(value)});
  if (attributes.weight_block_size.size() == 2) {
    const std::string text = "[" + std::to_string(attributes.weight_block_size[0]) + ", " +
                             std::to_string(attributes.weight_block_size[1]) + "]";
    im.raw_attributes.push_back({"weight_block_size", text, text});
  }
  if (attributes.tie_word_embeddings) {
    const std::string text = *attributes.tie_word_embeddings ? "true" : "false";
    im.raw_attributes.push_back({"tie_word_embeddings", text, text});
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
    for (Param& param : im.model.params) {
      if (param.fused || arch.empty()) continue;
      auto by_arch = known_fused(param.name, param.shape, attrs, arch);
      if (by_arch && by_arch != known_fused(param.name, param.shape, attrs, ""))
        param.fused = by_arch;
    }
    std::string first_frozen;
    if (const std::size_t frozen =
            imp::freeze_gradient_free_params(im.model.params, arch, first_frozen))
      im.comments.emplace_back("frozen: no gradient reaches them",
                               std::to_string(frozen) + ", e.g. " + first_frozen);
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
