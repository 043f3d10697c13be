// JSON → Node with simdjson's On-Demand API.
//
// simdjson's stage 1 (runtime-dispatched SIMD in libsimdjson) validates
// UTF-8, finds every structural byte and rejects unclosed strings and
// unescaped control characters; the walk below then visits every value, so
// On-Demand checks the whole grammar (commas, colons, brackets, literals) and
// every number (get_double: its grammar and that it is finite). The walk
// consumes every value, because On-Demand does not validate what it skips.
// Positions are byte offsets: each value's raw_json_token() and each key's
// raw pointer point into the padded text (the source or a copy), at the token's first
// byte; a LineCursor turns the increasing offsets into line:col in one pass.
//
// Text views the source where it can: numbers as written (only "-0" reads
// "0", as nlohmann renders integers), keys and strings without a backslash;
// strings with escapes are unescaped by simdjson and saved in the Document.
//
// simdjson reports an error code without a position, and its messages are not
// ours: on any error or broken limit, load_json re-parses with
// load_json_tracking (doc_json_tracking.cpp), which reports the diagnostic
// with its exact line:col. Valid documents never take that path.
#include <simdjson.h>

#include <array>
#include <limits>
#include <string_view>

#include "frontend/doc.hpp"
#include "frontend/doc_json_tree.hpp"
#include "support/dtype.hpp"
#include "support/large_buffer.hpp"

namespace shardc::fe {
namespace {

namespace od = simdjson::ondemand;

constexpr std::string_view kBom = "\xEF\xBB\xBF";

std::string_view trim_right(std::string_view text) {
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t' || text.back() == '\n' ||
                           text.back() == '\r')) {
    text.remove_suffix(1);
  }
  return text;
}

class SimdBuilder {
 public:
  // `text`: the source; `skip`: bytes of it left out of `padded` (a BOM).
  // `shortcut`: read a canonical top-level `params` list into it (doc.hpp);
  // the tree is then small, so no large arena is set aside.
  SimdBuilder(std::string_view text, std::size_t skip, simdjson::padded_string_view padded,
              Document& doc, const DocLimits& limits, ParamsShortcut* shortcut = nullptr)
      : text_(text),
        buffer_(padded.data()),
        skip_(skip),
        doc_(doc),
        tree_(doc, shortcut != nullptr ? 0 : text.size()),
        cursor_(text),
        limits_(limits),
        shortcut_(shortcut) {}

  // False on malformed text, a broken limit or a root that is not a
  // container (load_document only passes texts that start with '{').
  bool build(simdjson::padded_string_view padded) {
    od::parser parser;
    od::document json;
    if (parser.iterate(padded).get(json) != simdjson::SUCCESS) return false;
    od::value root;
    if (json.get_value().get(root) != simdjson::SUCCESS) return false;
    // The root's position is the first byte of the text when a BOM starts it.
    if (!value(root, 0, skip_ > 0 ? std::size_t{0} : std::string_view::npos)) return false;
    // Anything after the root value (trailing garbage) leaves a token.
    const char* rest = nullptr;
    if (json.current_location().get(rest) != simdjson::OUT_OF_BOUNDS) return false;
    tree_.finish();
    return true;
  }

 private:
  std::size_t offset(const char* position) const {
    return skip_ + static_cast<std::size_t>(position - buffer_);
  }

  // One value; `depth`: containers around it; `at`: its offset if not its token's.
  bool value(od::value element, int depth, std::size_t at = std::string_view::npos) {
    if (++nodes_ > limits_.max_nodes) return false;
    od::json_type type{};
    if (element.type().get(type) != simdjson::SUCCESS) return false;
    std::string_view raw = element.raw_json_token();
    if (at == std::string_view::npos) at = offset(raw.data());
    switch (type) {
      case od::json_type::object:
        return object(element, depth, at);
      case od::json_type::array:
        return array(element, depth, at);
      case od::json_type::string:
        return string(element, raw, at);
      case od::json_type::number:
        return number(element, raw, at);
      case od::json_type::boolean: {
        bool flag = false;
        if (element.get_bool().get(flag) != simdjson::SUCCESS) return false;
        tree_.add(json_node(Node::Kind::Scalar, flag ? "true" : "false", false, cursor_.at(at)));
        return true;
      }
      case od::json_type::null: {
        bool is_null = false;
        if (element.is_null().get(is_null) != simdjson::SUCCESS || !is_null) return false;
        tree_.add(json_node(Node::Kind::Null, {}, false, cursor_.at(at)));
        return true;
      }
    }
    return false;
  }

