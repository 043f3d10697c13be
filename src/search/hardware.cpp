// Hardware presets for `shardc search --hardware` (src/search/search.hpp).
//
// Figures are the vendors' published datasheet numbers: dense (non-sparse)
// BF16 tensor FLOP/s, HBM size and bandwidth, the intra-node link per GPU
// (NVLink / Infinity Fabric, the bidirectional figure halved: one
// direction) and the node's network per GPU (one NIC per GPU in the
// reference systems). Latencies and the GEMM efficiency are assumptions
// (docs/search.md), the same for every preset. Every field can be
// overridden with a hardware file.
#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "search/search.hpp"
#include "support/edit_distance.hpp"

namespace shardc {
namespace {

constexpr double kTera = 1e12;
constexpr double kGiga = 1e9;
constexpr double kIntraLatency = 3e-6;  ///< per ring step inside a node (assumption)
constexpr double kInterLatency = 1e-5;  ///< per ring step across nodes (assumption)

// A preset as its datasheet states it: dense BF16 TFLOPS, HBM GB and TB/s,
// per-GPU GB/s inside a node and across nodes, and where the figures are from.
struct Datasheet {
  const char* name;
  double tflops;
  double hbm_gb;
  double hbm_tbs;
  double intra_gbs;
  double inter_gbs;
  const char* source;
};

Hardware make(const Datasheet& sheet) {
  Hardware hardware;
  hardware.name = sheet.name;
  hardware.peak_flops = sheet.tflops * kTera;
  hardware.hbm_bytes = sheet.hbm_gb * kGiga;
  hardware.hbm_bandwidth = sheet.hbm_tbs * kTera;
  hardware.gpus_per_node = 8;
  hardware.intra_bandwidth = sheet.intra_gbs * kGiga;
  hardware.inter_bandwidth = sheet.inter_gbs * kGiga;
  hardware.intra_latency = kIntraLatency;
  hardware.inter_latency = kInterLatency;
  hardware.source = sheet.source;
  return hardware;
}

std::vector<Hardware> presets() {
  return {
      make({"a100", 312, 80, 2.039, 300, 25,
            "NVIDIA A100 datasheet (SXM 80GB: 312 TFLOPS BF16 dense, 2,039 GB/s HBM2e, NVLink "
            "600 GB/s); DGX A100: 8x 200 Gb/s HDR InfiniBand"}),
      make({"h100", 989, 80, 3.35, 450, 50,
            "NVIDIA H100 datasheet (SXM: 989 TFLOPS BF16 dense, 3.35 TB/s HBM3, NVLink 900 GB/s); "
            "DGX H100: 8x 400 Gb/s ConnectX-7"}),
      make({"h800", 989, 80, 3.35, 200, 50,
            "NVIDIA H800 SXM (H100 compute, NVLink 400 GB/s); 400 Gb/s InfiniBand per GPU "
            "(DeepSeek-V3 report, arXiv 2412.19437, Sec. 3.1)"}),
      make({"h200", 989, 141, 4.8, 450, 50,
            "NVIDIA H200 datasheet (SXM: 989 TFLOPS BF16 dense, 141 GB HBM3e, 4.8 TB/s, NVLink "
            "900 GB/s); 400 Gb/s NIC per GPU"}),
      make({"b200", 2250, 180, 8.0, 900, 50,
            "NVIDIA DGX B200 datasheet (72 PFLOPS FP8 training / 8 GPUs = 4.5 FP8, 2.25 BF16 "
            "dense; 1,440 GB HBM3e / 8; 64 TB/s / 8; NVLink 5 1.8 TB/s); 8x 400 Gb/s ConnectX-7"}),
      make({"mi300x", 1307.4, 192, 5.3, 448, 50,
            "AMD Instinct MI300X datasheet (1,307.4 TFLOPS BF16 dense, 192 GB HBM3, 5.3 TB/s, "
            "Infinity Fabric 896 GB/s aggregate per GPU); 400 Gb/s NIC per GPU"}),
  };
}

}  // namespace

std::optional<Hardware> hardware_preset(std::string_view name) {
  // Case-insensitive: `H100` is the h100 preset.
  std::string lower(name);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
  for (Hardware& preset : presets()) {
    if (preset.name == lower) return preset;
  }
  return std::nullopt;
}

std::vector<std::string> hardware_preset_names() {
  std::vector<std::string> names;
  for (const Hardware& preset : presets()) names.push_back(preset.name);
  return names;
}

}  // namespace shardc

namespace shardc {

namespace {

constexpr std::array<std::string_view, 11> kHardwareKeys = {
    "preset",         "name",      "peak_tflops", "hbm_gb",           "hbm_tbs",
    "gpus_per_node",  "intra_gbs", "inter_gbs",   "intra_latency_us", "inter_latency_us",
    "gemm_efficiency"};

std::string joined(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& name : names) out += (out.empty() ? "" : ", ") + name;
  return out;
}

}  // namespace

