// The safetensors header reader: lengths, JSON shape, offsets, dtypes; every
// problem an E-CHECKPOINT naming the file and the tensor.
#include <doctest/doctest.h>

#include <string>

#include "../driver/fake_file_system.hpp"
#include "import/import.hpp"

namespace {

using shardc::DiagnosticSink;

std::string le64(std::uint64_t v) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i)
    out[static_cast<std::size_t>(i)] = static_cast<char>((v >> (8 * i)) & 0xff);
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
  auto h = shardc::parse_safetensors_header(json, 8 + static_cast<std::int64_t>(json.size()) + 18,
                                            "m.safetensors", sink);
  REQUIRE(h.has_value());
  CHECK(sink.items().empty());
  REQUIRE(h->tensors.size() == 3);
  CHECK(h->tensors[0].name == "b.weight");
  CHECK(h->tensors[0].dtype == shardc::DType::Float8E4M3fn);
  CHECK(h->tensors[0].shape == shardc::Shape{2, 3});
  CHECK(h->tensors[1].dtype == shardc::DType::BFloat16);
  CHECK(h->tensors[2].shape.empty());
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
      {R"({"a": {"dtype": "F6", "shape": [1], "data_offsets": [0, 1]}})", 8, "a", "unknown dtype"},
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
  };
  for (const Bad& c : cases) {
    CAPTURE(c.json);
    DiagnosticSink sink;
    const std::string json = c.json;
    auto h = shardc::parse_safetensors_header(
        json, 8 + static_cast<std::int64_t>(json.size()) + c.data, "x.safetensors", sink);
    CHECK_FALSE(h.has_value());
    REQUIRE(first(sink) != nullptr);
    CHECK(first(sink)->code == shardc::DiagCode::ECheckpoint);
    CHECK(first(sink)->loc.file == "x.safetensors");
    CHECK(first(sink)->param == c.tensor);
    CHECK(first(sink)->message.find(c.says) != std::string::npos);
    CHECK_FALSE(first(sink)->hint.empty());
  }
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
  auto h = shardc::read_safetensors_header(fs, "big.safetensors", sink);
  REQUIRE(h.has_value());
  CHECK(h->tensors.at(0).end == std::int64_t{1} << 33);
  DiagnosticSink missing;
  CHECK_FALSE(shardc::read_safetensors_header(fs, "nope.safetensors", missing).has_value());
  CHECK(missing.has_code(shardc::DiagCode::ECheckpoint));
}