  bool open(Node::Kind kind, int depth, std::size_t at) {
    if (depth >= limits_.max_depth) return false;
    Node node;
    node.kind = kind;
    std::tie(node.line, node.col) = cursor_.at(at);
    tree_.open(node);
    return true;
  }

  bool object(od::value element, int depth, std::size_t at) {
    od::object obj;
    if (element.get_object().get(obj) != simdjson::SUCCESS || !open(Node::Kind::Map, depth, at)) {
      return false;
    }
    for (auto entry : obj) {
      od::field field;
      if (std::move(entry).get(field) != simdjson::SUCCESS || !key(field)) return false;
      // Only the first `params` (the one root.find gives parse_model).
      if (depth == 0 && shortcut_ != nullptr && !params_seen_ && key_ == "params") {
        params_seen_ = true;
        od::json_type type{};
        if (field.value().type().get(type) != simdjson::SUCCESS) return false;
        if (type == od::json_type::array) {
          if (!params_list(field.value(), depth + 1)) return false;
          continue;
        }
      }
      if (!value(field.value(), depth + 1)) return false;
    }
    tree_.close();
    return true;
  }

  bool array(od::value element, int depth, std::size_t at) {
    od::array arr;
    if (element.get_array().get(arr) != simdjson::SUCCESS || !open(Node::Kind::Seq, depth, at)) {
      return false;
    }
    for (auto entry : arr) {
      od::value item;
      if (std::move(entry).get(item) != simdjson::SUCCESS || !value(item, depth + 1)) return false;
    }
    tree_.close();
    return true;
  }

  bool key(od::field& field) {
    // raw(): the first byte after the opening quote. Stage 1 found the
    // closing quote, so the scan stops inside the string.
    const char* first = field.key().raw();
    const char* scan = first;
    while (*scan != '"' && *scan != '\\') ++scan;
    auto [line, col] = cursor_.at(offset(first) - 1);
    if (*scan == '"') {
      key_ = text_.substr(offset(first), static_cast<std::size_t>(scan - first));
      tree_.key(key_, line, col);
      return true;
    }
    std::string_view unescaped;
    if (field.unescaped_key().get(unescaped) != simdjson::SUCCESS) return false;
    key_ = doc_.save(unescaped);
    tree_.key(key_, line, col);
    return true;
  }

  // The top-level `params` array straight into shortcut_->params; false on
  // anything not canonical (doc.hpp) or a broken limit (the caller then builds
  // the whole tree without the shortcut). The nodes the tree would hold are
  // counted alike. The tree gets an empty list at the array's position.
  bool params_list(od::value element, int depth) {
    // The entries (depth + 1) and their shapes (depth + 2) must open.
    if (++nodes_ > limits_.max_nodes || depth + 2 >= limits_.max_depth) return false;
    std::size_t at = offset(element.raw_json_token().data());
    std::pair<int, int> pos = cursor_.at(at);
    od::array arr;
    if (element.get_array().get(arr) != simdjson::SUCCESS) return false;
    std::vector<Param>& out = shortcut_->params;
    // At least 36 bytes per entry: room for all without a move (pages never
    // used are never touched).
    reserve_large(out, text_.size() / 36 + 1);
    for (auto entry : arr) {
      od::value item;
      if (std::move(entry).get(item) != simdjson::SUCCESS || !param_entry(item)) return false;
    }
    shortcut_->taken = true;
    Node list;
    list.kind = Node::Kind::Seq;
    std::tie(list.line, list.col) = pos;
    tree_.open(list);
    tree_.close();
    return true;
  }

