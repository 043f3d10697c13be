#include "outputs/output_dir.hpp"

#include <algorithm>

namespace shardc {

std::string rank_file_name(std::int64_t rank, std::int64_t world_size) {
  const std::string last = std::to_string(world_size > 1 ? world_size - 1 : 0);
  std::string digits = std::to_string(rank);
  if (digits.size() < last.size()) digits.insert(0, last.size() - digits.size(), '0');
  return "rank-" + digits + ".json";
}

bool is_rank_file_name(const std::string& name) {
  if (name.size() <= 10 || !name.starts_with("rank-") || !name.ends_with(".json")) return false;
  const std::string digits = name.substr(5, name.size() - 10);
  return std::all_of(digits.begin(), digits.end(),
                     [](char digit) { return digit >= '0' && digit <= '9'; });
}

std::string path_join(const std::string& dir, const std::string& name) {
  if (dir.empty()) return name;
  return dir.back() == '/' ? dir + name : dir + "/" + name;
}

}  // namespace shardc
