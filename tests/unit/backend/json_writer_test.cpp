#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include "backend/json_writer.hpp"

using shardc::json::Writer;

TEST_CASE("json writer escapes quotes, controls and invalid UTF-8") {
  std::string out;
  shardc::json::append_string(out, std::string("a\"b\\c\n\x01\xff\xc3\xa9", 10));
  CHECK(out == "\"a\\\"b\\\\c\\n\\u0001\\ufffd\xc3\xa9\"");
  CHECK(nlohmann::json::parse(out).get<std::string>() == "a\"b\\c\n\x01\xef\xbf\xbd\xc3\xa9");
}

TEST_CASE("json writer places commas and line breaks") {
  std::string out;
  Writer writer(out);
  writer.begin_object();
  writer.line_break().member("a", 1);
  writer.line_break().key("b").begin_array();
  writer.line_break().value("x");
  writer.line_break().ints(std::vector<std::int64_t>{1, -2});
  writer.line_break().end_array();
  writer.member_null("c").member("d", true);
  writer.line_break().end_object();
  CHECK(out == "{\n\"a\":1,\n\"b\":[\n\"x\",\n[1,-2]\n],\"c\":null,\"d\":true\n}");
  CHECK(nlohmann::json::accept(out));
}