  // A quoted string without a backslash, consumed; its text is `body`.
  static bool plain_string(od::value element, std::string_view& body) {
    std::string_view raw = element.raw_json_token();
    if (raw.empty() || raw.front() != '"') return false;
    body = raw.substr(1, raw.rfind('"') - 1);
    od::raw_json_string consumed;
    return body.find('\\') == std::string_view::npos &&
           element.get_raw_json_string().get(consumed) == simdjson::SUCCESS;
  }

  // A name check_name_text passes without a word and without a template
  // (model_params.cpp): printable ASCII, no brace, no empty segment.
  static bool canonical_name(std::string_view name) {
    if (name.empty() || name.front() == '.' || name.back() == '.') return false;
    char prev = 0;
    for (char character : name) {
      auto code = static_cast<unsigned char>(character);
      if (code <= 0x20 || code >= 0x7F || character == '{' || character == '}' ||
          (character == '.' && prev == '.'))
        return false;
      prev = character;
    }
    return true;
  }

  // At most kMaxDims unsigned decimal extents (no sign, no leading zero,
  // < 2^63) whose product (zeros counted as 1) stays below kMaxNumel, as
  // parse_shape.
  bool canonical_shape(od::value element, Shape& shape) {
    constexpr std::size_t kMaxDims = 8;
    if (++nodes_ > limits_.max_nodes) return false;
    od::array arr;
    if (element.get_array().get(arr) != simdjson::SUCCESS) return false;
    std::int64_t product = 1;
    std::array<std::int64_t, kMaxDims> extents{};
    std::size_t dims = 0;
    for (auto entry : arr) {
      od::value item;
      if (std::move(entry).get(item) != simdjson::SUCCESS || ++nodes_ > limits_.max_nodes ||
          dims == kMaxDims) {
        return false;
      }
      std::string_view digits = trim_right(item.raw_json_token());
      // 19 digits fit 64 unsigned bits.
      if (digits.empty() || digits.size() > 19 || (digits.front() == '0' && digits.size() > 1)) {
        return false;
      }
      std::uint64_t value = 0;
      for (char digit : digits) {
        if (digit < '0' || digit > '9') return false;
        value = value * 10 + static_cast<std::uint64_t>(digit - '0');
      }
      std::uint64_t consumed = 0;
      if (value > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()) ||
          item.get_uint64().get(consumed) != simdjson::SUCCESS || consumed != value) {
        return false;
      }
      auto extent = static_cast<std::int64_t>(value);
      std::int64_t factor = extent == 0 ? 1 : extent;
      if (__builtin_mul_overflow(product, factor, &product) || product >= limits::kMaxNumel) {
        return false;
      }
      extents[dims++] = extent;
    }
    shape.assign(extents.begin(), extents.begin() + static_cast<std::ptrdiff_t>(dims));
    return true;
  }

  bool param_entry(od::value item) {
    if (++nodes_ > limits_.max_nodes) return false;
    std::size_t at = offset(item.raw_json_token().data());
    std::pair<int, int> pos = cursor_.at(at);
    od::object obj;
    if (item.get_object().get(obj) != simdjson::SUCCESS) return false;
    Param param;
    bool has_name = false;
    bool has_shape = false;
    bool has_dtype = false;
    for (auto entry : obj) {
      od::field field;
      if (std::move(entry).get(field) != simdjson::SUCCESS) return false;
      const char* first = field.key().raw();
      const char* end = first;
      while (*end != '"' && *end != '\\') ++end;
      if (*end != '"') return false;
      std::string_view field_name(first, static_cast<std::size_t>(end - first));
      std::string_view text;
      if (field_name == "name" && !has_name) {
        has_name = true;
        if (++nodes_ > limits_.max_nodes || !plain_string(field.value(), text) ||
            !canonical_name(text)) {
          return false;
        }
        param.name = std::string(text);
      } else if (field_name == "shape" && !has_shape) {
        has_shape = true;
        if (!canonical_shape(field.value(), param.shape)) return false;
      } else if (field_name == "dtype" && !has_dtype) {
        has_dtype = true;
        if (++nodes_ > limits_.max_nodes || !plain_string(field.value(), text)) return false;
        std::optional<DType> dtype = parse_dtype(text);
        if (!dtype) return false;
        param.dtype = *dtype;
        param.requires_grad = can_require_grad(*dtype);  // as model_params.cpp
      } else {
        return false;
      }
    }
    if (!has_name || !has_shape || !has_dtype) return false;
    param.loc = SourceLoc{shortcut_->file, pos.first, pos.second};
    shortcut_->params.push_back(std::move(param));
    return true;
  }

  // `raw`: the token from its opening quote, with any whitespace after it.
  // Every value is consumed (get_string here too): On-Demand checks the
  // separators after a value it parsed, but skips an unconsumed value by
  // counting brackets only (`["x": 1}` would pass).
  // A string without a backslash is consumed as a raw string (the same
  // checks, no unescaped copy in the parser's buffer) and viewed in place.
  bool string(od::value element, std::string_view raw, std::size_t at) {
    std::string_view body = raw.substr(1, raw.rfind('"') - 1);
    std::string_view text;
    if (body.find('\\') == std::string_view::npos) {
      od::raw_json_string consumed;
      if (element.get_raw_json_string().get(consumed) != simdjson::SUCCESS) return false;
      text = text_.substr(at + 1, body.size());
    } else {
      std::string_view unescaped;
      if (element.get_string().get(unescaped) != simdjson::SUCCESS) return false;
      text = doc_.save(unescaped);
    }
    tree_.add(json_node(Node::Kind::Scalar, text, true, cursor_.at(at)));
    return true;
  }

  // get_double checks the grammar and finiteness (integers past 64 bits are
  // accepted as nlohmann accepts them, as floats); the text stays as written.
  bool number(od::value element, std::string_view raw, std::size_t at) {
    double unused = 0;
    if (element.get_double().get(unused) != simdjson::SUCCESS) return false;
    std::string_view written = text_.substr(at, trim_right(raw).size());
    if (written == "-0") written = "0";
    tree_.add(json_node(Node::Kind::Scalar, written, false, cursor_.at(at)));
    return true;
  }

  std::string_view text_;
  const char* buffer_;
  std::size_t skip_;
  Document& doc_;
  JsonTree tree_;
  LineCursor cursor_;
  DocLimits limits_;
  ParamsShortcut* shortcut_;
  std::string_view key_;  ///< the last key read
  bool params_seen_ = false;
  std::size_t nodes_ = 0;
};

}  // namespace

