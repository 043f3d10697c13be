// SourcePath: the interning table of location file paths.
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_set>

#include "core/diagnostics.hpp"

namespace shardc {
namespace {

struct Table {
  std::mutex mutex;
  std::unordered_set<std::string> paths;  // nodes never move: stable pointers
};

// Never destroyed: SourceLocs in static storage may outlive any destructor
// order, and the table stays reachable from this pointer (not a leak).
Table& table() {
  static auto* instance = new Table();
  return *instance;
}

const std::string& empty_path() {
  static const auto* empty = new std::string();  // never destroyed, as the table
  return *empty;
}

}  // namespace

SourcePath::SourcePath(std::string_view path) {
  if (path.empty()) return;
  Table& shared = table();
  const std::lock_guard<std::mutex> lock(shared.mutex);
  text_ = &*shared.paths.insert(std::string(path)).first;
}

const std::string& SourcePath::str() const { return text_ != nullptr ? *text_ : empty_path(); }

}  // namespace shardc
