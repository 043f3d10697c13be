// JSON → Node with nlohmann/json's SAX parser through a byte-tracking input
// iterator: the reference the simdjson reader (doc_json.cpp) is tested
// against, and the producer of every JSON syntax and limit diagnostic.
//
// simdjson reports an error code without a position, so load_json re-parses
// a document it rejects here. The iterator records how far the lexer has
// read; a node starts at the first byte after the previous event that is not
// whitespace, ',' or ':' (the lexer reads at most one byte ahead, a
// delimiter, which that rule skips). nlohmann 3.11 reports no node positions
// of its own; its parse_error gives the byte where the lexer stopped.
#include <nlohmann/json.hpp>

#include <iterator>
#include <string>

#include "frontend/doc.hpp"
#include "frontend/doc_json_tree.hpp"
#include "support/utf8.hpp"

namespace shardc::fe {
namespace {

using Sax = nlohmann::json_sax<nlohmann::json>;

bool is_separator(char character) {
  return character == ' ' || character == '\t' || character == '\n' || character == '\r' ||
         character == ',' || character == ':';
}

class TrackingIterator {
 public:
  using iterator_category = std::input_iterator_tag;
  using value_type = char;
  using difference_type = std::ptrdiff_t;
  using pointer = const char*;
  using reference = const char&;

  TrackingIterator(const char* position, const char** track) : p_(position), track_(track) {}
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
  bool operator==(const TrackingIterator& other) const { return p_ == other.p_; }
  bool operator!=(const TrackingIterator& other) const { return p_ != other.p_; }

 private:
  const char* p_;
  const char** track_;
};

class Builder : public Sax {
 public:
  Builder(std::string_view text, const char** track, Document& doc, const DocLimits& limits)
      : text_(text),
        track_(track),
        doc_(doc),
        tree_(doc, text.size()),
        cursor_(text),
        limits_(limits) {}

  bool null() override { return add(Node::Kind::Null, {}, false); }
  bool boolean(bool flag) override {
    return add(Node::Kind::Scalar, flag ? "true" : "false", false);
  }
  bool number_integer(number_integer_t number) override {
    return add(Node::Kind::Scalar, doc_.save(std::to_string(number)), false);
  }
  bool number_unsigned(number_unsigned_t number) override {
    return add(Node::Kind::Scalar, doc_.save(std::to_string(number)), false);
  }
  bool number_float(number_float_t, const string_t& text) override {
    return add(Node::Kind::Scalar, doc_.save(text), false);
  }
  bool string(string_t& text) override { return add(Node::Kind::Scalar, doc_.save(text), true); }
  bool binary(binary_t&) override { return add(Node::Kind::Null, {}, false); }
  bool start_object(std::size_t) override { return open(Node::Kind::Map); }
  bool start_array(std::size_t) override { return open(Node::Kind::Seq); }
  bool end_object() override { return close(); }
  bool end_array() override { return close(); }
  bool key(string_t& k) override {
    auto [line, col] = position();
    tree_.key(doc_.save(k), line, col);
    return true;
  }
  bool parse_error(std::size_t byte, const std::string&,
                   const nlohmann::detail::exception& ex) override {
    std::size_t offset = byte > 0 ? byte - 1 : 0;
    auto [line, col] = line_col(text_, offset);
    error_ = {line, col, clean_message(ex.what())};
    return false;
  }

  void finish() { tree_.finish(); }

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
    while (start < text_.size() && is_separator(text_[start])) ++start;
    prev_ = static_cast<std::size_t>(*track_ - text_.data());
    return cursor_.at(start);
  }

  bool count() {
    if (++nodes_ <= limits_.max_nodes) return true;
    auto [line, col] = cursor_.at(prev_);
    error_ = {line, col,
              "the document has more than " + std::to_string(limits_.max_nodes) + " nodes"};
    return false;
  }

  bool add(Node::Kind kind, std::string_view text, bool quoted) {
    if (!count()) return false;
    tree_.add(json_node(kind, text, quoted, position()));
    return true;
  }

  bool open(Node::Kind kind) {
    if (!count()) return false;
    Node node;
    node.kind = kind;
    std::tie(node.line, node.col) = position();
    if (static_cast<int>(tree_.depth()) >= limits_.max_depth) {
      error_ = {node.line, node.col,
                "nesting deeper than " + std::to_string(limits_.max_depth) + " levels"};
      return false;
    }
    tree_.open(node);
    return true;
  }

  bool close() {
    prev_ = static_cast<std::size_t>(*track_ - text_.data());
    tree_.close();
    return true;
  }

  std::string_view text_;
  const char** track_;
  Document& doc_;
  JsonTree tree_;
  LineCursor cursor_;
  DocLimits limits_;
  std::size_t prev_ = 0;
  std::size_t nodes_ = 0;
};

}  // namespace

std::optional<Document> load_json_tracking(const SourceFile& file, DiagCode code,
                                           DiagnosticSink& sink, const DocLimits& limits) {
  Document doc;
  const char* track = file.text.data();
  Builder builder(file.text, &track, doc, limits);
  TrackingIterator first(file.text.data(), &track);
  TrackingIterator last(file.text.data() + file.text.size(), &track);
  bool ok = false;
  try {
    ok = nlohmann::json::sax_parse(first, last, &builder);
  } catch (const std::exception& e) {
    builder.error_ = Builder::Error{1, 1, e.what()};
  }
  if (ok && !builder.error_) {
    builder.finish();
    return doc;
  }
  Builder::Error err = builder.error_.value_or(Builder::Error{1, 1, "malformed JSON"});
  sink.error(code, SourceLoc{file.path, err.line, err.col},
             "malformed JSON: " + printable(err.message), "fix the JSON syntax at this position");
  return std::nullopt;
}

}  // namespace shardc::fe
