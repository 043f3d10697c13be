// JSON → Node with nlohmann/json's SAX parser. nlohmann 3.11 reports no
// node positions, so the input iterator records how far the lexer has read;
// a node starts at the first byte after the previous event that is not
// whitespace, ',' or ':' (the lexer reads at most one byte ahead, a
// delimiter, which that rule skips).
#include <nlohmann/json.hpp>

#include <iterator>
#include <string>

#include "frontend/doc.hpp"
#include "support/utf8.hpp"

namespace shardc::fe {
namespace {

class TrackingIterator {
 public:
  using iterator_category = std::input_iterator_tag;
  using value_type = char;
  using difference_type = std::ptrdiff_t;
  using pointer = const char*;
  using reference = const char&;

  TrackingIterator(const char* p, const char** track) : p_(p), track_(track) {}
  reference operator*() const { return *p_; }
  TrackingIterator& operator++() {
    ++p_;
    *track_ = p_;
    return *this;
  }
  TrackingIterator operator++(int) {
    TrackingIterator old = *this;
    ++*this;
    return old;
  }
  bool operator==(const TrackingIterator& o) const { return p_ == o.p_; }
  bool operator!=(const TrackingIterator& o) const { return p_ != o.p_; }

 private:
  const char* p_;
  const char** track_;
};

// Advances a (offset, line, col) cursor monotonically: total cost O(bytes).
class LineCursor {
 public:
  explicit LineCursor(std::string_view text) : text_(text) {}
  std::pair<int, int> at(std::size_t offset) {
    for (; pos_ < offset && pos_ < text_.size(); ++pos_) {
      if (text_[pos_] == '\n') {
        ++line_;
        line_start_ = pos_ + 1;
      }
    }
    return {line_, static_cast<int>(pos_ - line_start_) + 1};
  }

 private:
  std::string_view text_;
  std::size_t pos_ = 0;
  std::size_t line_start_ = 0;
  int line_ = 1;
};

class Builder : public nlohmann::json_sax<nlohmann::json> {
 public:
  Builder(std::string_view text, const char** track, const DocLimits& limits)
      : text_(text), track_(track), cursor_(text), limits_(limits) {}

  bool null() override { return add(Node::Kind::Null, {}, false); }
  bool boolean(bool v) override { return add(Node::Kind::Scalar, v ? "true" : "false", false); }
  bool number_integer(number_integer_t v) override {
    return add(Node::Kind::Scalar, std::to_string(v), false);
  }
  bool number_unsigned(number_unsigned_t v) override {
    return add(Node::Kind::Scalar, std::to_string(v), false);
  }
  bool number_float(number_float_t, const string_t& s) override {
    return add(Node::Kind::Scalar, s, false);
  }
  bool string(string_t& s) override { return add(Node::Kind::Scalar, std::move(s), true); }
  bool binary(binary_t&) override { return add(Node::Kind::Null, {}, false); }
  bool start_object(std::size_t) override { return open(Node::Kind::Map); }
  bool start_array(std::size_t) override { return open(Node::Kind::Seq); }
  bool end_object() override { return close(); }
  bool end_array() override { return close(); }
  bool key(string_t& k) override {
    auto [line, col] = position();
    key_ = std::move(k);
    key_line_ = line;
    key_col_ = col;
    return true;
  }
  bool parse_error(std::size_t byte, const std::string&,
                   const nlohmann::detail::exception& ex) override {
    std::size_t offset = byte > 0 ? byte - 1 : 0;
    auto [line, col] = line_col(text_, offset);
    error_ = {line, col, clean_message(ex.what())};
    return false;
  }

  Node root;
  struct Error {
    int line = 0;
    int col = 0;
    std::string message;
  };
  std::optional<Error> error_;

 private:
  static std::string clean_message(std::string what) {
    // "[json.exception.parse_error.101] parse error at line 1, column 2: msg" → "msg"
    std::size_t colon = what.find(": ");
    return colon == std::string::npos ? what : what.substr(colon + 2);
  }

  std::pair<int, int> position() {
    std::size_t start = prev_;
    while (start < text_.size()) {
      char c = text_[start];
      if (c != ' ' && c != '\t' && c != '\n' && c != '\r' && c != ',' && c != ':') break;
      ++start;
    }
    prev_ = static_cast<std::size_t>(*track_ - text_.data());
    return cursor_.at(start);
  }

  Node* attach(Node node) {
    if (stack_.empty()) {
      root = std::move(node);
      return &root;
    }
    Node* parent = stack_.back();
    if (parent->kind == Node::Kind::Map) {
      node.key = std::move(key_);
      node.key_line = key_line_;
      node.key_col = key_col_;
    }
    parent->items.push_back(std::move(node));
    return &parent->items.back();
  }

  bool count() {
    if (++nodes_ <= limits_.max_nodes) return true;
    auto [line, col] = cursor_.at(prev_);
    error_ = {line, col,
              "the document has more than " + std::to_string(limits_.max_nodes) + " nodes"};
    return false;
  }

  bool add(Node::Kind kind, std::string text, bool quoted) {
    if (!count()) return false;
    Node node;
    node.kind = kind;
    node.quoted = quoted;
    node.text = std::move(text);
    std::tie(node.line, node.col) = position();
    attach(std::move(node));
    return true;
  }

  bool open(Node::Kind kind) {
    if (!count()) return false;
    Node node;
    node.kind = kind;
    std::tie(node.line, node.col) = position();
    if (static_cast<int>(stack_.size()) >= limits_.max_depth) {
      error_ = {node.line, node.col,
                "nesting deeper than " + std::to_string(limits_.max_depth) + " levels"};
      return false;
    }
    stack_.push_back(attach(std::move(node)));
    return true;
  }

  bool close() {
    prev_ = static_cast<std::size_t>(*track_ - text_.data());
    stack_.pop_back();
    return true;
  }

  std::string_view text_;
  const char** track_;
  LineCursor cursor_;
  DocLimits limits_;
  std::vector<Node*> stack_;
  std::size_t prev_ = 0;
  std::size_t nodes_ = 0;
  std::string key_;
  int key_line_ = 0;
  int key_col_ = 0;
};

}  // namespace

std::optional<Node> load_json(const SourceFile& file, const char* code, DiagnosticSink& sink,
                              const DocLimits& limits) {
  const char* track = file.text.data();
  Builder builder(file.text, &track, limits);
  TrackingIterator first(file.text.data(), &track);
  TrackingIterator last(file.text.data() + file.text.size(), &track);
  bool ok = false;
  try {
    ok = nlohmann::json::sax_parse(first, last, &builder);
  } catch (const std::exception& e) {
    builder.error_ = Builder::Error{1, 1, e.what()};
  }
  if (ok && !builder.error_) return std::move(builder.root);
  Builder::Error err = builder.error_.value_or(Builder::Error{1, 1, "malformed JSON"});
  sink.error(code, SourceLoc{file.path, err.line, err.col},
             "malformed JSON: " + printable(err.message), "fix the JSON syntax at this position");
  return std::nullopt;
}

}  // namespace shardc::fe
