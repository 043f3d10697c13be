// Tests for src/core/diagnostics.cpp, sha256.cpp, shape.cpp, utf8.cpp.
#include <doctest/doctest.h>

#include "core/diagnostics.hpp"
#include "core/model.hpp"
#include "frontend/frontend.hpp"
#include "support/utf8.hpp"

using shardc::DiagCode;

TEST_CASE("the sink counts every diagnostic but stores at most its limit") {
  shardc::DiagnosticSink sink(2);
  sink.error(DiagCode::EModel, {"m.yaml", 1, 2}, "a");
  sink.warning(DiagCode::WUnusedRule, {}, "b");
  sink.error(DiagCode::EHeads, {}, "c");
  sink.error(DiagCode::EHeads, {}, "d");
  CHECK(sink.error_count() == 3);
  CHECK(sink.warning_count() == 1);
  CHECK(sink.items().size() == 2);
  CHECK(sink.dropped() == 2);
  CHECK(sink.has_errors());
  CHECK(sink.has_code(DiagCode::EModel));
  CHECK(sink.has_code(DiagCode::EHeads));
  CHECK_FALSE(sink.has_code(DiagCode::EMesh));
  CHECK(sink.items()[0].loc.column == 2);
}

TEST_CASE("severity names are lower-case words") {
  CHECK(std::string(shardc::severity_name(shardc::Severity::Error)) == "error");
  CHECK(std::string(shardc::severity_name(shardc::Severity::Warning)) == "warning");
  CHECK(std::string(shardc::severity_name(shardc::Severity::Note)) == "note");
}

TEST_CASE("sha256_hex gives the standard digests") {
  CHECK(shardc::sha256_hex("") ==
        "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  CHECK(shardc::sha256_hex("abc") ==
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST_CASE("numel multiplies the extents and is 1 for a scalar") {
  CHECK(shardc::numel({}) == 1);
  CHECK(shardc::numel({4, 0, 3}) == 0);
  CHECK(shardc::numel({128256, 4096}) == 525336576);
}

TEST_CASE("utf8 validation rejects malformed sequences") {
  CHECK(shardc::is_valid_utf8("model.layers.0"));
  CHECK(shardc::is_valid_utf8("caf\xC3\xA9"));
  CHECK_FALSE(shardc::is_valid_utf8("\xFF"));
  CHECK_FALSE(shardc::is_valid_utf8("\xC3"));
  CHECK_FALSE(shardc::is_valid_utf8("\xC0\xAF"));          // overlong
  CHECK_FALSE(shardc::is_valid_utf8("\xED\xA0\x80"));      // surrogate
  CHECK_FALSE(shardc::is_valid_utf8("\xF4\x90\x80\x80"));  // > U+10FFFF
}

TEST_CASE("every stored diagnostic has a hint") {
  shardc::DiagnosticSink sink;
  sink.error(DiagCode::EAxis, {}, "an axis is missing");
  sink.warning(DiagCode::WVocab, {}, "uneven vocab", "pad it");
  REQUIRE(sink.items().size() == 2);
  CHECK(sink.items()[0].hint.find("E-AXIS") != std::string::npos);
  CHECK(sink.items()[1].hint == "pad it");
}

TEST_CASE("the exit class comes from the codes of the errors, dropped ones included") {
  shardc::DiagnosticSink sink(1);
  CHECK(sink.error_exit() == shardc::ExitCode::Ok);
  sink.warning(DiagCode::WVocab, {}, "w");
  CHECK(sink.error_exit() == shardc::ExitCode::Ok);
  sink.error(DiagCode::EHeads, {}, "planner error");
  CHECK(sink.error_exit() == shardc::ExitCode::Invalid);
  sink.error(DiagCode::ERecipe, {}, "dropped parse error");
  CHECK(sink.dropped() == 2);
  CHECK(sink.error_exit() == shardc::ExitCode::Usage);
}
