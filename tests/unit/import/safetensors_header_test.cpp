// The safetensors header reader: lengths, JSON shape, offsets, dtypes; every
// problem an E-CHECKPOINT naming the file and the tensor.
#include <doctest/doctest.h>

#include <string>

#include "../driver/fake_file_system.hpp"
#include "import/import.hpp"

namespace {

using shardc::DiagnosticSink;

std::string le64(std::uint64_t value) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i)
    out[static_cast<std::size_t>(i)] = static_cast<char>((value >> (8 * i)) & 0xff);
  return out;
}

// A file: length + header; `data` bytes of data (sparse in the fake).
void add_file(shardc::test::FakeFileSystem& fs, const std::string& path, const std::string& json,
              std::int64_t data) {
  fs.files[path] = le64(json.size()) + json;
  fs.sparse_sizes[path] = static_cast<std::int64_t>(8 + json.size()) + data;
}

const shardc::Diagnostic* first(const DiagnosticSink& sink) {
  return sink.items().empty() ? nullptr : &sink.items().front();
}

}  // namespace

TEST_CASE("a valid header: dtypes, shapes, offsets (__metadata__ ignored)") {
  const std::string json =
      R"({"__metadata__": {"format": "pt"},
          "b.weight": {"dtype": "F8_E4M3", "shape": [2, 3], "data_offsets": [8, 14]},
          "a.weight": {"dtype": "BF16", "shape": [4], "data_offsets": [0, 8]},
          "s": {"dtype": "F32", "shape": [], "data_offsets": [14, 18]}})";
  DiagnosticSink sink;
  auto header = shardc::parse_safetensors_header(
      json, 8 + static_cast<std::int64_t>(json.size()) + 18, "m.safetensors", sink);
  REQUIRE(header.has_value());
  CHECK(sink.items().empty());
  REQUIRE(header->tensors.size() == 3);
  CHECK(header->tensors[0].name == "b.weight");
  CHECK(header->tensors[0].dtype == shardc::DType::Float8E4M3fn);
  CHECK(header->tensors[0].shape == shardc::Shape{2, 3});
  CHECK(header->tensors[1].dtype == shardc::DType::BFloat16);
  CHECK(header->tensors[2].shape.empty());
}

TEST_CASE("header problems are E-CHECKPOINT with the file and the tensor") {
  struct Bad {
    const char* json;
    std::int64_t data;
    const char* tensor;
    const char* says;
  };
  const Bad cases[] = {
      {"[1, 2]", 0, "", "not a JSON object"},
      {"{\"a\": ", 0, "", "not valid JSON"},
      {R"({"a": 3})", 0, "a", "not an object"},
      {R"({"a": {"dtype": "F6", "shape": [1], "data_offsets": [0, 1]}})", 8, "a",
       "dtype 'F6' is not supported by shardc"},
      {R"({"a": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}})", 8, "a", "non-negative"},
      {R"({"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 64]}})", 8, "a", "outside"},
      {R"({"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 8]}})", 8, "a", "needs"},
      {R"({"a": {"dtype": "F32", "shape": [4611686018427387904, 4], "data_offsets": [0, 8]}})", 8,
       "a", "2^62"},
      {R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
           "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}})",
       16, "b", "overlap"},
      {R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},
           "a": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}})",
       8, "a", "twice"},
      {R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0]}})", 8, "a", "data_offsets"},
      // safetensors' Metadata::validate: contiguous from 0, the last end == the data size,
      // __metadata__ values strings
      {R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},
           "b": {"dtype": "F32", "shape": [1], "data_offsets": [8, 12]}})",
       12, "b", "leave a gap of 4 bytes after tensor 'a'"},
      {R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}})", 8, "a",
       "gap of 4 bytes at the start of the data section"},
      {R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}})", 12, "a",
       "8 bytes belong to no tensor"},
      {R"({})", 4, "", "tensors hold no data: 4 bytes belong to no tensor"},
      {R"({"__metadata__": {"step": 5}, "a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}})",
       4, "", "`__metadata__` value 'step' is 5, not a string"},
      {R"({"__metadata__": [1], "a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}})", 4,
       "", "not an object of strings"},
  };
  for (const Bad& bad : cases) {
    CAPTURE(bad.json);
    DiagnosticSink sink;
    const std::string json = bad.json;
    auto header = shardc::parse_safetensors_header(
        json, 8 + static_cast<std::int64_t>(json.size()) + bad.data, "x.safetensors", sink);
    CHECK_FALSE(header.has_value());
    REQUIRE(first(sink) != nullptr);
    CHECK(first(sink)->code == shardc::DiagCode::ECheckpoint);
    CHECK(first(sink)->loc.file == "x.safetensors");
    CHECK(first(sink)->param == bad.tensor);
    CHECK(first(sink)->message.find(bad.says) != std::string::npos);
    CHECK_FALSE(first(sink)->hint.empty());
  }
}

