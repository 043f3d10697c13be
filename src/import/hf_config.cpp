// config.json -> architecture, name and attributes (transformers' config
// names; `text_config` of multimodal configs searched first).
#include <simdjson.h>

#include <array>

#include "import/import_internal.hpp"
#include "support/limits.hpp"

namespace shardc {
namespace {

constexpr std::int64_t kMaxCount = limits::kMaxConfigCount;

// Attributes copied into the compact model, in output order. `aliases` are
// older config names for the same value (transformers' attribute_map).
struct AttrSpec {
  std::string_view key;
  std::array<std::string_view, 2> aliases;
};

constexpr AttrSpec kAttrs[] = {
    {"num_attention_heads", {"n_head", ""}},
    {"num_key_value_heads", {"", ""}},
    {"head_dim", {"", ""}},
    {"hidden_size", {"n_embd", ""}},
    {"intermediate_size", {"", ""}},
    {"moe_intermediate_size", {"", ""}},
    {"num_hidden_layers", {"n_layer", ""}},
    {"vocab_size", {"", ""}},
    {"num_experts", {"n_routed_experts", "num_local_experts"}},
    {"num_experts_per_tok", {"", ""}},
    {"n_shared_experts", {"", ""}},
    {"q_lora_rank", {"", ""}},
    {"kv_lora_rank", {"", ""}},
    {"qk_nope_head_dim", {"", ""}},
    {"qk_rope_head_dim", {"", ""}},
    {"v_head_dim", {"", ""}},
    {"first_k_dense_replace", {"", ""}},
};

class ConfigReader {
 public:
  ConfigReader(simdjson::dom::object root, const std::string& path, DiagnosticSink& sink)
      : root_(root), path_(path), sink_(sink) {
    simdjson::dom::object text;
    if (root_["text_config"].get_object().get(text) == simdjson::SUCCESS) {
      text_ = text;
      has_text_ = true;
    }
  }

  // The value of `key`: text_config first, then the top level.
  std::optional<simdjson::dom::element> find(std::string_view key) {
    simdjson::dom::element v;
    if (has_text_ && text_[key].get(v) == simdjson::SUCCESS && !v.is_null()) return v;
    if (root_[key].get(v) == simdjson::SUCCESS && !v.is_null()) return v;
    return std::nullopt;
  }

  // An integer count in [min, 2^31); E-CHECKPOINT when present but not one.
  std::optional<std::int64_t> count(std::string_view key, std::int64_t min) {
    const std::optional<simdjson::dom::element> v = find(key);
    if (!v) return std::nullopt;
    std::int64_t n = 0;
    if (v->get_int64().get(n) != simdjson::SUCCESS || n < min || n > kMaxCount) {
      error("`" + std::string(key) + "` is " + imp::printable(simdjson::to_string(*v)) +
                ", not an integer in [" + std::to_string(min) + ", 2^31)",
            "fix config.json: counts are positive integers");
      return std::nullopt;
    }
    return n;
  }

  std::optional<bool> flag(std::string_view key) {
    simdjson::dom::element v;
    if (root_[key].get(v) != simdjson::SUCCESS || v.is_null()) return std::nullopt;
    bool b = false;
    if (v.get_bool().get(b) != simdjson::SUCCESS) {
      error("`" + std::string(key) + "` is not true or false", "fix config.json");
      return std::nullopt;
    }
    return b;
  }

  std::vector<std::string> strings(std::string_view key) {
    std::vector<std::string> out;
    simdjson::dom::array arr;
    if (root_[key].get_array().get(arr) != simdjson::SUCCESS) return out;
    for (simdjson::dom::element e : arr) {
      std::string_view s;
      if (e.get_string().get(s) == simdjson::SUCCESS) out.emplace_back(s);
    }
    return out;
  }

  // `text_config.tie_word_embeddings`, if the config has a text_config stating it.
  std::optional<bool> text_flag(std::string_view key) {
    simdjson::dom::element v;
    bool b = false;
    if (!has_text_ || text_[key].get(v) != simdjson::SUCCESS ||
        v.get_bool().get(b) != simdjson::SUCCESS)
      return std::nullopt;
    return b;
  }

