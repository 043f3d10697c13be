// Small model and recipe texts and a runner for in-process driver tests.
#pragma once

#include <sstream>
#include <string>

#include "fake_file_system.hpp"
#include "shardc/driver.hpp"

namespace shardc::test {

inline const char* const kModel = R"(format: shardc.model/v1
name: tiny
dtype: float32
params:
  - {name: a.weight, shape: [5, 3]}
  - {name: b.weight, shape: [4]}
)";

inline const char* const kRecipe = R"(format: shardc.recipe/v1
mesh:
  - {name: dp, size: 2}
  - {name: tp, size: 2}
rules:
  - match: "a.*"
    placements: {tp: Shard(0)}
  - match: "**"
    placements: {}
)";

/// A recipe whose second rule matches nothing (W-UNUSED-RULE).
inline const char* const kRecipeUnusedRule = R"(format: shardc.recipe/v1
mesh:
  - {name: tp, size: 2}
rules:
  - match: "a.*"
    placements: {tp: Shard(0)}
  - match: "nothing.here"
    placements: {}
  - match: "**"
    placements: {}
)";

/// A recipe that leaves b.weight uncovered (E-UNCOVERED).
inline const char* const kRecipeUncovered = R"(format: shardc.recipe/v1
mesh:
  - {name: tp, size: 2}
rules:
  - match: "a.*"
    placements: {tp: Shard(0)}
)";

struct DriverFixture {
  FakeFileSystem fs;
  std::ostringstream out;
  std::ostringstream err;

  DriverFixture() {
    fs.files["m.yaml"] = kModel;
    fs.files["r.yaml"] = kRecipe;
  }

  [[nodiscard]] CommonOptions common(const std::string& recipe = "r.yaml") const {
    CommonOptions o;
    o.model_path = "m.yaml";
    o.recipe_path = recipe;
    return o;
  }

  [[nodiscard]] CompileOptions compile_opts(const std::string& dir = "out") const {
    CompileOptions o;
    o.common = common();
    o.out_dir = dir;
    o.jobs = 2;
    return o;
  }
};

}  // namespace shardc::test
