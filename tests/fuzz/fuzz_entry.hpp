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

}  // namespace shardc::fuzz