std::optional<Document> load_json(const SourceFile& file, DiagCode code, DiagnosticSink& sink,
                                  const DocLimits& limits, ParamsShortcut* shortcut) {
  std::string_view text = file.text;
  // On-Demand 3.0 does not skip a byte order mark; nlohmann does.
  std::size_t skip = text.starts_with(kBom) ? kBom.size() : 0;
  {
    // The read's spare capacity is the padding (FileSystem kReadSlackBytes);
    // without it (or after a BOM) the text is copied into a padded buffer.
    simdjson::padded_string copy;
    simdjson::padded_string_view padded;
    if (skip == 0 && file.text.capacity() - file.text.size() >= simdjson::SIMDJSON_PADDING) {
      padded = simdjson::padded_string_view(text.data(), text.size(), file.text.capacity());
    } else {
      copy = simdjson::padded_string(text.substr(skip));
      padded = copy;
    }
    if (shortcut != nullptr) {
      Document doc;
      if (SimdBuilder(text, skip, padded, doc, limits, shortcut).build(padded)) return doc;
      // Not canonical (or not valid): the whole tree, as without the shortcut.
      shortcut->taken = false;
      std::vector<Param>().swap(shortcut->params);
    }
    Document doc;
    if (SimdBuilder(text, skip, padded, doc, limits).build(padded)) return doc;
  }
  return load_json_tracking(file, code, sink, limits);
}

}  // namespace shardc::fe
