// Element types of parameters, with torch names (contract §3).
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace shardc {

enum class DType {
  Float64,
  Float32,
  BFloat16,
  Float16,
  Float8E4M3fn,
  Float8E5M2,
  Int64,
  Int32,
  Int16,
  Int8,
  UInt8,
  Bool,
  UInt16,
  UInt32,
  UInt64,
  Float8E8M0fnu,  ///< MX block scales: 8 exponent bits, no sign, no zero
};

/// Parses a torch dtype name ("bfloat16") or an accepted alias ("bf16",
/// "fp32", "F32", "BF16", "F8_E4M3", "torch.bfloat16", ...). nullopt if unknown.
std::optional<DType> parse_dtype(std::string_view text);

/// The canonical torch name, e.g. "bfloat16", "float8_e4m3fn".
std::string_view dtype_name(DType dtype);

/// Size of one element in bytes (bool: 1).
std::int64_t element_size(DType dtype);

/// True for the floating-point dtypes (float8 included): torch lets only floating point
/// (and complex) tensors require gradients ("Only Tensors of floating point and complex
/// dtype can require gradients"); integer and bool tensors are always frozen.
bool can_require_grad(DType dtype);

/// Comma-separated list of canonical names, for hints.
std::string_view dtype_names_list();

}  // namespace shardc
