// FP8 block quantization: the rule that plans each block scale with its
// weight (`fp8_scales: follow`, contract §5.11, docs/semantics.md "FP8
// block-quantized checkpoints").
//
// Source of the layout: DeepSeek-V3's FP8 checkpoints (and Kimi-K2,
// Qwen3-FP8, Hugging Face `FineGrainedFP8Config`): config.json
// `quantization_config` has `quant_method: fp8`, `weight_block_size:
// [B0, B1]` (DeepSeek-V3: [128, 128]). Each quantized `X.weight` [O, I]
// (float8_e4m3fn) has a float32 `X.weight_scale_inv` [ceil(O/B0),
// ceil(I/B1)]; dequantization multiplies block (i, j) — weight rows
// [i B0, (i+1) B0), cols [j B1, (j+1) B1), the last block clipped — by
// scale[i][j] (DeepSeek-V3 `inference/kernel.py` `weight_dequant`).
// Tensor-parallel runtimes shard the scale in whole blocks with its weight:
// vLLM's `BlockQuantScaleParameter` is sharded on the same output / input
// dims as its weight, in blocks, and vLLM's and sglang's
// `validate_fp8_block_shape` (`Fp8LinearMethod.create_weights`) refuse a
// tensor-parallel partition whose size is not a multiple of the block. So a
// rank holding weight rows [a, e) of a dim with block b holds scale rows
// [a / b, ceil(e / b)), which is only possible when every shard boundary is a
// multiple of b (or the dim's end: the last block may be partial).
//
// All extents, offsets and blocks here are in elements (rows of the dim).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/model.hpp"
#include "core/plan.hpp"

namespace shardc::fp8 {

/// The scale name suffix: the scale of `X.weight` is `X.weight_scale_inv`;
/// the scale of a stacked expert weight `...experts.w1` (named by an
/// `experts` entry's `stack`) is `...experts.w1_scale_inv` (vLLM's
/// `w13_weight_scale_inv` naming).
inline constexpr std::string_view kScaleSuffix = "_scale_inv";

/// `weight` + "_scale_inv".
std::string scale_name(std::string_view weight);

/// The weight a checkpoint scale belongs to: `name` minus "_scale_inv" when
/// `name` ends in "weight_scale_inv" (`X.weight_scale_inv`,
/// `w13_weight_scale_inv`); nullopt for any other name.
std::optional<std::string> weight_of_scale(std::string_view name);

/// Block extent of each dim of an `ndim`-dim weight: `block` [B0, B1] on
/// the last two dims (rows, cols), 1 on leading dims (stacked experts).
/// Preconditions: ndim >= 2, block has 2 entries >= 1.
std::vector<std::int64_t> dim_blocks(std::size_t ndim, std::span<const std::int64_t> block);

/// The scale shape a weight of shape `weight` has: ceil(extent / block) per
/// dim of `dim_blocks`. nullopt when ndim < 2 or `block` is not 2 entries
/// >= 1 (no FP8 block layout).
std::optional<Shape> scale_shape(const Shape& weight, std::span<const std::int64_t> block);

/// The scale rows of weight rows `rows` ([start, start + size)) with block
/// `block` (b): [start / b, ceil((start + size) / b)); an empty piece maps to an
/// empty piece at start / b. Precondition: b >= 1, start, size >= 0.
Piece block_image(Piece rows, std::int64_t block);

/// True when the real rows `rows` of a dim of extent `length` cut no block
/// of `block` (b) rows: empty, or start % b == 0 and the end is a multiple of b or
/// the dim's end (the last block may be partial).
bool block_aligned(Piece rows, std::int64_t length, std::int64_t block);

/// The scale's split for a weight split `weight_split` on a dim with block `block` (b): same
/// axes, ways and rule; the unit becomes U / b when b divides the weight's
/// unit U (whole blocks then split exactly like whole units), else 1; a
/// `pad` multiple M becomes M U / b when b divides M U (pieces of c U rows
/// are c U / b blocks), else stays M (the check then reports a mismatch).
DimSplit scale_split(const DimSplit& weight_split, std::int64_t block);

/// Whether one rank's piece can carry its scale: the weight's real rows
/// `w_rows` (relative to a parent piece of `w_length` real rows whose start
/// is block-aligned) and the scale rows `s_rows` the scale's split gives the
/// same coordinate.
struct PieceVerdict {
  bool ok = true;
  std::int64_t boundary = -1;  ///< a boundary row cutting a block (relative), or -1
  bool mismatch = false;       ///< aligned, but `s_rows` is not the block image of `w_rows`
};
PieceVerdict judge_piece(Piece w_rows, std::int64_t w_length, Piece s_rows, std::int64_t block);

/// The ways n in [1, max_ways] for which splitting a dim of `length` rows
/// (block `block`) like `ws` (its rule, unit, pad multiple) keeps every
/// boundary block-aligned and its scale (split like `scale_split`) the
/// block image — the sizes to suggest in E-FP8-BLOCK. At most `max_listed`
/// values. Cost O(max_ways x pieces).
std::vector<std::int64_t> valid_ways(std::int64_t length, std::int64_t block, const DimSplit& ws,
                                     std::int64_t max_ways, std::size_t max_listed);

}  // namespace shardc::fp8