  std::string quant_method() {
    std::string_view s;
    if (root_["quantization_config"]["quant_method"].get_string().get(s) != simdjson::SUCCESS)
      return {};
    return std::string(s);
  }

  // The sub-configs (vision_config, audio_config, ...): their head counts and sizes.
  std::vector<SubModel> subconfigs() {
    std::vector<SubModel> out;
    for (std::string_view key : {"vision_config", "audio_config", "speech_config"}) {
      simdjson::dom::object sub;
      if (root_[key].get_object().get(sub) != simdjson::SUCCESS) continue;
      SubModel m;
      m.config = std::string(key);
      const auto count =
          [&](std::initializer_list<std::string_view> names) -> std::optional<std::int64_t> {
        for (std::string_view n : names) {
          std::int64_t v = 0;
          if (sub[n].get_int64().get(v) == simdjson::SUCCESS && v >= 1 && v <= kMaxCount) return v;
        }
        return std::nullopt;
      };
      // transformers' vision / audio configs: Qwen2.5-VL `num_heads` / `hidden_size`,
      // Qwen2-VL `embed_dim`, Llama-4 / SigLIP / CLIP `num_attention_heads`, Whisper-style
      // audio towers `encoder_attention_heads` / `d_model`.
      m.attributes.num_attention_heads =
          count({"num_attention_heads", "num_heads", "encoder_attention_heads"});
      m.attributes.num_key_value_heads = count({"num_key_value_heads"});
      m.attributes.head_dim = count({"head_dim"});
      m.attributes.hidden_size = count({"hidden_size", "embed_dim", "d_model"});
      m.attributes.vocab_size = count({"vocab_size"});
      if (m.attributes.num_attention_heads || m.attributes.hidden_size) out.push_back(std::move(m));
    }
    return out;
  }

  std::string string(std::string_view key) {
    std::string_view s;
    if (root_[key].get_string().get(s) != simdjson::SUCCESS) return {};
    return std::string(s);
  }

  std::vector<std::int64_t> block_size() {
    simdjson::dom::array arr;
    if (root_["quantization_config"]["weight_block_size"].get_array().get(arr) !=
        simdjson::SUCCESS) {
      return {};
    }
    std::vector<std::int64_t> out;
    bool ok = true;
    for (simdjson::dom::element e : arr) {
      std::int64_t n = 0;
      if (e.get_int64().get(n) != simdjson::SUCCESS || n < 1 || n > kMaxCount) {
        ok = false;
        break;
      }
      out.push_back(n);
    }
    if (!ok || out.size() != 2) {
      error("`quantization_config.weight_block_size` is not [rows, cols] of positive integers",
            "DeepSeek-V3 uses [128, 128]");
      return {};
    }
    return out;
  }

  void error(std::string message, std::string hint) {
    sink_.error(DiagCode::ECheckpoint, SourceLoc{path_, 0, 0}, "config.json: " + std::move(message),
                std::move(hint));
    ++errors_;
  }

  [[nodiscard]] int errors() const { return errors_; }

