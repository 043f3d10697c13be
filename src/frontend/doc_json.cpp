// JSON → Node with nlohmann/json's SAX parser.
//
// nlohmann 3.11 reports no node positions. The fast path (load_json) feeds the
// parser the contiguous text (its pointer input adapter) and follows the SAX
// events through the text with a cursor of its own: each event's token starts
// at the first byte after the previous token that is not whitespace, ',' or
// ':' and has a known extent (a string's decoded length tells where an
// unescaped string ends, and that string is then viewed, not copied). nlohmann
// has validated a token before its event, so the cursor never needs to parse.
//
// The tracking path (load_json_tracking) reads through an input iterator that
// records how far the lexer has read; a node starts at the first byte after the
// previous event that is not whitespace, ',' or ':' (the lexer reads at most one
// byte ahead, a delimiter, which that rule skips). Both give the same positions
// (tests/unit/frontend/doc_json_test.cpp); every syntax or limit diagnostic
// comes from the tracking path, which the fast path re-runs on any failure.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstring>
#include <iterator>
#include <string>

#include "frontend/doc.hpp"
#include "support/utf8.hpp"

namespace shardc::fe {
namespace {

using Sax = nlohmann::json_sax<nlohmann::json>;

// Children of the open containers wait in one staging vector; closing a
// container moves its children into one Document block.
class Assembler {
 public:
  // `hint`: the text size; reserving address space for the longest list of a
  // typical document avoids copying the staging vector as it grows (pages
  // that are never used are never touched).
  Assembler(Document& doc, std::size_t hint) : doc_(doc) {
    pending_.reserve(std::clamp<std::size_t>(hint / 64, 256, std::size_t{1} << 20));
  }

  [[nodiscard]] std::size_t depth() const { return frames_.size(); }
  [[nodiscard]] bool in_map() const { return !frames_.empty() && frames_.back().map; }

  void key(std::string_view k, int line, int col) {
    key_ = k;
    key_line_ = line;
    key_col_ = col;
  }
  void add(Node node) {
    if (in_map()) {
      node.set_key(key_);
      node.key_line = key_line_;
      node.key_col = key_col_;
    }
    pending_.push_back(node);
  }
  void open(Node node) {
    add(node);
    frames_.push_back(Frame{pending_.size() - 1, node.kind == Node::Kind::Map});
  }
  void close() {
    std::size_t index = frames_.back().index;
    frames_.pop_back();
    std::span<const Node> children(pending_.data() + index + 1, pending_.size() - index - 1);
    pending_[index].set_items(doc_.store(children));
    pending_.resize(index + 1);
  }
  void finish() {
    if (!pending_.empty()) doc_.root = pending_.front();
  }

 private:
  struct Frame {
    std::size_t index;
    bool map;
  };
  Document& doc_;
  std::vector<Node> pending_;
  std::vector<Frame> frames_;
  std::string_view key_;
  int key_line_ = 0;
  int key_col_ = 0;
};

Node make(Node::Kind kind, std::string_view text, bool quoted, std::pair<int, int> pos) {
  Node node;
  node.kind = kind;
  node.quoted = quoted;
  node.set_text(text);
  node.line = pos.first;
  node.col = pos.second;
  return node;
}

bool is_separator(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == ',' || c == ':';
}

// ---------------------------------------------------------------------------
// Fast path.

class FastBuilder : public Sax {
 public:
  FastBuilder(std::string_view text, Document& doc, const DocLimits& limits)
      : text_(text), doc_(doc), tree_(doc, text.size()), cursor_(text), limits_(limits) {}

