// The fuzz entry points: the libFuzzer targets (fuzz_model.cpp,
// fuzz_recipe.cpp) and the corpus replay test (replay_main.cpp) call these,
// so every corpus file also runs in the ordinary build.
#pragma once

#include <string_view>

namespace shardc::fuzz {

/// Bytes as a model description: parse_model (YAML or JSON by the first
/// byte), the JSON reader on the same bytes, and, when it parses, build_plan
/// against a fixed small recipe; diagnostics rendered in every format.
void model_input(std::string_view bytes);

/// Bytes as a recipe: parse_recipe and, when it parses, build_plan against a
/// fixed small model (dense and expert params); diagnostics rendered.
void recipe_input(std::string_view bytes);

/// Bytes as a compiled output file: the plan.json, rank-file and
/// manifest.json readers, then `verify` on a fixed compiled OUTDIR (8 ranks,
/// pipeline, FSDP, both buffer kinds; in memory) in which the bytes after
/// the first replace ranks/rank-1.json, plan.json or manifest.json (first
/// byte mod 3), with manifest.json re-signed for the first two, so the
/// field checks and the simulator see the bytes, not just the digest check.
void output_input(std::string_view bytes);

/// Bytes as a safetensors file: the header length check, the JSON header
/// reader, module ordering of the names it yields (DeepSeek-V3 rules and
/// natural order), and the same bytes as a config.json; diagnostics rendered.
void safetensors_input(std::string_view bytes);

/// Bytes as checkpoint names and text (issue 24): tensor names (length-prefixed chunks of the
/// bytes, any byte allowed) and a config.json `_name_or_path` / `architectures` string go into
/// an in-memory checkpoint; when it imports, the YAML `render_model_yaml` writes must parse
/// back (parse_model) to the same params, ties, attributes and name, and every imported name
/// must be one the model front end accepts. The bytes are also read as a byte size, whose
/// value must be at most 2^62 and survive byte_size_text.
void import_input(std::string_view bytes);

}  // namespace shardc::fuzz
