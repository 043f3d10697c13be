// parse_model: the model description's top level (contract §3) for both the
// shardc.model/v1 format and plain inventories (shared/models/*.params.json).
#include <spdlog/spdlog.h>

#include <algorithm>
#include <future>
#include <string>
#include <system_error>

#include "core/module_buffers.hpp"
#include "frontend/frontend.hpp"
#include "frontend/model_internal.hpp"

namespace shardc {
namespace fe {
namespace {

constexpr std::string_view kFormat = "shardc.model/v1";

std::optional<std::int64_t> positive_attr(const Node& node, Reader& reader, std::int64_t min) {
  if (node.is_null()) return std::nullopt;
  std::optional<std::int64_t> value = reader.get_int(node, "`" + std::string(node.key()) + "`");
  if (value && *value < min) {
    reader.error(node,
                 "`" + std::string(node.key()) + "` must be at least " + std::to_string(min) +
                     ", got " + std::to_string(*value),
                 "copy the value from the model's config.json, or remove the attribute");
    return std::nullopt;
  }
  return value;
}

// `weight_block_size: [rows, cols]`, each >= 1.
void parse_block_size(const Node& node, Reader& reader, std::vector<std::int64_t>& out) {
  if (node.is_null() || !reader.expect_seq(node, "`weight_block_size`")) return;
  if (node.items().size() != 2) {
    reader.error(node, "`weight_block_size` must be [rows, cols], got " + describe(node),
                 "copy quantization_config.weight_block_size from config.json, e.g. [128, 128]");
    return;
  }
  std::vector<std::int64_t> sizes;
  for (const Node& entry : node.items()) {
    std::optional<std::int64_t> size = reader.get_int(entry, "a `weight_block_size` entry");
    if (!size) return;
    if (*size < 1) {
      reader.error(entry,
                   "a `weight_block_size` entry must be at least 1, got " + std::to_string(*size),
                   "copy quantization_config.weight_block_size from config.json, e.g. [128, 128]");
      return;
    }
    sizes.push_back(*size);
  }
  out = sizes;
}

// The activation model's sizes (ModelAttributes), by config.json name (GPT-2's
// n_layer / n_inner as transformers' GPT2Config.attribute_map; n_embd and n_head in
// parse_attributes).
std::optional<std::int64_t>* architecture_size(std::string_view key, ModelAttributes& attributes) {
  if (key == "num_hidden_layers" || key == "n_layer") return &attributes.num_hidden_layers;
  if (key == "intermediate_size" || key == "n_inner") return &attributes.intermediate_size;
  if (key == "moe_intermediate_size") return &attributes.moe_intermediate_size;
  if (key == "num_experts_per_tok") return &attributes.num_experts_per_tok;
  if (key == "n_shared_experts") return &attributes.n_shared_experts;
  if (key == "q_lora_rank") return &attributes.q_lora_rank;
  if (key == "kv_lora_rank") return &attributes.kv_lora_rank;
  if (key == "qk_nope_head_dim") return &attributes.qk_nope_head_dim;
  if (key == "qk_rope_head_dim") return &attributes.qk_rope_head_dim;
  if (key == "v_head_dim") return &attributes.v_head_dim;
  if (key == "first_k_dense_replace") return &attributes.first_k_dense_replace;
  return nullptr;
}

void parse_attributes(const Node& attrs, Reader& reader, ModelAttributes& out) {
  if (attrs.is_null() || !reader.expect_map(attrs, "`attributes`")) return;
  for (const Node& attr : attrs.items()) {
    // GPT-2's config.json names (transformers' GPT2Config.attribute_map: hidden_size is
    // n_embd, num_attention_heads is n_head); the standard name wins when both are given.
    if (attr.key() == "num_attention_heads" ||
        (attr.key() == "n_head" && attrs.find("num_attention_heads") == nullptr)) {
      out.num_attention_heads = positive_attr(attr, reader, 1);
    } else if (attr.key() == "num_key_value_heads") {
      out.num_key_value_heads = positive_attr(attr, reader, 1);
    } else if (attr.key() == "num_experts") {
      out.num_experts = positive_attr(attr, reader, 0);
      out.num_experts_loc = reader.loc(attr);
    } else if (attr.key() == "vocab_size") {
      out.vocab_size = positive_attr(attr, reader, 1);
    } else if (attr.key() == "hidden_size" ||
               (attr.key() == "n_embd" && attrs.find("hidden_size") == nullptr)) {
      out.hidden_size = positive_attr(attr, reader, 1);
    } else if (attr.key() == "head_dim" && !attr.is_null()) {
      out.head_dim = positive_attr(attr, reader, 1);
    } else if (std::optional<std::int64_t>* size = architecture_size(attr.key(), out)) {
      if (!attr.is_null())
        *size = positive_attr(
            attr, reader,
            attr.key() == "n_shared_experts" || attr.key() == "first_k_dense_replace" ? 0 : 1);
    } else if (attr.key() == "tie_word_embeddings" && !attr.is_null()) {
      out.tie_word_embeddings = reader.get_bool(attr, "`tie_word_embeddings`");
    } else if (attr.key() == "weight_block_size") {
      parse_block_size(attr, reader, out.weight_block_size);
    }
  }
}

// `module_order: module | natural` (contract §3): natural is what shardc import
// writes when it had no exact module-order rules; validate repeats W-MODULE-ORDER
// until the order is confirmed (tools/dump_model.py writes `module`).
void parse_module_order(const Node& node, Reader& reader, Model& model) {
  std::optional<std::string> text = reader.get_string(node, "`module_order`");
  if (!text) return;
  if (*text != "module" && *text != "natural") {
    reader.error(node, "`module_order` must be `module` or `natural`, got " + describe(node),
                 "`module`: the params are in named_parameters() order (tools/dump_model.py); "
                 "`natural`: shardc import sorted them by name");
    return;
  }
  model.module_order = *text;
  model.module_order_loc = reader.loc(node);
  if (model.module_order != "natural") return;
  reader.sink().warning(
      DiagCode::WModuleOrder, model.module_order_loc,
      "the model says `module_order: natural`: shardc import had no exact module-order rules "
      "for it, so its params are sorted by name, which may differ from named_parameters() "
      "(FSDP2 and muon buffer offsets follow module order)",
      "confirm the order: dump the module with `tools/dump_model.py --config config.json -o "
      "m.yaml` (it writes `module_order: module`) and use that model file");
}

// `submodels: [{prefix: visual, config: vision_config, attributes: {...}}]`: the
// attributes a vision or audio tower's params are checked against (contract §3.2).
void parse_submodels(const Node& list, Reader& reader, Model& model) {
  if (list.is_null() || !reader.expect_seq(list, "`submodels`")) return;
  constexpr std::size_t kMaxSubmodels = 64;  // a model has a few towers; bounds the checks
  if (list.items().size() > kMaxSubmodels) {
    reader.error(list,
                 "`submodels` lists " + std::to_string(list.items().size()) +
                     " entries, more than " + std::to_string(kMaxSubmodels),
                 "one entry per vision or audio tower");
    return;
  }
  for (const Node& item : list.items()) {
    if (!reader.expect_map(item, "a `submodels` entry") ||
        !reader.check_keys(item, {"prefix", "config", "attributes"}, "a `submodels` entry"))
      continue;
    SubModel sub;
    sub.loc = reader.loc(item);
    const Node* prefix = item.find("prefix");
    if (prefix == nullptr) {
      reader.error(
          item, "a `submodels` entry needs a `prefix`",
          "e.g. `{prefix: visual, config: vision_config, attributes: {num_attention_heads: "
          "16}}`");
      continue;
    }
    std::optional<std::string> text = reader.get_string(*prefix, "`prefix`");
    if (!text) continue;
    if (text->empty() || text->front() == '.' || text->back() == '.') {
      reader.error(
          *prefix,
          "a sub-model `prefix` is a module FQN such as `visual`, got " + describe(*prefix),
          "no leading or trailing dot");
      continue;
    }
    sub.prefix = *text;
    if (const Node* config = item.find("config"))
      sub.config = reader.get_string(*config, "`config`").value_or("");
    if (const Node* attrs = item.find("attributes"))
      parse_attributes(*attrs, reader, sub.attributes);
    for (const SubModel& other : model.submodels) {
      if (other.prefix == sub.prefix) {
        reader.error(*prefix, "sub-model prefix `" + sub.prefix + "` is listed twice",
                     "one entry per sub-model");
      }
    }
    model.submodels.push_back(std::move(sub));
  }
}

// `tied: [[source, alias], ...]`
void parse_tied_list(const Node& tied, Reader& reader, std::vector<TiePair>& out) {
  if (!reader.expect_seq(tied, "`tied`")) return;
  for (const Node& pair : tied.items()) {
    if (auto names = parse_tied_pair(
            pair, "e.g. `tied: [[model.embed_tokens.weight, lm_head.weight]]`", reader))
      out.push_back(TiePair{std::move(names->first), std::move(names->second), reader.loc(pair)});
  }
}

// `tied_weights: {alias: source}` (Hugging Face convention).
void parse_tied_weights(const Node& tied, Reader& reader, std::vector<TiePair>& out) {
  if (tied.is_null() || !reader.expect_map(tied, "`tied_weights`")) return;
  for (const Node& entry : tied.items()) {
    std::optional<std::string> source = reader.get_string(entry, "a `tied_weights` source");
    if (source) out.push_back(TiePair{*source, std::string(entry.key()), reader.key_loc(entry)});
  }
}

void log_ignored_keys(const Node& root, const std::string& path) {
  static constexpr std::string_view kKnown[] = {
      "format", "name", "model",        "dtype",     "attributes",  "tie_word_embeddings",
      "params", "tied", "tied_weights", "submodels", "module_order"};
  for (const Node& entry : root.items()) {
    bool known = false;
    for (std::string_view known_key : kKnown) known = known || entry.key() == known_key;
    if (!known) spdlog::debug("{}: ignoring top-level key `{}`", path, entry.key());
  }
}

std::string model_name(const Node& root, Reader& reader) {
  for (std::string_view key : {"name", "model"}) {
    if (const Node* name_node = root.find(key))
      return reader.get_string(*name_node, "`" + std::string(name_node->key()) + "`").value_or("");
  }
  return {};
}

// W-MODULE-BUFFER: trainable entries named as module buffers (trial C 8: a plain inventory's
// rotary inv_freq planned with grads and FSDP-split 4 ways), one warning per kind.
void check_module_buffers(const std::vector<Param>& params, DiagnosticSink& sink) {
  struct Kind {
    std::string_view reason;
    const Param* first = nullptr;
    std::size_t count = 0;
  };
  std::vector<Kind> kinds;
  for (const Param& param : params) {
    if (!param.requires_grad) continue;
    const std::string_view why = module_buffer_reason(param.name, param.shape, param.dtype);
    if (why.empty()) continue;
    auto it = std::find_if(kinds.begin(), kinds.end(),
                           [&](const Kind& kind) { return kind.reason == why; });
    if (it == kinds.end()) it = kinds.insert(kinds.end(), Kind{why, &param, 0});
    ++it->count;
  }
  for (const Kind& kind : kinds) {
    Diagnostic diag;
    diag.severity = Severity::Warning;
    diag.code = DiagCode::WModuleBuffer;
    diag.loc = kind.first->loc;
    diag.param = kind.first->name;
    diag.message = "'" + kind.first->name + "'" +
                   (kind.count > 1 ? " (and " + std::to_string(kind.count - 1) + " more like it)"
                                   : std::string()) +
                   " is one of the " + std::string(kind.reason) +
                   ", not a parameter, but it is listed as a trainable param: it would get "
                   "grads, optimizer state and an FSDP shard the model does not have";
    diag.hint = std::string(diag_code_info(DiagCode::WModuleBuffer).fix);
    sink.report(std::move(diag));
  }
}

void parse_top(const Node& root, Reader& reader, Model& model, ParamsShortcut& shortcut) {
  check_format(root, kFormat, "model",
               "use `format: shardc.model/v1`, or omit `format` for a plain inventory", reader);
  model.name = model_name(root, reader);
  DType default_dtype = DType::Float32;
  if (const Node* dtype = root.find("dtype")) {
    default_dtype = parse_dtype_node(*dtype, reader).value_or(DType::Float32);
  }
  model.attributes.loc = SourceLoc{reader.file(), 0, 0};
  if (const Node* attrs = root.find("attributes")) {
    model.attributes.loc = reader.key_loc(*attrs);
    parse_attributes(*attrs, reader, model.attributes);
  }
  if (const Node* tie = root.find("tie_word_embeddings"); tie != nullptr && !tie->is_null()) {
    model.attributes.tie_word_embeddings = reader.get_bool(*tie, "`tie_word_embeddings`");
  }
  if (const Node* subs = root.find("submodels")) parse_submodels(*subs, reader, model);
  if (const Node* order = root.find("module_order")) parse_module_order(*order, reader, model);
  if (const Node* tied = root.find("tied")) parse_tied_list(*tied, reader, model.tied);
  if (const Node* tied = root.find("tied_weights")) parse_tied_weights(*tied, reader, model.tied);
  const Node* params = root.find("params");
  if (params == nullptr) {
    reader.error(reader.loc(root), "the model has no `params` list",
                 "add `params: [{name: FQN, shape: [...]}, ...]`");
    return;
  }
  if (shortcut.taken) {
    // Canonical entries (doc_json.cpp): what parse_params gives them.
    model.params = std::move(shortcut.params);
    if (!model.params.empty()) check_duplicate_names(model.params, reader);
  } else if (parse_params(*params, reader, default_dtype, model.params) && !model.params.empty()) {
    check_duplicate_names(model.params, reader);
  }
  check_module_buffers(model.params, reader.sink());
}

}  // namespace
}  // namespace fe

namespace {

std::future<std::string> start_sha256(const std::string& text, bool wanted);

// `shortcut`: a JSON inventory's canonical `params` list without the Node tree.
std::optional<Model> read_model(const SourceFile& file, DiagnosticSink& sink, bool with_digest,
                                bool shortcut) {
  std::future<std::string> sha256 = start_sha256(file.text, with_digest);
  fe::ParamsShortcut params{SourcePath(file.path), false, {}};
  std::optional<fe::Document> doc = fe::load_document(file, DiagCode::EModel, sink, fe::DocLimits{},
                                                      shortcut ? &params : nullptr);
  if (!doc) return std::nullopt;
  const fe::Node* root = &doc->root;
  fe::Reader reader(file.path, sink, DiagCode::EModel);
  if (!reader.expect_map(*root, "the model description")) return std::nullopt;
  fe::log_ignored_keys(*root, file.path);
  reader.check_duplicates(*root, "the model description");
  Model model;
  model.source_path = file.path;
  model.sha256 = sha256.get();
  fe::parse_top(*root, reader, model, params);
  if (reader.errors() > 0) return std::nullopt;
  return model;
}

// The digest of a large model is computed on a second thread while the text
// is parsed (≈ 3 ms for 5 MB); small files hash inline. Empty when not wanted.
std::future<std::string> start_sha256(const std::string& text, bool wanted) {
  constexpr std::size_t kThreadBytes = 1 << 20;
  if (!wanted) {
    std::promise<std::string> none;
    none.set_value({});
    return none.get_future();
  }
  if (text.size() >= kThreadBytes) {
    try {
      return std::async(std::launch::async, [&text] { return sha256_hex(text); });
    } catch (const std::system_error&) {
      // No thread available: hash inline.
    }
  }
  std::promise<std::string> done;
  done.set_value(sha256_hex(text));
  return done.get_future();
}

}  // namespace

std::optional<Model> parse_model(const SourceFile& file, DiagnosticSink& sink, bool with_digest) {
  return read_model(file, sink, with_digest, true);
}

std::optional<Model> fe::parse_model_tree(const SourceFile& file, DiagnosticSink& sink) {
  return read_model(file, sink, true, false);
}

std::optional<Model> parse_model(const SourceFile& file, DiagnosticSink& sink) {
  return parse_model(file, sink, true);
}

}  // namespace shardc
