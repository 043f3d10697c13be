// Helpers shared by the files of src/import (internal).
#pragma once

#include <simdjson.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "import/import.hpp"

namespace shardc::imp {

/// `text` with control and non-ASCII bytes escaped (\xNN), at most 200 bytes, for messages.
std::string printable(std::string_view text);

/// `text` for one line of a YAML comment: control characters and the Unicode line breaks
/// (U+0085, U+2028, U+2029) escaped as \xNN / \uNNNN, anything else kept. Strings from
/// config.json and paths go into `shardc import`'s header comments through this, so a newline
/// in them cannot start a live YAML line (hostile/import_yaml_injection).
std::string comment_text(std::string_view text);

/// "[4096, 4096]" (support/shape.hpp).
using shardc::shape_text;

/// "numel x size = N bytes", exact even when the product overflows int64.
std::string bytes_text(std::int64_t numel, std::int64_t element_size);

/// A YAML scalar as tools/compact_model.py wrote it: plain when it is a
/// simple identifier-like word, else a JSON string (ASCII-escaped like
/// Python's json.dumps).
std::string yaml_string(std::string_view text);

/// JSON string literal, ASCII-escaped (Python json.dumps compatible).
std::string json_string(std::string_view text);

/// parse_safetensors_header with a reusable simdjson parser.
std::optional<SafetensorsHeader> parse_header_with(simdjson::dom::parser& parser,
                                                   std::string_view json, std::int64_t file_size,
                                                   const std::string& path, DiagnosticSink& sink);

/// read_safetensors_header with a reusable simdjson parser.
std::optional<SafetensorsHeader> read_header_with(simdjson::dom::parser& parser, FileSystem& fs,
                                                  const std::string& path, DiagnosticSink& sink);

/// The typed integer attributes `attributes` holds, as (config.json name, value) in output
/// order: num_attention_heads, num_key_value_heads, head_dim, hidden_size, vocab_size,
/// num_experts, then the architecture sizes (num_hidden_layers .. first_k_dense_replace) (a
/// sub-model's `attributes:`, a YAML model's attribute lines).
std::vector<std::pair<std::string, std::int64_t>> int_attributes(const ModelAttributes& attributes);

/// The `experts` entries a recipe needs for `model`'s pre-stacked expert tensors
/// (a segment `experts` followed by the tensor's own name, dim 0 equal to the
/// model's num_experts: gpt-oss, Llama-4, transformers 5's fused MoE), as
/// header comments `experts: ...` (docs/experts.md); none without num_experts.
std::vector<std::pair<std::string, std::string>> prestacked_expert_comments(const Model& model);

/// Freezes the params of architecture `arch` (config.json `architectures[0]` or
/// `model_type`) that no gradient reaches (DeepSeek-V3's router e_score_correction_bias:
/// checkpoint.cpp says why); `first` gets the first one's name. Returns how many.
std::size_t freeze_gradient_free_params(std::vector<Param>& params, const std::string& arch,
                                        std::string& first);

}  // namespace shardc::imp
