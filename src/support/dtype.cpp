// Element types: torch names, accepted aliases, sizes (contract §3).
#include "support/dtype.hpp"

#include <array>
#include <cctype>
#include <string>

namespace shardc {
namespace {

struct DTypeInfo {
  DType type;
  std::string_view name;
  std::int64_t size;
};

constexpr std::array<DTypeInfo, 16> kTypes{{
    {DType::Float64, "float64", 8},
    {DType::Float32, "float32", 4},
    {DType::BFloat16, "bfloat16", 2},
    {DType::Float16, "float16", 2},
    {DType::Float8E4M3fn, "float8_e4m3fn", 1},
    {DType::Float8E5M2, "float8_e5m2", 1},
    {DType::Int64, "int64", 8},
    {DType::Int32, "int32", 4},
    {DType::Int16, "int16", 2},
    {DType::Int8, "int8", 1},
    {DType::UInt8, "uint8", 1},
    {DType::Bool, "bool", 1},
    {DType::UInt16, "uint16", 2},
    {DType::UInt32, "uint32", 4},
    {DType::UInt64, "uint64", 8},
    {DType::Float8E8M0fnu, "float8_e8m0fnu", 1},
}};

struct Alias {
  std::string_view text;  // lower case
  DType type;
};

// torch aliases (torch.float, torch.half, ...), short names and safetensors
// names (F32, BF16, F8_E4M3, F8_E8M0, I64, U8, U16, BOOL), all compared lower-cased.
constexpr std::array<Alias, 31> kAliases{{
    {"double", DType::Float64},
    {"fp64", DType::Float64},
    {"f64", DType::Float64},
    {"float", DType::Float32},
    {"fp32", DType::Float32},
    {"f32", DType::Float32},
    {"bf16", DType::BFloat16},
    {"half", DType::Float16},
    {"fp16", DType::Float16},
    {"f16", DType::Float16},
    {"f8_e4m3", DType::Float8E4M3fn},
    {"f8_e4m3fn", DType::Float8E4M3fn},
    {"float8_e4m3", DType::Float8E4M3fn},
    {"fp8_e4m3", DType::Float8E4M3fn},
    {"f8_e5m2", DType::Float8E5M2},
    {"fp8_e5m2", DType::Float8E5M2},
    {"long", DType::Int64},
    {"i64", DType::Int64},
    {"int", DType::Int32},
    {"i32", DType::Int32},
    {"short", DType::Int16},
    {"i16", DType::Int16},
    {"i8", DType::Int8},
    {"u8", DType::UInt8},
    {"u16", DType::UInt16},
    {"u32", DType::UInt32},
    {"u64", DType::UInt64},
    {"f8_e8m0", DType::Float8E8M0fnu},
    {"fp8_e8m0", DType::Float8E8M0fnu},
    {"boolean", DType::Bool},
    {"b8", DType::Bool},
}};

std::string lower(std::string_view text) {
  std::string out(text);
  for (char& ch : out) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return out;
}

}  // namespace

std::optional<DType> parse_dtype(std::string_view text) {
  if (text.size() > 32) return std::nullopt;
  for (const DTypeInfo& info : kTypes) {
    if (text == info.name) return info.type;  // canonical names are lower case
  }
  std::string key = lower(text);
  if (key.starts_with("torch.")) key.erase(0, 6);
  for (const DTypeInfo& info : kTypes) {
    if (key == info.name) return info.type;
  }
  for (const Alias& alias : kAliases) {
    if (key == alias.text) return alias.type;
  }
  return std::nullopt;
}

std::string_view dtype_name(DType dtype) { return kTypes.at(static_cast<std::size_t>(dtype)).name; }

bool can_require_grad(DType dtype) {
  switch (dtype) {
    case DType::Float64:
    case DType::Float32:
    case DType::BFloat16:
    case DType::Float16:
    case DType::Float8E4M3fn:
    case DType::Float8E5M2:
    case DType::Float8E8M0fnu:
      return true;
    default:
      return false;
  }
}

std::int64_t element_size(DType dtype) { return kTypes.at(static_cast<std::size_t>(dtype)).size; }

std::string_view dtype_names_list() {
  return "float64, float32, bfloat16, float16, float8_e4m3fn, float8_e5m2, int64, int32, "
         "int16, int8, uint8, bool, uint16, uint32, uint64, float8_e8m0fnu";
}

}  // namespace shardc
