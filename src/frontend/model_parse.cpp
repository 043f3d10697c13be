// parse_model: the model description's top level (contract §3) for both the
// shardc.model/v1 format and plain inventories (shared/models/*.params.json).
#include <spdlog/spdlog.h>

#include <future>
#include <string>
#include <system_error>

#include "frontend/frontend.hpp"
#include "frontend/model_internal.hpp"

namespace shardc {
namespace fe {
namespace {

constexpr std::string_view kFormat = "shardc.model/v1";

void parse_format(const Node& root, Reader& r) {
  const Node* format = root.find("format");
  if (format == nullptr) return;
  std::optional<std::string> text = r.get_string(*format, "`format`");
  if (text && *text != kFormat) {
    r.error(*format, "unsupported model format " + describe(*format),
            "use `format: shardc.model/v1`, or omit `format` for a plain inventory");
  }
}

std::optional<std::int64_t> positive_attr(const Node& n, Reader& r, std::int64_t min) {
  if (n.is_null()) return std::nullopt;
  std::optional<std::int64_t> v = r.get_int(n, "`" + std::string(n.key()) + "`");
  if (v && *v < min) {
    r.error(n,
            "`" + std::string(n.key()) + "` must be at least " + std::to_string(min) + ", got " +
                std::to_string(*v),
            "copy the value from the model's config.json, or remove the attribute");
    return std::nullopt;
  }
  return v;
}

// `weight_block_size: [rows, cols]`, each >= 1.
void parse_block_size(const Node& n, Reader& r, std::vector<std::int64_t>& out) {
  if (n.is_null() || !r.expect_seq(n, "`weight_block_size`")) return;
  if (n.items().size() != 2) {
    r.error(n, "`weight_block_size` must be [rows, cols], got " + describe(n),
            "copy quantization_config.weight_block_size from config.json, e.g. [128, 128]");
    return;
  }
  std::vector<std::int64_t> sizes;
  for (const Node& v : n.items()) {
    std::optional<std::int64_t> size = r.get_int(v, "a `weight_block_size` entry");
    if (!size) return;
    if (*size < 1) {
      r.error(v, "a `weight_block_size` entry must be at least 1, got " + std::to_string(*size),
              "copy quantization_config.weight_block_size from config.json, e.g. [128, 128]");
      return;
    }
    sizes.push_back(*size);
  }
  out = sizes;
}

// The activation model's sizes (ModelAttributes), by config.json name (GPT-2's
// n_layer / n_inner as transformers' GPT2Config.attribute_map).
std::optional<std::int64_t>* architecture_size(std::string_view key, ModelAttributes& a) {
  if (key == "num_hidden_layers" || key == "n_layer") return &a.num_hidden_layers;
  if (key == "intermediate_size" || key == "n_inner") return &a.intermediate_size;
  if (key == "moe_intermediate_size") return &a.moe_intermediate_size;
  if (key == "num_experts_per_tok") return &a.num_experts_per_tok;
  if (key == "n_shared_experts") return &a.n_shared_experts;
  if (key == "q_lora_rank") return &a.q_lora_rank;
  if (key == "kv_lora_rank") return &a.kv_lora_rank;
  if (key == "qk_nope_head_dim") return &a.qk_nope_head_dim;
  if (key == "qk_rope_head_dim") return &a.qk_rope_head_dim;
  if (key == "v_head_dim") return &a.v_head_dim;
  if (key == "first_k_dense_replace") return &a.first_k_dense_replace;
  return nullptr;
}

void parse_attributes(const Node& attrs, Reader& r, ModelAttributes& out) {
  if (attrs.is_null() || !r.expect_map(attrs, "`attributes`")) return;
  for (const Node& a : attrs.items()) {
    if (a.key() == "num_attention_heads") {
      out.num_attention_heads = positive_attr(a, r, 1);
    } else if (a.key() == "num_key_value_heads") {
      out.num_key_value_heads = positive_attr(a, r, 1);
    } else if (a.key() == "num_experts") {
      out.num_experts = positive_attr(a, r, 0);
      out.num_experts_loc = r.loc(a);
    } else if (a.key() == "vocab_size") {
      out.vocab_size = positive_attr(a, r, 1);
    } else if (a.key() == "hidden_size") {
      out.hidden_size = positive_attr(a, r, 1);
    } else if (a.key() == "head_dim" && !a.is_null()) {
      out.head_dim = positive_attr(a, r, 1);
    } else if (std::optional<std::int64_t>* size = architecture_size(a.key(), out)) {
      if (!a.is_null())
        *size = positive_attr(
            a, r, a.key() == "n_shared_experts" || a.key() == "first_k_dense_replace" ? 0 : 1);
    } else if (a.key() == "tie_word_embeddings" && !a.is_null()) {
      out.tie_word_embeddings = r.get_bool(a, "`tie_word_embeddings`");
    } else if (a.key() == "weight_block_size") {
      parse_block_size(a, r, out.weight_block_size);
    }
  }
}

// `module_order: module | natural` (contract §3): natural is what shardc import
// writes when it had no exact module-order rules; validate repeats W-MODULE-ORDER
// until the order is confirmed (tools/dump_model.py writes `module`).
void parse_module_order(const Node& n, Reader& r, Model& m) {
  std::optional<std::string> text = r.get_string(n, "`module_order`");
  if (!text) return;
  if (*text != "module" && *text != "natural") {
    r.error(n, "`module_order` must be `module` or `natural`, got " + describe(n),
            "`module`: the params are in named_parameters() order (tools/dump_model.py); "
            "`natural`: shardc import sorted them by name");
    return;
  }
  m.module_order = *text;
  m.module_order_loc = r.loc(n);
  if (m.module_order != "natural") return;
  r.sink().warning(
      DiagCode::WModuleOrder, m.module_order_loc,
      "the model says `module_order: natural`: shardc import had no exact module-order rules "
      "for it, so its params are sorted by name, which may differ from named_parameters() "
      "(FSDP2 and muon buffer offsets follow module order)",
      "confirm the order: dump the module with `tools/dump_model.py --config config.json -o "
      "m.yaml` (it writes `module_order: module`) and use that model file");
}

// `submodels: [{prefix: visual, config: vision_config, attributes: {...}}]`: the
// attributes a vision or audio tower's params are checked against (contract §3.2).
void parse_submodels(const Node& list, Reader& r, Model& m) {
  if (list.is_null() || !r.expect_seq(list, "`submodels`")) return;
  constexpr std::size_t kMaxSubmodels = 64;  // a model has a few towers; bounds the checks
  if (list.items().size() > kMaxSubmodels) {
    r.error(list,
            "`submodels` lists " + std::to_string(list.items().size()) + " entries, more than " +
                std::to_string(kMaxSubmodels),
            "one entry per vision or audio tower");
    return;
  }
  for (const Node& item : list.items()) {
    if (!r.expect_map(item, "a `submodels` entry") ||
        !r.check_keys(item, {"prefix", "config", "attributes"}, "a `submodels` entry"))
      continue;
    SubModel sub;
    sub.loc = r.loc(item);
    const Node* prefix = item.find("prefix");
    if (prefix == nullptr) {
      r.error(item, "a `submodels` entry needs a `prefix`",
              "e.g. `{prefix: visual, config: vision_config, attributes: {num_attention_heads: "
              "16}}`");
      continue;
    }
    std::optional<std::string> text = r.get_string(*prefix, "`prefix`");
    if (!text) continue;
    if (text->empty() || text->front() == '.' || text->back() == '.') {
      r.error(*prefix,
              "a sub-model `prefix` is a module FQN such as `visual`, got " + describe(*prefix),
              "no leading or trailing dot");
      continue;
    }
    sub.prefix = *text;
    if (const Node* config = item.find("config"))
      sub.config = r.get_string(*config, "`config`").value_or("");
    if (const Node* attrs = item.find("attributes")) parse_attributes(*attrs, r, sub.attributes);
    for (const SubModel& other : m.submodels) {
      if (other.prefix == sub.prefix) {
        r.error(*prefix, "sub-model prefix `" + sub.prefix + "` is listed twice",
                "one entry per sub-model");
      }
    }
    m.submodels.push_back(std::move(sub));
  }
}

// `tied: [[source, alias], ...]`
void parse_tied_list(const Node& tied, Reader& r, std::vector<TiePair>& out) {
  if (!r.expect_seq(tied, "`tied`")) return;
  for (const Node& pair : tied.items()) {
    if (!pair.is_seq() || pair.items().size() != 2) {
      r.error(pair, "a `tied` entry must be [source, alias], got " + describe(pair),
              "e.g. `tied: [[model.embed_tokens.weight, lm_head.weight]]`");
      continue;
    }
    std::optional<std::string> source = r.get_string(pair.items()[0], "a tied name");
    std::optional<std::string> alias = r.get_string(pair.items()[1], "a tied name");
    if (source && alias) out.push_back(TiePair{*source, *alias, r.loc(pair)});
  }
}

// `tied_weights: {alias: source}` (Hugging Face convention).
void parse_tied_weights(const Node& tied, Reader& r, std::vector<TiePair>& out) {
  if (tied.is_null() || !r.expect_map(tied, "`tied_weights`")) return;
  for (const Node& entry : tied.items()) {
    std::optional<std::string> source = r.get_string(entry, "a `tied_weights` source");
    if (source) out.push_back(TiePair{*source, std::string(entry.key()), r.key_loc(entry)});
  }
}

void log_ignored_keys(const Node& root, const std::string& path) {
  static constexpr std::string_view kKnown[] = {
      "format", "name", "model",        "dtype",     "attributes",  "tie_word_embeddings",
      "params", "tied", "tied_weights", "submodels", "module_order"};
  for (const Node& entry : root.items()) {
    bool known = false;
    for (std::string_view k : kKnown) known = known || entry.key() == k;
    if (!known) spdlog::debug("{}: ignoring top-level key `{}`", path, entry.key());
  }
}

std::string model_name(const Node& root, Reader& r) {
  for (std::string_view key : {"name", "model"}) {
    if (const Node* n = root.find(key))
      return r.get_string(*n, "`" + std::string(n->key()) + "`").value_or("");
  }
  return {};
}

void parse_top(const Node& root, Reader& r, Model& m, ParamsShortcut& shortcut) {
  parse_format(root, r);
  m.name = model_name(root, r);
  DType default_dtype = DType::Float32;
  if (const Node* dtype = root.find("dtype")) {
    default_dtype = parse_dtype_node(*dtype, r).value_or(DType::Float32);
  }
  if (const Node* attrs = root.find("attributes")) parse_attributes(*attrs, r, m.attributes);
  if (const Node* tie = root.find("tie_word_embeddings"); tie != nullptr && !tie->is_null()) {
    m.attributes.tie_word_embeddings = r.get_bool(*tie, "`tie_word_embeddings`");
  }
  if (const Node* subs = root.find("submodels")) parse_submodels(*subs, r, m);
  if (const Node* order = root.find("module_order")) parse_module_order(*order, r, m);
  if (const Node* tied = root.find("tied")) parse_tied_list(*tied, r, m.tied);
  if (const Node* tied = root.find("tied_weights")) parse_tied_weights(*tied, r, m.tied);
  const Node* params = root.find("params");
  if (params == nullptr) {
    r.error(r.loc(root), "the model has no `params` list",
            "add `params: [{name: FQN, shape: [...]}, ...]`");
    return;
  }
  if (shortcut.taken) {
    // Canonical entries (doc_json.cpp): what parse_params gives them.
    m.params = std::move(shortcut.params);
    if (!m.params.empty()) check_duplicate_names(m.params, r);
    return;
  }
  if (parse_params(*params, r, default_dtype, m.params) && !m.params.empty()) {
    check_duplicate_names(m.params, r);
  }
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
  fe::Reader r(file.path, sink, DiagCode::EModel);
  if (!r.expect_map(*root, "the model description")) return std::nullopt;
  fe::log_ignored_keys(*root, file.path);
  r.check_duplicates(*root, "the model description");
  Model m;
  m.source_path = file.path;
  m.sha256 = sha256.get();
  fe::parse_top(*root, r, m, params);
  if (r.errors() > 0) return std::nullopt;
  return m;
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