std::optional<Hardware> parse_hardware_text(std::string_view text, std::string& error,
                                            std::string* hint) {
  const auto set_hint = [hint](const std::string& value) {
    if (hint != nullptr) *hint = value;
  };
  std::vector<std::string> keys(kHardwareKeys.begin(), kHardwareKeys.end());
  set_hint("keys: " + joined(keys));
  struct Line {
    int number;
    std::string key;
    std::string value;
  };
  std::vector<Line> lines;
  int number = 0;
  std::size_t pos = 0;
  std::optional<Hardware> hw = hardware_preset("h100");
  auto trim = [](std::string_view field) {
    const std::size_t first = field.find_first_not_of(" \t\r");
    if (first == std::string_view::npos) return std::string();
    const std::size_t last = field.find_last_not_of(" \t\r");
    return std::string(field.substr(first, last - first + 1));
  };
  while (pos <= text.size()) {
    std::size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    ++number;
    if (const std::size_t hash = line.find('#'); hash != std::string_view::npos)
      line = line.substr(0, hash);
    const std::string body = trim(line);
    if (body.empty()) continue;
    const std::size_t colon = body.find(':');
    if (colon == std::string::npos) {
      error = "line " + std::to_string(number) + ": expected `key: value`, got `" + body + "`";
      return std::nullopt;
    }
    Line parsed_line{number, trim(body.substr(0, colon)), trim(body.substr(colon + 1))};
    // Unknown keys first, in line order (a model file given by mistake is named at its
    // first line, not at a repeated key further down).
    if (std::find(kHardwareKeys.begin(), kHardwareKeys.end(), parsed_line.key) ==
        kHardwareKeys.end()) {
      error = "line " + std::to_string(number) + ": unknown key `" + parsed_line.key + "`";
      std::string_view closest;
      std::size_t best = 3;
      for (const std::string_view key : kHardwareKeys) {
        const std::size_t distance = edit_distance(parsed_line.key, key, 2);
        if (distance < best) {
          best = distance;
          closest = key;
        }
      }
      if (!closest.empty()) error += ": did you mean `" + std::string(closest) + "`?";
      return std::nullopt;
    }
    for (const Line& seen : lines) {
      if (seen.key == parsed_line.key) {
        error = "line " + std::to_string(number) + ": `" + parsed_line.key +
                "` is given twice (first on line " + std::to_string(seen.number) + ")";
        return std::nullopt;
      }
    }
    lines.push_back(std::move(parsed_line));
  }
  if (lines.empty()) {
    error = "the hardware file holds no `key: value` line (start from `preset: h100`)";
    return std::nullopt;
  }
  for (const Line& line : lines) {
    if (line.key != "preset") continue;
    hw = hardware_preset(line.value);
    if (!hw) {
      error = "line " + std::to_string(line.number) + ": unknown preset `" + line.value + "`";
      set_hint("presets: " + joined(hardware_preset_names()));
      return std::nullopt;
    }
  }
  for (const Line& line : lines) {
    if (line.key == "preset") continue;
    if (line.key == "name") {
      hw->name = line.value;
      continue;
    }
    double parsed = 0;
    try {
      std::size_t used = 0;
      parsed = std::stod(line.value, &used);
      if (used != line.value.size() || !(parsed > 0) || parsed > 1e9)
        throw std::invalid_argument("range");
    } catch (const std::exception&) {
      error = "line " + std::to_string(line.number) + ": `" + line.key + "` needs " +
              (line.key == "gpus_per_node" ? "a whole number from 1 to 1024"
                                           : "a positive number below 1e9") +
              ", got `" + line.value + "`";
      return std::nullopt;
    }
    if (line.key == "peak_tflops") {
      hw->peak_flops = parsed * kTera;
    } else if (line.key == "hbm_gb") {
      hw->hbm_bytes = parsed * kGiga;
    } else if (line.key == "hbm_tbs") {
      hw->hbm_bandwidth = parsed * kTera;
    } else if (line.key == "gpus_per_node") {
      if (parsed != std::floor(parsed) || parsed > 1024) {
        error = "line " + std::to_string(line.number) +
                ": `gpus_per_node` is a whole number from 1 to 1024, got `" + line.value + "`";
        return std::nullopt;
      }
      hw->gpus_per_node = static_cast<std::int64_t>(parsed);
    } else if (line.key == "intra_gbs") {
      hw->intra_bandwidth = parsed * kGiga;
    } else if (line.key == "inter_gbs") {
      hw->inter_bandwidth = parsed * kGiga;
    } else if (line.key == "intra_latency_us") {
      hw->intra_latency = parsed * 1e-6;
    } else if (line.key == "inter_latency_us") {
      hw->inter_latency = parsed * 1e-6;
    } else if (line.key == "gemm_efficiency") {
      if (parsed > 1) {
        error = "line " + std::to_string(line.number) +
                ": `gemm_efficiency` is a fraction of the peak in (0, 1], got `" + line.value + "`";
        return std::nullopt;
      }
      hw->gemm_efficiency = parsed;
    }
  }
  hw->source += " (overridden by a hardware file)";
  return hw;
}

}  // namespace shardc
