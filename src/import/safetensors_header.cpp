// The safetensors header reader: the 8-byte little-endian length, then the
// JSON header (name -> {dtype, shape, data_offsets}; `__metadata__` ignored).
// Format: https://github.com/huggingface/safetensors (README, "Format").
#include <simdjson.h>

#include <algorithm>
#include <array>
#include <unordered_set>

#include "import/import.hpp"
#include "import/import_internal.hpp"
#include "support/fqn.hpp"
#include "support/limits.hpp"

namespace shardc {
namespace {

// Errors reported per file before the rest are only counted.
constexpr int kMaxErrorsPerFile = limits::kMaxHeaderErrorsPerFile;
using limits::kMaxNumel;
constexpr std::size_t kMaxRank = limits::kMaxTensorRank;

struct StDType {
  std::string_view code;
  DType type;
};

// safetensors dtype codes (safetensors/src/tensor.rs `Dtype`) that map to a model dtype.
constexpr std::array<StDType, 16> kDTypes{{
    {"BOOL", DType::Bool},
    {"U8", DType::UInt8},
    {"U16", DType::UInt16},
    {"U32", DType::UInt32},
    {"U64", DType::UInt64},
    {"I8", DType::Int8},
    {"I16", DType::Int16},
    {"I32", DType::Int32},
    {"I64", DType::Int64},
    {"F8_E4M3", DType::Float8E4M3fn},
    {"F8_E5M2", DType::Float8E5M2},
    {"F8_E8M0", DType::Float8E8M0fnu},
    {"F16", DType::Float16},
    {"BF16", DType::BFloat16},
    {"F32", DType::Float32},
    {"F64", DType::Float64},
}};

std::optional<DType> st_dtype(std::string_view code) {
  for (const StDType& entry : kDTypes) {
    if (entry.code == code) return entry.type;
  }
  return std::nullopt;
}

class HeaderChecker {
 public:
  HeaderChecker(const std::string& path, std::int64_t data_size, DiagnosticSink& sink)
      : path_(path), data_size_(data_size), sink_(sink) {}

  void error(const std::string& tensor, std::string message, std::string hint) {
    ++errors_;
    if (errors_ > kMaxErrorsPerFile) return;
    Diagnostic diag;
    diag.code = DiagCode::ECheckpoint;
    diag.loc = SourceLoc{path_, 0, 0};
    // Names are data from the file: escaped (control characters, bad UTF-8 as \xNN) wherever
    // they are shown.
    diag.param = imp::printable(tensor);
    diag.message = tensor.empty() ? std::move(message) : "tensor '" + diag.param + "': " + message;
    diag.hint = std::move(hint);
    sink_.report(std::move(diag));
  }

  [[nodiscard]] int errors() const { return errors_; }

  // Reads one header entry into `t`; false (and errors reported) when malformed.
  bool entry(std::string_view name, simdjson::dom::element value, SafetensorsTensor& tensor) {
    tensor.name = std::string(name);
    simdjson::dom::object obj;
    if (value.get_object().get(obj) != simdjson::SUCCESS) {
      error(tensor.name, "entry is not an object", "each entry is {dtype, shape, data_offsets}");
      return false;
    }
    return dtype_of(obj, tensor) && shape_of(obj, tensor) && offsets_of(obj, tensor) &&
           size_matches(tensor);
  }

