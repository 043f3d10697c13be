// config.json -> architecture, name and attributes (transformers' config
// names; `text_config` of multimodal configs searched first).
#include <simdjson.h>

#include <array>

#include "frontend/doc.hpp"
#include "frontend/frontend.hpp"
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

// transformers' per-class default of `tie_word_embeddings` (transformers 5.24, as pinned in
// tools/python/requirements.txt): `tie_word_embeddings: bool = ...` of the config class that
// `model_type` selects (models/<dir>/configuration_<dir>.py), matched by `model_type`, else
// by the first architecture's prefix. A model type not listed: tied iff the checkpoint
// stores no lm_head.weight (decided in checkpoint.cpp).
struct TieDefault {
  std::string_view model_type;
  std::string_view arch_prefix;  // "LlamaFor" matches LlamaForCausalLM, not Llama4For...
  std::string_view config_class;
  bool tied;
};

constexpr TieDefault kTieDefaults[] = {
    {"llama", "LlamaFor", "LlamaConfig", false},            // llama/configuration_llama.py
    {"mistral", "MistralFor", "MistralConfig", false},      // mistral/configuration_mistral.py
    {"mixtral", "MixtralFor", "MixtralConfig", false},      // mixtral/configuration_mixtral.py
    {"qwen2", "Qwen2For", "Qwen2Config", false},            // qwen2/configuration_qwen2.py
    {"qwen2_moe", "Qwen2MoeFor", "Qwen2MoeConfig", false},  // qwen2_moe/configuration_qwen2_moe.py
    {"qwen3", "Qwen3For", "Qwen3Config", false},            // qwen3/configuration_qwen3.py
    {"qwen3_moe", "Qwen3MoeFor", "Qwen3MoeConfig", false},  // qwen3_moe/configuration_qwen3_moe.py
    {"qwen3_vl", "Qwen3VLFor", "Qwen3VLConfig", false},     // qwen3_vl/configuration_qwen3_vl.py
    {"deepseek_v3", "DeepseekV3For", "DeepseekV3Config", false},  // deepseek_v3/configuration_...
    {"phi3", "Phi3For", "Phi3Config", false},                     // phi3/configuration_phi3.py
    {"gpt_oss", "GptOssFor", "GptOssConfig", false},         // gpt_oss/configuration_gpt_oss.py
    {"gemma", "GemmaFor", "GemmaConfig", true},              // gemma/configuration_gemma.py
    {"gemma2", "Gemma2For", "Gemma2Config", true},           // gemma2/configuration_gemma2.py
    {"gemma3_text", "Gemma3For", "Gemma3TextConfig", true},  // gemma3/configuration_gemma3.py
    {"gpt2", "GPT2", "GPT2Config", true},                    // gpt2/configuration_gpt2.py
};

