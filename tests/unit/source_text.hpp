// Text helpers the unit tests that plan shipped models share: a repository
// file's bytes and a whole-text substitution to derive recipe variants.
#pragma once

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace shardc::test {

/// The bytes of `repo_path`, a path relative to the source tree (SHARDC_SOURCE_DIR);
/// "" for a file that cannot be read (the parse that follows then fails loudly).
inline std::string slurp(const std::string& repo_path) {
  std::ifstream in(std::filesystem::path(SHARDC_SOURCE_DIR) / repo_path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

/// `text` with every occurrence of `from` replaced by `to`, left to right, never
/// rescanning replaced text.
inline std::string replace_all(std::string text, const std::string& from, const std::string& to) {
  for (std::size_t at = text.find(from); at != std::string::npos;
       at = text.find(from, at + to.size())) {
    text.replace(at, from.size(), to);
  }
  return text;
}

}  // namespace shardc::test