  // safetensors' `Metadata::validate` (safetensors/src/tensor.rs): the tensors, sorted by
  // data_offsets, tile the data section from byte 0 with no gap or overlap, and the last one
  // ends at its end (`read_metadata`: "incomplete metadata, file not fully covered"). A hole
  // or bytes after the last tensor is what a deleted header entry leaves: that tensor would
  // silently leave the plan.
  void check_layout(const std::vector<SafetensorsTensor>& tensors) {
    std::vector<const SafetensorsTensor*> order;
    order.reserve(tensors.size());
    for (const auto& tensor : tensors) order.push_back(&tensor);
    std::sort(order.begin(), order.end(), [](const auto* left, const auto* right) {
      return left->begin != right->begin ? left->begin < right->begin : left->end < right->end;
    });
    const std::string rewrite = "rewrite it with safetensors (safetensors itself refuses it: ";
    std::int64_t end = 0;
    const SafetensorsTensor* previous = nullptr;
    for (const SafetensorsTensor* tensor : order) {
      const std::string span = "data_offsets [" + std::to_string(tensor->begin) + ", " +
                               std::to_string(tensor->end) + ")";
      if (tensor->begin < end) {
        error(tensor->name,
              span + " overlap tensor '" + imp::printable(previous->name) + "' [" +
                  std::to_string(previous->begin) + ", " + std::to_string(previous->end) + ")",
              "the file is corrupt or hand-edited: " + rewrite + "\"invalid offset\")");
      } else if (tensor->begin > end) {
        error(tensor->name,
              span + " leave a gap of " + std::to_string(tensor->begin - end) + " bytes " +
                  (previous == nullptr ? std::string("at the start of the data section")
                                       : "after tensor '" + imp::printable(previous->name) +
                                             "' (ends at " + std::to_string(end) + ")") +
                  ": safetensors packs tensors contiguously from byte 0",
              "a gap is what a deleted header entry leaves (that tensor would be missing from "
              "the model): " +
                  rewrite + "\"invalid offset\")");
      }
      if (tensor->end > end) {
        end = tensor->end;
        previous = tensor;
      }
    }
    if (errors_ == 0 && end != data_size_) {
      error(previous == nullptr ? std::string() : previous->name,
            "the data section has " + std::to_string(data_size_) + " bytes, but " +
                (previous == nullptr
                     ? std::string("the header's tensors hold no data")
                     : "the tensors end at byte " + std::to_string(end) + " (this one last)") +
                ": " + std::to_string(data_size_ - end) + " bytes belong to no tensor",
            "trailing bytes are what a deleted header entry (or an appended file) leaves: " +
                rewrite + "\"incomplete metadata, file not fully covered\")");
    }
  }

  // safetensors' `Metadata.metadata` is a `HashMap<String, String>`: `__metadata__` is an
  // object (or null) whose every value is a string ("invalid type: integer `5`, expected a
  // string").
  void check_metadata(simdjson::dom::element value) {
    if (value.is_null()) return;
    simdjson::dom::object obj;
    if (value.get_object().get(obj) != simdjson::SUCCESS) {
      error("",
            "`__metadata__` is " + imp::printable(simdjson::to_string(value)) +
                ", not an object of strings",
            "safetensors refuses such a header; `__metadata__` maps names to strings, e.g. "
            "{\"format\": \"pt\"}");
      return;
    }
    for (simdjson::dom::key_value_pair field : obj) {
      if (field.value.is_string()) continue;
      error("",
            "`__metadata__` value '" + imp::printable(field.key) + "' is " +
                imp::printable(simdjson::to_string(field.value)) + ", not a string",
            "safetensors refuses such a header (\"invalid type ..., expected a string\"): "
            "write the value as a string, e.g. \"5\"");
    }
  }

 private:
  bool dtype_of(simdjson::dom::object& obj, SafetensorsTensor& tensor) {
    std::string_view code;
    if (obj["dtype"].get_string().get(code) != simdjson::SUCCESS) {
      error(tensor.name, "missing or non-string `dtype`",
            "each entry needs a dtype such as \"BF16\"");
      return false;
    }
    const std::optional<DType> type = st_dtype(code);
    if (!type) {
      std::string supported;
      for (const StDType& entry : kDTypes)
        supported += (supported.empty() ? "" : ", ") + std::string(entry.code);
      error(tensor.name, "dtype '" + imp::printable(code) + "' is not supported by shardc",
            "supported: " + supported +
                " (safetensors' F4, F6_*, F8_E4M3FNUZ, F8_E5M2FNUZ, C64 and unknown codes are "
                "not)");
      return false;
    }
    tensor.dtype = *type;
    return true;
  }

  bool shape_of(simdjson::dom::object& obj, SafetensorsTensor& tensor) {
    simdjson::dom::array dims;
    if (obj["shape"].get_array().get(dims) != simdjson::SUCCESS) {
      error(tensor.name, "missing or non-list `shape`", "each entry needs shape: [d0, d1, ...]");
      return false;
    }
    std::int64_t numel = 1;
    for (simdjson::dom::element d : dims) {
      std::int64_t extent = 0;
      if (d.get_int64().get(extent) != simdjson::SUCCESS || extent < 0) {
        error(tensor.name,
              "shape extent " + imp::printable(simdjson::to_string(d)) +
                  " is not a non-negative 64-bit integer",
              "extents are element counts");
        return false;
      }
      if (tensor.shape.size() >= kMaxRank) {
        error(tensor.name, "shape has more than 64 dimensions", "the file is corrupt");
        return false;
      }
      const std::int64_t factor = std::max<std::int64_t>(extent, 1);
      if (numel > (kMaxNumel - 1) / factor) {
        error(tensor.name, "shape has 2^62 or more elements", "the file is corrupt");
        return false;
      }
      numel *= factor;
      tensor.shape.push_back(extent);
    }
    return true;
  }