TEST_CASE("the dtypes torch 2.13 writes (U16, U32, U64, F8_E8M0) and zero-size tensors") {
  const std::string json =
      R"({"__metadata__": null,
          "a": {"dtype": "U16", "shape": [2], "data_offsets": [0, 4]},
          "e": {"dtype": "BF16", "shape": [0, 4], "data_offsets": [4, 4]},
          "b": {"dtype": "U32", "shape": [1], "data_offsets": [4, 8]},
          "c": {"dtype": "U64", "shape": [1], "data_offsets": [8, 16]},
          "d": {"dtype": "F8_E8M0", "shape": [3], "data_offsets": [16, 19]}})";
  DiagnosticSink sink;
  auto header = shardc::parse_safetensors_header(
      json, 8 + static_cast<std::int64_t>(json.size()) + 19, "m.safetensors", sink);
  REQUIRE(header.has_value());
  CHECK(sink.items().empty());
  REQUIRE(header->tensors.size() == 5);
  CHECK(header->tensors[0].dtype == shardc::DType::UInt16);
  CHECK(header->tensors[2].dtype == shardc::DType::UInt32);
  CHECK(header->tensors[3].dtype == shardc::DType::UInt64);
  CHECK(header->tensors[4].dtype == shardc::DType::Float8E8M0fnu);
}

TEST_CASE("header lengths are bounded by the file and by 100 MB before anything is read") {
  DiagnosticSink sink;
  CHECK_FALSE(shardc::safetensors_header_length(le64(1000), 500, "f", sink).has_value());
  CHECK(first(sink)->message.find("exceeds the file") != std::string::npos);
  DiagnosticSink sink2;
  CHECK_FALSE(
      shardc::safetensors_header_length(le64(200'000'000), std::int64_t{1} << 40, "f", sink2)
          .has_value());
  CHECK(first(sink2)->message.find("100 MB") != std::string::npos);
  DiagnosticSink sink3;
  CHECK_FALSE(
      shardc::safetensors_header_length(le64(~std::uint64_t{0}), 100, "f", sink3).has_value());
  DiagnosticSink sink4;
  CHECK_FALSE(shardc::safetensors_header_length("abc", 3, "f", sink4).has_value());
  DiagnosticSink ok;
  CHECK(shardc::safetensors_header_length(le64(10), 18, "f", ok) == 10);
}

TEST_CASE("read_safetensors_header reads only the header of a huge sparse file") {
  shardc::test::FakeFileSystem fs;
  const std::string json =
      R"({"w": {"dtype": "BF16", "shape": [65536, 65536], "data_offsets": [0, 8589934592]}})";
  add_file(fs, "big.safetensors", json, std::int64_t{1} << 33);
  DiagnosticSink sink;
  auto header = shardc::read_safetensors_header(fs, "big.safetensors", sink);
  REQUIRE(header.has_value());
  CHECK(header->tensors.at(0).end == std::int64_t{1} << 33);
  DiagnosticSink missing;
  CHECK_FALSE(shardc::read_safetensors_header(fs, "nope.safetensors", missing).has_value());
  CHECK(missing.has_code(shardc::DiagCode::ECheckpoint));
}