  bool null() override { return literal(Node::Kind::Null, {}, 4); }
  bool boolean(bool v) override {
    return v ? literal(Node::Kind::Scalar, "true", 4) : literal(Node::Kind::Scalar, "false", 5);
  }
  bool number_integer(number_integer_t) override { return number(true); }
  bool number_unsigned(number_unsigned_t) override { return number(false); }
  bool number_float(number_float_t, const string_t&) override { return number(false); }
  bool string(string_t& s) override {
    if (!count()) return false;
    std::size_t start = token_start();
    std::pair<int, int> at = cursor_.at(start);
    std::string_view view = string_token(start, s);
    if (failed_) return false;
    tree_.add(make(Node::Kind::Scalar, view, true, at));
    return true;
  }
  bool binary(binary_t&) override { return literal(Node::Kind::Null, {}, 0); }
  bool start_object(std::size_t) override { return open(Node::Kind::Map, '{'); }
  bool start_array(std::size_t) override { return open(Node::Kind::Seq, '['); }
  bool end_object() override { return close(); }
  bool end_array() override { return close(); }
  bool key(string_t& k) override {
    std::size_t start = token_start();
    auto [line, col] = cursor_.at(start);
    std::string_view view = string_token(start, k);
    if (failed_) return false;
    tree_.key(view, line, col);
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override {
    return fail();
  }

  [[nodiscard]] bool failed() const { return failed_; }
  void finish() { tree_.finish(); }

 private:
  bool fail() {
    failed_ = true;
    return false;
  }

  bool count() { return ++nodes_ <= limits_.max_nodes || fail(); }

  std::size_t token_start() const {
    std::size_t i = pos_;
    while (i < text_.size() && is_separator(text_[i])) ++i;
    return i;
  }

  // The text of the string token at `start` whose decoded value is `s`, and
  // the cursors moved past it (a valid string token holds no raw newline, so
  // the line cursor need not look at its bytes).
  std::string_view string_token(std::size_t start, const std::string& s) {
    const char* p = text_.data();
    std::size_t n = s.size();
    if (start >= text_.size() || p[start] != '"') {
      fail();
      return {};
    }
    std::size_t close = start + 1 + n;
    // No backslash in the first n raw bytes: they are the decoded value, so
    // a quote right after them is the closing one.
    if (close < text_.size() && p[close] == '"' &&
        std::none_of(p + start + 1, p + close, [](char c) { return c == '\\'; })) {
      pos_ = close + 1;
      cursor_.skip_to(pos_);
      return text_.substr(start + 1, n);
    }
    std::size_t i = start + 1;
    while (i < text_.size() && p[i] != '"') i += p[i] == '\\' ? 2 : 1;
    if (i >= text_.size()) {
      fail();
      return {};
    }
    pos_ = i + 1;
    cursor_.skip_to(pos_);
    return doc_.save(s);
  }

  bool literal(Node::Kind kind, std::string_view text, std::size_t length) {
    if (!count()) return false;
    std::size_t start = token_start();
    pos_ = start + length;
    tree_.add(make(kind, text, false, cursor_.at(start)));
    return true;
  }

  // Integers render as std::to_string would (only "-0" differs from the text);
  // floats keep their text.
  bool number(bool signed_integer) {
    if (!count()) return false;
    std::size_t start = token_start();
    std::size_t end = start;
    while (end < text_.size()) {
      char c = text_[end];
      if ((c < '0' || c > '9') && c != '-' && c != '+' && c != '.' && c != 'e' && c != 'E') break;
      ++end;
    }
    pos_ = end;
    std::string_view view = text_.substr(start, end - start);
    if (signed_integer && view == "-0") view = "0";
    tree_.add(make(Node::Kind::Scalar, view, false, cursor_.at(start)));
    return true;
  }

  bool open(Node::Kind kind, char bracket) {
    if (!count()) return false;
    std::size_t start = token_start();
    if (static_cast<int>(tree_.depth()) >= limits_.max_depth) return fail();
    std::size_t at = start;  // the root may follow a byte order mark
    while (at < text_.size() && text_[at] != bracket) ++at;
    if (at == text_.size()) return fail();
    pos_ = at + 1;
    Node node;
    node.kind = kind;
    std::tie(node.line, node.col) = cursor_.at(start);
    tree_.open(node);
    return true;
  }

  bool close() {
    std::size_t at = token_start();
    pos_ = at + 1;
    tree_.close();
    return true;
  }

  std::string_view text_;
  Document& doc_;
  Assembler tree_;
  LineCursor cursor_;
  DocLimits limits_;
  std::size_t pos_ = 0;
  std::size_t nodes_ = 0;
  bool failed_ = false;
};

// ---------------------------------------------------------------------------
// Tracking path.

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
  bool boolean(bool v) override { return add(Node::Kind::Scalar, v ? "true" : "false", false); }
  bool number_integer(number_integer_t v) override {
    return add(Node::Kind::Scalar, doc_.save(std::to_string(v)), false);
  }
  bool number_unsigned(number_unsigned_t v) override {
    return add(Node::Kind::Scalar, doc_.save(std::to_string(v)), false);
  }
  bool number_float(number_float_t, const string_t& s) override {
    return add(Node::Kind::Scalar, doc_.save(s), false);
  }
  bool string(string_t& s) override { return add(Node::Kind::Scalar, doc_.save(s), true); }
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
    tree_.add(make(kind, text, quoted, position()));
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
  Assembler tree_;
  LineCursor cursor_;
  DocLimits limits_;
  std::size_t prev_ = 0;
  std::size_t nodes_ = 0;
};

}  // namespace

std::optional<Document> load_json(const SourceFile& file, const char* code, DiagnosticSink& sink,
                                  const DocLimits& limits) {
  Document doc;
  bool ok = false;
  {
    FastBuilder builder(file.text, doc, limits);
    const char* first = file.text.data();
    try {
      ok =
          nlohmann::json::sax_parse(first, first + file.text.size(), &builder) && !builder.failed();
    } catch (const std::exception&) {
      ok = false;
    }
    if (ok) builder.finish();
  }
  if (ok) return doc;
  return load_json_tracking(file, code, sink, limits);
}

std::optional<Document> load_json_tracking(const SourceFile& file, const char* code,
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
