// Tree assembly shared by the two JSON readers (doc_json.cpp, simdjson;
// doc_json_tracking.cpp, nlohmann): values arrive in document order, and the
// children of the open containers wait in one staging vector; closing a
// container moves its children into one Document block.
#pragma once

#include <algorithm>
#include <cstddef>
#include <limits>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

#include "frontend/doc.hpp"
#include "support/large_buffer.hpp"

namespace shardc::fe {

class JsonTree {
 public:
  // `hint`: the text size; reserving address space for the longest list of a
  // typical document avoids copying the staging vector as it grows, and an
  // arena of 4 bytes per text byte holds a typical document's nodes (an
  // inventory needs 2.7) in one block (pages never used are never touched).
  JsonTree(Document& doc, std::size_t hint) : doc_(doc) {
    reserve_large(pending_, std::clamp<std::size_t>(hint / 64, 256, std::size_t{1} << 20));
    if (hint <= std::numeric_limits<std::size_t>::max() / 4) doc_.reserve(hint * 4);
  }

  /// Open containers.
  [[nodiscard]] std::size_t depth() const { return frames_.size(); }

  /// The key (and where it was written) of the next value added to a map.
  void key(std::string_view k, int line, int col) {
    key_ = k;
    key_line_ = line;
    key_col_ = col;
  }
  /// A scalar or null value.
  void add(Node node) {
    if (!frames_.empty() && frames_.back().map) {
      node.set_key(key_);
      node.key_line = key_line_;
      node.key_col = key_col_;
    }
    pending_.push_back(node);
  }
  /// A map or sequence whose items follow until close().
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
  /// Sets the Document's root to the first value added.
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

inline Node json_node(Node::Kind kind, std::string_view text, bool quoted,
                      std::pair<int, int> pos) {
  Node node;
  node.kind = kind;
  node.quoted = quoted;
  node.set_text(text);
  node.line = pos.first;
  node.col = pos.second;
  return node;
}

}  // namespace shardc::fe