 private:
  simdjson::dom::object root_;
  simdjson::dom::object text_;
  bool has_text_ = false;
  const std::string& path_;
  DiagnosticSink& sink_;
  int errors_ = 0;
};

std::string last_segment(std::string path) {
  while (!path.empty() && path.back() == '/') path.pop_back();
  const auto slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

void read_attributes(ConfigReader& r, CheckpointConfig& c) {
  ModelAttributes& a = c.attributes;
  for (const AttrSpec& spec : kAttrs) {
    const std::int64_t min = spec.key == "num_experts" || spec.key == "n_shared_experts" ||
                                     spec.key == "first_k_dense_replace"
                                 ? 0
                                 : 1;
    std::optional<std::int64_t> v = r.count(spec.key, min);
    for (std::string_view alias : spec.aliases) {
      if (!v && !alias.empty()) v = r.count(alias, min);
    }
    if (!v) continue;
    c.raw_attributes.push_back({std::string(spec.key), std::to_string(*v), std::to_string(*v)});
    if (spec.key == "num_attention_heads") a.num_attention_heads = v;
    if (spec.key == "num_key_value_heads") a.num_key_value_heads = v;
    if (spec.key == "head_dim") a.head_dim = v;
    if (spec.key == "hidden_size") a.hidden_size = v;
    if (spec.key == "vocab_size") a.vocab_size = v;
    if (spec.key == "num_experts") a.num_experts = v;
  }
  a.weight_block_size = r.block_size();
  if (!a.weight_block_size.empty()) {
    const std::string text = "[" + std::to_string(a.weight_block_size[0]) + ", " +
                             std::to_string(a.weight_block_size[1]) + "]";
    c.raw_attributes.push_back({"weight_block_size", text, text});
  }
  // transformers' PretrainedConfig defaults tie_word_embeddings to true. A composite
  // config's own value ties the output head (modeling_utils.py
  // get_expanded_tied_weights_keys reads the top-level config), not text_config's.
  const std::optional<bool> stated = r.flag("tie_word_embeddings");
  c.tie_stated = stated.has_value();
  c.text_tie_word_embeddings = r.text_flag("tie_word_embeddings");
  a.tie_word_embeddings = stated.value_or(true);
  const std::string tie = *a.tie_word_embeddings ? "true" : "false";
  c.raw_attributes.push_back({"tie_word_embeddings", tie, tie});
}

}  // namespace

std::optional<CheckpointConfig> parse_hf_config(std::string_view text, const std::string& path,
                                                DiagnosticSink& sink) {
  simdjson::dom::parser parser;
  const simdjson::padded_string padded(text);
  simdjson::dom::element root;
  if (const auto err = parser.parse(padded).get(root); err != simdjson::SUCCESS) {
    sink.error(DiagCode::ECheckpoint, SourceLoc{path, 0, 0},
               std::string("config.json is not valid JSON: ") + simdjson::error_message(err),
               "config.json is the model's Hugging Face configuration");
    return std::nullopt;
  }
  simdjson::dom::object obj;
  if (root.get_object().get(obj) != simdjson::SUCCESS) {
    sink.error(DiagCode::ECheckpoint, SourceLoc{path, 0, 0}, "config.json is not a JSON object",
               "config.json is the model's Hugging Face configuration");
    return std::nullopt;
  }
  ConfigReader r(obj, path, sink);
  CheckpointConfig c;
  c.architectures = r.strings("architectures");
  c.model_type = r.string("model_type");
  c.name = last_segment(r.string("_name_or_path"));
  read_attributes(r, c);
  c.quant_method = r.quant_method();
  c.subconfigs = r.subconfigs();
  if (r.errors() > 0) return std::nullopt;
  // Grouped-query attention shares each KV head among num_attention_heads / num_key_value_heads
  // query heads (transformers' attention modules): more KV heads than heads, or a count that
  // does not divide, is no model and would make the E-HEADS check meaningless.
  const ModelAttributes& a = c.attributes;
  if (a.num_attention_heads && a.num_key_value_heads &&
      (*a.num_key_value_heads > *a.num_attention_heads ||
       *a.num_attention_heads % *a.num_key_value_heads != 0)) {
    sink.error(DiagCode::ECheckpoint, SourceLoc{path, 0, 0},
               "config.json: num_key_value_heads " + std::to_string(*a.num_key_value_heads) +
                   (*a.num_key_value_heads > *a.num_attention_heads ? " is more than"
                                                                    : " does not divide") +
                   " num_attention_heads " + std::to_string(*a.num_attention_heads),
               "each KV head serves num_attention_heads / num_key_value_heads query heads: fix "
               "config.json");
    return std::nullopt;
  }
  return c;
}

}  // namespace shardc