const TieDefault* tie_default(const std::string& model_type,
                              const std::vector<std::string>& architectures) {
  for (const TieDefault& entry : kTieDefaults)
    if (model_type == entry.model_type) return &entry;
  if (!model_type.empty() || architectures.empty()) return nullptr;
  for (const TieDefault& entry : kTieDefaults)
    if (architectures.front().starts_with(entry.arch_prefix)) return &entry;
  return nullptr;
}

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
    simdjson::dom::element value;
    if (has_text_ && text_[key].get(value) == simdjson::SUCCESS && !value.is_null()) return value;
    if (root_[key].get(value) == simdjson::SUCCESS && !value.is_null()) return value;
    return std::nullopt;
  }

  // An integer count in [min, 2^31); E-CHECKPOINT when present but not one.
  std::optional<std::int64_t> count(std::string_view key, std::int64_t min) {
    const std::optional<simdjson::dom::element> value = find(key);
    if (!value) return std::nullopt;
    std::int64_t parsed = 0;
    if (value->get_int64().get(parsed) != simdjson::SUCCESS || parsed < min || parsed > kMaxCount) {
      error("`" + std::string(key) + "` is " + imp::printable(simdjson::to_string(*value)) +
                ", not an integer in [" + std::to_string(min) + ", 2^31)",
            "fix config.json: counts are positive integers");
      return std::nullopt;
    }
    return parsed;
  }

  std::optional<bool> flag(std::string_view key) {
    simdjson::dom::element value;
    if (root_[key].get(value) != simdjson::SUCCESS || value.is_null()) return std::nullopt;
    bool parsed = false;
    if (value.get_bool().get(parsed) != simdjson::SUCCESS) {
      error("`" + std::string(key) + "` is not true or false", "fix config.json");
      return std::nullopt;
    }
    return parsed;
  }

  std::vector<std::string> strings(std::string_view key) {
    std::vector<std::string> out;
    simdjson::dom::array arr;
    if (root_[key].get_array().get(arr) != simdjson::SUCCESS) return out;
    for (simdjson::dom::element item : arr) {
      std::string_view text;
      if (item.get_string().get(text) == simdjson::SUCCESS) out.emplace_back(text);
    }
    return out;
  }

  // `text_config.tie_word_embeddings`, if the config has a text_config stating it.
  std::optional<bool> text_flag(std::string_view key) {
    simdjson::dom::element value;
    bool parsed = false;
    if (!has_text_ || text_[key].get(value) != simdjson::SUCCESS ||
        value.get_bool().get(parsed) != simdjson::SUCCESS)
      return std::nullopt;
    return parsed;
  }

  std::string quant_method() {
    std::string_view method;
    if (root_["quantization_config"]["quant_method"].get_string().get(method) != simdjson::SUCCESS)
      return {};
    return std::string(method);
  }

  // The sub-configs (vision_config, audio_config, ...): their head counts and sizes.
  std::vector<SubModel> subconfigs() {
    std::vector<SubModel> out;
    for (std::string_view key : {"vision_config", "audio_config", "speech_config"}) {
      simdjson::dom::object sub;
      if (root_[key].get_object().get(sub) != simdjson::SUCCESS) continue;
      SubModel sub_model;
      sub_model.config = std::string(key);
      const auto count =
          [&](std::initializer_list<std::string_view> names) -> std::optional<std::int64_t> {
        for (std::string_view name : names) {
          std::int64_t value = 0;
          if (sub[name].get_int64().get(value) == simdjson::SUCCESS && value >= 1 &&
              value <= kMaxCount)
            return value;
        }
        return std::nullopt;
      };
      // transformers' vision / audio configs: Qwen2.5-VL `num_heads` / `hidden_size`,
      // Qwen2-VL `embed_dim`, Llama-4 / SigLIP / CLIP `num_attention_heads`, Whisper-style
      // audio towers `encoder_attention_heads` / `d_model`.
      sub_model.attributes.num_attention_heads =
          count({"num_attention_heads", "num_heads", "encoder_attention_heads"});
      sub_model.attributes.num_key_value_heads = count({"num_key_value_heads"});
      sub_model.attributes.head_dim = count({"head_dim"});
      sub_model.attributes.hidden_size = count({"hidden_size", "embed_dim", "d_model"});
      sub_model.attributes.vocab_size = count({"vocab_size"});
      if (sub_model.attributes.num_attention_heads || sub_model.attributes.hidden_size)
        out.push_back(std::move(sub_model));
    }
    return out;
  }

  std::string string(std::string_view key) {
    std::string_view text;
    if (root_[key].get_string().get(text) != simdjson::SUCCESS) return {};
    return std::string(text);
  }

  std::vector<std::int64_t> block_size() {
    simdjson::dom::array arr;
    if (root_["quantization_config"]["weight_block_size"].get_array().get(arr) !=
        simdjson::SUCCESS) {
      return {};
    }
    std::vector<std::int64_t> out;
    bool ok = true;
    for (simdjson::dom::element item : arr) {
      std::int64_t extent = 0;
      if (item.get_int64().get(extent) != simdjson::SUCCESS || extent < 1 || extent > kMaxCount) {
        ok = false;
        break;
      }
      out.push_back(extent);
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

void read_attributes(ConfigReader& reader, CheckpointConfig& config) {
  ModelAttributes& attributes = config.attributes;
  for (const AttrSpec& spec : kAttrs) {
    const std::int64_t min = spec.key == "num_experts" || spec.key == "n_shared_experts" ||
                                     spec.key == "first_k_dense_replace"
                                 ? 0
                                 : 1;
    std::optional<std::int64_t> value = reader.count(spec.key, min);
    for (std::string_view alias : spec.aliases) {
      if (!value && !alias.empty()) value = reader.count(alias, min);
    }
    if (!value) continue;
    config.raw_attributes.push_back(
        {std::string(spec.key), std::to_string(*value), std::to_string(*value)});
    if (spec.key == "num_attention_heads") attributes.num_attention_heads = value;
    if (spec.key == "num_key_value_heads") attributes.num_key_value_heads = value;
    if (spec.key == "head_dim") attributes.head_dim = value;
    if (spec.key == "hidden_size") attributes.hidden_size = value;
    if (spec.key == "vocab_size") attributes.vocab_size = value;
    if (spec.key == "num_experts") attributes.num_experts = value;
    if (spec.key == "num_hidden_layers") config.num_hidden_layers = value;
  }
  attributes.weight_block_size = reader.block_size();
  if (!attributes.weight_block_size.empty()) {
    const std::string text = "[" + std::to_string(attributes.weight_block_size[0]) + ", " +
                             std::to_string(attributes.weight_block_size[1]) + "]";
    config.raw_attributes.push_back({"weight_block_size", text, text});
  }
  // Absent, transformers takes the config class's default (kTieDefaults; PretrainedConfig's
  // is true, most decoder classes say false). A composite config's own value ties the output
  // head (modeling_utils.py get_expanded_tied_weights_keys reads the top-level config), not
  // text_config's.
  const std::optional<bool> stated = reader.flag("tie_word_embeddings");
  config.tie_stated = stated.has_value();
  config.text_tie_word_embeddings = reader.text_flag("tie_word_embeddings");
  const TieDefault* by_class = tie_default(config.model_type, config.architectures);
  if (!stated && by_class != nullptr)
    config.tie_default_class = std::string(by_class->config_class);
  attributes.tie_word_embeddings = stated.value_or(by_class != nullptr ? by_class->tied : true);
  const std::string tie = *attributes.tie_word_embeddings ? "true" : "false";
  config.raw_attributes.push_back({"tie_word_embeddings", tie, tie});
}

}  // namespace

std::optional<CheckpointConfig> parse_hf_config(std::string_view text, const std::string& path,
                                                DiagnosticSink& sink) {
  simdjson::dom::parser parser;
  const simdjson::padded_string padded(text);
  simdjson::dom::element root;
  if (const auto err = parser.parse(padded).get(root); err != simdjson::SUCCESS) {
    // simdjson gives an error code, not a position: the frontend's tracking parser reports
    // the syntax error at its line:col (trial A 2.3), as for model and recipe files.
    const std::size_t errors = sink.error_count();
    (void)fe::load_json_tracking(SourceFile{path, std::string(text)}, DiagCode::ECheckpoint, sink,
                                 {});
    if (sink.error_count() > errors) return std::nullopt;
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
  ConfigReader reader(obj, path, sink);
  CheckpointConfig config;
  config.architectures = reader.strings("architectures");
  config.model_type = reader.string("model_type");
  if (const std::optional<std::int64_t> mtp = reader.count("num_nextn_predict_layers", 0))
    config.num_nextn_predict_layers = *mtp;
  config.name = last_segment(reader.string("_name_or_path"));
  read_attributes(reader, config);
  config.quant_method = reader.quant_method();
  config.subconfigs = reader.subconfigs();
  if (reader.errors() > 0) return std::nullopt;
  // Grouped-query attention shares each KV head among num_attention_heads / num_key_value_heads
  // query heads (transformers' attention modules): more KV heads than heads, or a count that
  // does not divide, is no model and would make the E-HEADS check meaningless.
  const ModelAttributes& attributes = config.attributes;
  if (attributes.num_attention_heads && attributes.num_key_value_heads &&
      (*attributes.num_key_value_heads > *attributes.num_attention_heads ||
       *attributes.num_attention_heads % *attributes.num_key_value_heads != 0)) {
    sink.error(DiagCode::ECheckpoint, SourceLoc{path, 0, 0},
               "config.json: num_key_value_heads " +
                   std::to_string(*attributes.num_key_value_heads) +
                   (*attributes.num_key_value_heads > *attributes.num_attention_heads
                        ? " is more than"
                        : " does not divide") +
                   " num_attention_heads " + std::to_string(*attributes.num_attention_heads),
               "each KV head serves num_attention_heads / num_key_value_heads query heads: fix "
               "config.json");
    return std::nullopt;
  }
  return config;
}

}  // namespace shardc