  bool offsets_of(simdjson::dom::object& obj, SafetensorsTensor& tensor) {
    simdjson::dom::array offs;
    std::array<std::int64_t, 2> offsets{};
    std::size_t count = 0;
    bool ok = obj["data_offsets"].get_array().get(offs) == simdjson::SUCCESS;
    if (ok) {
      for (simdjson::dom::element item : offs) {
        if (count >= 2 || item.get_int64().get(offsets.at(count)) != simdjson::SUCCESS ||
            offsets.at(count) < 0) {
          ok = false;
          break;
        }
        ++count;
      }
    }
    if (!ok || count != 2) {
      error(tensor.name, "`data_offsets` is not [begin, end] with non-negative integers",
            "data_offsets are byte offsets into the data section");
      return false;
    }
    tensor.begin = offsets[0];
    tensor.end = offsets[1];
    if (tensor.begin > tensor.end || tensor.end > data_size_) {
      error(tensor.name,
            "data_offsets [" + std::to_string(tensor.begin) + ", " + std::to_string(tensor.end) +
                ") are outside the data section of " + std::to_string(data_size_) + " bytes",
            "the file is truncated or its header is corrupt");
      return false;
    }
    return true;
  }

  bool size_matches(const SafetensorsTensor& tensor) {
    const std::int64_t elements = numel(tensor.shape);
    const std::int64_t esize = element_size(tensor.dtype);
    const bool fits = elements <= (tensor.end - tensor.begin) / esize;
    if (!fits || elements * esize != tensor.end - tensor.begin) {
      error(tensor.name,
            "data_offsets span " + std::to_string(tensor.end - tensor.begin) +
                " bytes, but shape " + imp::shape_text(tensor.shape) + " of " +
                std::string(dtype_name(tensor.dtype)) + " needs " +
                imp::bytes_text(elements, esize),
            "data_offsets must cover exactly numel x dtype size bytes");
      return false;
    }
    return true;
  }

