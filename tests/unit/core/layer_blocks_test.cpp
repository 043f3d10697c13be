// Layer blocks by stack (src/core/layer_blocks.hpp): a vision tower's blocks are not the
// decoder's (Llama-4-Scout's 34 vision blocks were counted as text layers 0-33).
#include <doctest/doctest.h>

#include <string_view>
#include <vector>

#include "core/layer_blocks.hpp"

using namespace shardc;

TEST_CASE("layer_block: the stack prefix and the index after a block-list segment") {
  const auto block = layer_block("language_model.model.layers.12.self_attn.q_proj.weight");
  REQUIRE(block.has_value());
  CHECK(block->stack == "language_model.model.layers");
  CHECK(block->index == 12);
  CHECK(layer_block("transformer.h.3.attn.c_attn.weight")->index == 3);
  CHECK(layer_block("blocks.7.norm.weight")->stack == "blocks");
  CHECK_FALSE(layer_block("model.embed_tokens.weight").has_value());
  CHECK_FALSE(layer_block("model.layers.x.weight").has_value());
  CHECK_FALSE(layer_block("model.layers").has_value());
}

TEST_CASE(
    "decoder_stack: num_hidden_layers picks the stack, else the largest, the last of equals") {
  std::vector<std::string_view> scout;
  std::vector<std::string> names;
  for (int i = 0; i < 34; ++i)
    names.push_back("vision_model.model.layers." + std::to_string(i) + ".mlp.fc1.weight");
  for (int i = 0; i < 48; ++i)
    names.push_back("language_model.model.layers." + std::to_string(i) +
                    ".self_attn.q_proj.weight");
  names.emplace_back("language_model.lm_head.weight");
  for (const std::string& name : names) scout.emplace_back(name);
  CHECK(decoder_stack(scout, 48) == "language_model.model.layers");
  CHECK(decoder_stack(scout, std::nullopt) == "language_model.model.layers");  // the largest
  CHECK(decoder_stack(scout, 34) == "vision_model.model.layers");              // exactly one has 34
  CHECK(decoder_block("vision_model.model.layers.3.mlp.fc1.weight",
                      "language_model.model.layers") == -1);
  CHECK(decoder_block("language_model.model.layers.3.mlp.fc1.weight",
                      "language_model.model.layers") == 3);
  const std::vector<std::string_view> equal = {"a.layers.0.w", "a.layers.1.w", "b.layers.0.w",
                                               "b.layers.1.w"};
  CHECK(decoder_stack(equal, std::nullopt) == "b.layers");
  CHECK(decoder_stack({}, 2).empty());
}
