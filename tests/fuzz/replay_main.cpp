// Replays the fuzz corpus through the fuzz entry points in the ordinary
// build (CTest fuzz/replay), so every corpus file and every crash found by
// tools/fuzz stays a regression test without clang or libFuzzer.
//
//   shardc_fuzz_replay model|recipe|outputs DIR_OR_FILE...
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "fuzz_entry.hpp"

namespace {

std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::cerr
        << "usage: shardc_fuzz_replay model|recipe|outputs|safetensors|import DIR_OR_FILE...\n";
    return 2;
  }
  const std::string kind = argv[1];
  if (kind != "model" && kind != "recipe" && kind != "outputs" && kind != "safetensors" &&
      kind != "import") {
    std::cerr << "shardc_fuzz_replay: unknown kind '" << kind << "'\n";
    return 2;
  }
  std::vector<std::filesystem::path> files;
  for (int i = 2; i < argc; ++i) {
    const std::filesystem::path arg(argv[i]);
    if (std::filesystem::is_directory(arg)) {
      for (const auto& e : std::filesystem::directory_iterator(arg)) {
        if (e.is_regular_file()) files.push_back(e.path());
      }
    } else {
      files.push_back(arg);
    }
  }
  std::sort(files.begin(), files.end());
  for (const auto& f : files) {
    const std::string bytes = read_file(f);
    if (kind == "model") {
      shardc::fuzz::model_input(bytes);
    } else if (kind == "outputs") {
      shardc::fuzz::output_input(bytes);
    } else if (kind == "safetensors") {
      shardc::fuzz::safetensors_input(bytes);
    } else if (kind == "import") {
      shardc::fuzz::import_input(bytes);
    } else {
      shardc::fuzz::recipe_input(bytes);
    }
  }
  std::cout << "shardc_fuzz_replay: " << files.size() << " " << kind << " inputs, no crash\n";
  return files.empty() ? 1 : 0;
}