  const std::string& path_;
  std::int64_t data_size_;
  DiagnosticSink& sink_;
  int errors_ = 0;
};

std::int64_t read_le64(std::string_view bytes) {
  std::uint64_t value = 0;
  for (int i = 7; i >= 0; --i) {
    value = (value << 8) | static_cast<unsigned char>(bytes[static_cast<std::size_t>(i)]);
  }
  return value > static_cast<std::uint64_t>(INT64_MAX) ? -1 : static_cast<std::int64_t>(value);
}

}  // namespace

std::optional<std::int64_t> safetensors_header_length(std::string_view prefix,
                                                      std::int64_t file_size,
                                                      const std::string& path,
                                                      DiagnosticSink& sink) {
  const std::string hint = "is this a safetensors file? It starts with an 8-byte length";
  if (prefix.size() < 8 || file_size < 8) {
    sink.error(DiagCode::ECheckpoint, SourceLoc{path, 0, 0},
               "file of " + std::to_string(file_size) +
                   " bytes is too short for a safetensors "
                   "header",
               hint);
    return std::nullopt;
  }
  if (prefix.substr(0, 8) == "version ") {
    // A Git LFS pointer ("version https://git-lfs.github.com/spec/v1", oid, size) checked out
    // in place of the file: its first 8 bytes read as a length of ~2^61.
    sink.error(DiagCode::ECheckpoint, SourceLoc{path, 0, 0},
               "file of " + std::to_string(file_size) +
                   " bytes is a Git LFS pointer, not the safetensors data",
               "fetch the data: `git lfs pull` in the checkpoint's clone (or download the file)");
    return std::nullopt;
  }
  const std::int64_t length = read_le64(prefix);
  if (length < 0 || length > kMaxSafetensorsHeaderBytes || length > file_size - 8) {
    sink.error(DiagCode::ECheckpoint, SourceLoc{path, 0, 0},
               "header length " + (length < 0 ? std::string(">= 2^63") : std::to_string(length)) +
                   " exceeds " +
                   (length >= 0 && length <= kMaxSafetensorsHeaderBytes
                        ? "the file (" + std::to_string(file_size) + " bytes)"
                        : std::string("the 100 MB header limit")),
               hint + "; the file may be truncated or corrupt");
    return std::nullopt;
  }
  return length;
}

std::optional<SafetensorsHeader> imp::parse_header_with(simdjson::dom::parser& parser,
                                                        std::string_view json,
                                                        std::int64_t file_size,
                                                        const std::string& path,
                                                        DiagnosticSink& sink) {
  const auto length = static_cast<std::int64_t>(json.size());
  HeaderChecker check(path, file_size - 8 - length, sink);
  simdjson::dom::element root;
  const simdjson::padded_string padded(json);
  if (const auto err = parser.parse(padded).get(root); err != simdjson::SUCCESS) {
    check.error("", std::string("header is not valid JSON: ") + simdjson::error_message(err),
                "the file is truncated or not a safetensors file");
    return std::nullopt;
  }
  simdjson::dom::object obj;
  if (root.get_object().get(obj) != simdjson::SUCCESS) {
    check.error("", "header is not a JSON object", "a safetensors header maps names to tensors");
    return std::nullopt;
  }
  SafetensorsHeader header;
  header.header_bytes = length;
  std::unordered_set<std::string_view> seen;
  for (simdjson::dom::key_value_pair field : obj) {
    if (field.key == "__metadata__") {
      check.check_metadata(field.value);
      continue;
    }
    if (!seen.insert(field.key).second) {
      check.error(std::string(field.key), "name appears twice in the header",
                  "the file is corrupt or hand-edited");
      continue;
    }
    // The model front end's FQN rule (support/fqn.hpp), without braces: `shardc import` must
    // be able to write every name into a model YAML that reads back as the same name.
    if (const std::string_view why = fqn_problem(field.key, false); !why.empty()) {
      check.error(std::string(field.key), "the name " + std::string(why),
                  "tensor names are dot-separated FQNs such as model.layers.0.mlp.up_proj.weight");
      continue;
    }
    SafetensorsTensor tensor;
    if (check.entry(field.key, field.value, tensor)) header.tensors.push_back(std::move(tensor));
  }
  if (check.errors() == 0) check.check_layout(header.tensors);
  if (check.errors() > kMaxErrorsPerFile) {
    sink.error(DiagCode::ECheckpoint, SourceLoc{path, 0, 0},
               std::to_string(check.errors() - kMaxErrorsPerFile) +
                   " more header errors in this file not listed",
               "the file is corrupt");
  }
  if (check.errors() > 0) return std::nullopt;
  return header;
}

std::optional<SafetensorsHeader> parse_safetensors_header(std::string_view json,
                                                          std::int64_t file_size,
                                                          const std::string& path,
                                                          DiagnosticSink& sink) {
  simdjson::dom::parser parser;
  return imp::parse_header_with(parser, json, file_size, path, sink);
}

std::optional<SafetensorsHeader> imp::read_header_with(simdjson::dom::parser& parser,
                                                       FileSystem& fs, const std::string& path,
                                                       DiagnosticSink& sink) {
  std::string error;
  std::int64_t file_size = 0;
  const std::optional<std::string> prefix = fs.read_range(path, 0, 8, file_size, error);
  if (!prefix) {
    sink.error(DiagCode::ECheckpoint, SourceLoc{path, 0, 0}, "cannot read '" + path + "': " + error,
               "check the path and permissions");
    return std::nullopt;
  }
  const std::optional<std::int64_t> length =
      safetensors_header_length(*prefix, file_size, path, sink);
  if (!length) return std::nullopt;
  const std::optional<std::string> json = fs.read_range(path, 8, *length, file_size, error);
  if (!json || static_cast<std::int64_t>(json->size()) != *length) {
    sink.error(DiagCode::ECheckpoint, SourceLoc{path, 0, 0},
               "cannot read the " + std::to_string(*length) + "-byte header of '" + path +
                   "': " + (json ? std::string("file shrank while reading") : error),
               "check the file");
    return std::nullopt;
  }
  return parse_header_with(parser, *json, file_size, path, sink);
}

std::optional<SafetensorsHeader> read_safetensors_header(FileSystem& fs, const std::string& path,
                                                         DiagnosticSink& sink) {
  simdjson::dom::parser parser;
  return imp::read_header_with(parser, fs, path, sink);
}

}  // namespace shardc
