// Tests for src/support/dtype.cpp (contract §3 dtypes).
#include <doctest/doctest.h>

#include "support/dtype.hpp"

using shardc::DType;

TEST_CASE("canonical torch dtype names parse and print back") {
  for (DType dtype :
       {DType::Float64, DType::Float32, DType::BFloat16, DType::Float16, DType::Float8E4M3fn,
        DType::Float8E5M2, DType::Int64, DType::Int32, DType::Int16, DType::Int8, DType::UInt8,
        DType::Bool, DType::UInt16, DType::UInt32, DType::UInt64, DType::Float8E8M0fnu}) {
    CHECK(shardc::parse_dtype(shardc::dtype_name(dtype)) == dtype);
  }
}

TEST_CASE("dtype aliases are accepted") {
  SUBCASE("short names") {
    CHECK(shardc::parse_dtype("bf16") == DType::BFloat16);
    CHECK(shardc::parse_dtype("fp32") == DType::Float32);
    CHECK(shardc::parse_dtype("fp16") == DType::Float16);
  }
  SUBCASE("safetensors names") {
    CHECK(shardc::parse_dtype("F32") == DType::Float32);
    CHECK(shardc::parse_dtype("BF16") == DType::BFloat16);
    CHECK(shardc::parse_dtype("F8_E4M3") == DType::Float8E4M3fn);
    CHECK(shardc::parse_dtype("F8_E5M2") == DType::Float8E5M2);
    CHECK(shardc::parse_dtype("I64") == DType::Int64);
    CHECK(shardc::parse_dtype("BOOL") == DType::Bool);
    CHECK(shardc::parse_dtype("U16") == DType::UInt16);
    CHECK(shardc::parse_dtype("U32") == DType::UInt32);
    CHECK(shardc::parse_dtype("U64") == DType::UInt64);
    CHECK(shardc::parse_dtype("F8_E8M0") == DType::Float8E8M0fnu);
  }
  SUBCASE("torch-prefixed names and torch aliases") {
    CHECK(shardc::parse_dtype("torch.bfloat16") == DType::BFloat16);
    CHECK(shardc::parse_dtype("torch.float") == DType::Float32);
    CHECK(shardc::parse_dtype("torch.half") == DType::Float16);
    CHECK(shardc::parse_dtype("torch.long") == DType::Int64);
  }
}

TEST_CASE("unknown dtypes are rejected") {
  CHECK_FALSE(shardc::parse_dtype("").has_value());
  CHECK_FALSE(shardc::parse_dtype("float128").has_value());
  CHECK_FALSE(shardc::parse_dtype("torch.").has_value());
  CHECK_FALSE(shardc::parse_dtype("bfloat16 ").has_value());
}

TEST_CASE("element sizes follow torch") {
  CHECK(shardc::element_size(DType::Float64) == 8);
  CHECK(shardc::element_size(DType::Float32) == 4);
  CHECK(shardc::element_size(DType::BFloat16) == 2);
  CHECK(shardc::element_size(DType::Float8E4M3fn) == 1);
  CHECK(shardc::element_size(DType::Bool) == 1);
  CHECK(shardc::element_size(DType::UInt16) == 2);
  CHECK(shardc::element_size(DType::UInt32) == 4);
  CHECK(shardc::element_size(DType::UInt64) == 8);
  CHECK(shardc::element_size(DType::Float8E8M0fnu) == 1);
  CHECK(shardc::dtype_name(DType::Float8E8M0fnu) == "float8_e8m0fnu");
  CHECK(shardc::dtype_names_list().find("float8_e4m3fn") != std::string_view::npos);
}
