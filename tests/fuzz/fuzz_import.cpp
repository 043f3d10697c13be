// libFuzzer target: arbitrary bytes as checkpoint tensor names, config.json text and a byte size;
// import's YAML writer must round-trip (tools/fuzz).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "fuzz_entry.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  shardc::fuzz::import_input(std::string_view(reinterpret_cast<const char*>(data), size));
  return 0;
}
