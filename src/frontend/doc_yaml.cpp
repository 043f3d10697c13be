// YAML → Node with yaml-cpp. yaml-cpp shares aliased nodes, so a small file
// can describe a huge tree ("billion laughs"); the copy counts every node it
// visits and stops past a budget proportional to the file size.
//
// yaml-cpp reads a flat model (one entry per param) at ~3 MB/s (tools/bench
// D2; libfyaml's event parser measured ~7x faster on the same file, the JSON
// reader ~30x), so a large flat YAML model gets W-FLAT-YAML steering to the
// compact `repeat` form.
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "frontend/doc.hpp"
#include "frontend/yaml_errors.hpp"
#include "support/utf8.hpp"

namespace shardc::fe {
namespace {

struct LimitError {
  YAML::Mark mark;
  std::string message;
};

class Converter {
 public:
  Converter(Document& doc, std::size_t max_nodes, int max_depth)
      : doc_(doc), max_nodes_(max_nodes), max_depth_(max_depth) {}

  // Throws LimitError when a limit is broken.
  Node convert(const YAML::Node& in, int depth) {
    if (++visited_ > max_nodes_) {
      throw LimitError{in.Mark(), "the document expands to more than " +
                                      std::to_string(max_nodes_) + " nodes (YAML aliases?)"};
    }
    if (depth > max_depth_) {
      throw LimitError{in.Mark(), "nesting deeper than " + std::to_string(max_depth_) + " levels"};
    }
    Node out;
    set_mark(out, in.Mark());
    switch (in.Type()) {
      case YAML::NodeType::Scalar:
        out.kind = Node::Kind::Scalar;
        out.set_text(doc_.save(in.Scalar()));
        out.quoted = in.Tag() == "!";
        break;
      case YAML::NodeType::Sequence:
        out.kind = Node::Kind::Seq;
        convert_seq(in, out, depth);
        break;
      case YAML::NodeType::Map:
        out.kind = Node::Kind::Map;
        convert_map(in, out, depth);
        break;
      default:
        out.kind = Node::Kind::Null;
        break;
    }
    return out;
  }

 private:
  static void set_mark(Node& out, const YAML::Mark& mark) {
    out.line = std::max(mark.line, 0) + 1;
    out.col = std::max(mark.column, 0) + 1;
  }

  void convert_seq(const YAML::Node& in, Node& out, int depth) {
    std::vector<Node> items;
    items.reserve(in.size());
    for (const YAML::Node& item : in) items.push_back(convert(item, depth + 1));
    out.set_items(doc_.store(items));
  }

  void convert_map(const YAML::Node& in, Node& out, int depth) {
    std::vector<Node> items;
    items.reserve(in.size());
    for (auto it = in.begin(); it != in.end(); ++it) {
      YAML::Node key = it->first;  // a copy: `it->` yields a temporary proxy
      if (!key.IsScalar()) throw LimitError{key.Mark(), "a mapping key must be a plain string"};
      Node value = convert(YAML::Node(it->second), depth + 1);
      value.set_key(doc_.save(key.Scalar()));
      value.key_line = std::max(key.Mark().line, 0) + 1;
      value.key_col = std::max(key.Mark().column, 0) + 1;
      if (value.is_null() && value.line > value.key_line) {
        // `key:` with nothing after the colon: yaml-cpp marks the empty value at the
        // next token (the next line); a diagnostic about it belongs on the key.
        value.line = value.key_line;
        value.col = value.key_col;
      }
      items.push_back(value);
    }
    out.set_items(doc_.store(items));
  }

  Document& doc_;
  std::size_t max_nodes_;
  int max_depth_;
  std::size_t visited_ = 0;
};

// Plain params (not `repeat` groups) above which a YAML model gets W-FLAT-YAML:
// about 1 MB of YAML, a third of a second of yaml-cpp.
constexpr std::size_t kFlatYamlParams = 10'000;

void hint_flat_model(const Document& doc, const SourceFile& file, DiagnosticSink& sink) {
  const Node* params = doc.root.find("params");
  if (params == nullptr || !params->is_seq()) return;
  std::size_t flat = 0;
  for (const Node& entry : params->items())
    flat += entry.is_map() && entry.find("repeat") == nullptr;
  if (flat <= kFlatYamlParams) return;
  char size[32];
  std::snprintf(size, sizeof size, "%.1f MB", static_cast<double>(file.text.size()) / 1e6);
  sink.warning(DiagCode::WFlatYaml, SourceLoc{file.path, params->key_line, params->key_col},
               "this YAML model lists " + std::to_string(flat) + " params one by one (" + size +
                   "); YAML this size is slow to read (a few MB/s)",
               "write repeated layers as `repeat` groups (`shardc import` writes that compact "
               "form from a checkpoint), or pass the model as a JSON inventory");
}

SourceLoc mark_loc(const std::string& file, const YAML::Mark& mark) {
  return SourceLoc{file, std::max(mark.line, 0) + 1, std::max(mark.column, 0) + 1};
}

}  // namespace

std::optional<Document> load_yaml(const SourceFile& file, DiagCode code, DiagnosticSink& sink,
                                  const DocLimits& limits) {
  std::size_t budget =
      std::min(limits.max_nodes, shardc::limits::kYamlNodesPerByte * file.text.size() +
                                     shardc::limits::kYamlNodesExtra);
  try {
    YAML::Node root = YAML::Load(file.text);
    Document doc;
    Converter converter(doc, budget, limits.max_depth);
    doc.root = converter.convert(root, 0);
    if (code == DiagCode::EModel) hint_flat_model(doc, file, sink);
    return doc;
  } catch (const LimitError& e) {
    sink.error(code, mark_loc(file.path, e.mark), e.message,
               "simplify the document (see docs/limits.md)");
  } catch (const YAML::Exception& e) {
    if (auto help = explain_yaml_error(file.text, e.mark.line, e.mark.column, e.msg)) {
      sink.error(code, SourceLoc{file.path, help->line, help->column},
                 printable(help->message) + " (yaml-cpp: " + printable(e.msg) + ")", help->hint);
      return std::nullopt;
    }
    sink.error(code, mark_loc(file.path, e.mark), "malformed YAML: " + printable(e.msg),
               "fix the YAML syntax at this position");
  } catch (const std::exception& e) {
    sink.error(code, SourceLoc{file.path, 1, 1}, "malformed YAML: " + printable(e.what()),
               "fix the YAML syntax");
  }
  return std::nullopt;
}

}  // namespace shardc::fe
