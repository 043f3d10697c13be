// explain / inspect --match of one expert of a pre-stacked param (docs/experts.md): the
// expert's row and ranks, not "no parameter".
#include <doctest/doctest.h>

#include "driver_fixture.hpp"

using namespace shardc;

namespace {

const char* const kPrestackedModel = R"(format: shardc.model/v1
name: tiny-prestacked
dtype: bfloat16
attributes: {num_experts: 32}
params:
  - {name: model.layers.7.mlp.experts.gate_up_proj, shape: [32, 8, 16]}
  - {name: model.layers.7.mlp.router.weight, shape: [32, 8]}
)";

const char* const kPrestackedRecipe = R"(format: shardc.recipe/v1
mesh:
  - {name: dp, size: 8}
expert_mesh:
  - {name: ep, size: 8}
experts:
  - match: "model.layers.*.mlp.experts.*"
    stacked_dim: 0
    placements: {ep: Shard(0)}
rules:
  - match: "**"
    placements: {}
)";

struct PrestackedFixture : test::DriverFixture {
  PrestackedFixture() {
    fs.files["m.yaml"] = kPrestackedModel;
    fs.files["r.yaml"] = kPrestackedRecipe;
  }
};

}  // namespace

TEST_CASE_FIXTURE(PrestackedFixture, "explain of expert 17 of a pre-stacked param") {
  ExplainOptions options;
  options.common = common();
  options.fqn = "model.layers.7.mlp.experts.17.gate_up_proj";
  CHECK(run_explain(options, fs, out, err) == ExitCode::Ok);
  const std::string text = out.str();
  CHECK(text.find("is expert 17 of pre-stacked param model.layers.7.mlp.experts.gate_up_proj "
                  "(row 17 of dim 0)") != std::string::npos);
  CHECK(text.find("32 experts on dim 0 (the checkpoint's own tensor): "
                  "model.layers.7.mlp.experts.0.gate_up_proj ... "
                  "model.layers.7.mlp.experts.31.gate_up_proj") != std::string::npos);
  // 32 experts over ep 8: expert 17 is on ep rank 4 (experts 16..19), local row 1.
  CHECK(text.find("expert 17 is held by 1 rank (4)") != std::string::npos);
}

TEST_CASE_FIXTURE(PrestackedFixture, "explain refuses experts past the count and padded indices") {
  for (const char* fqn : {"model.layers.7.mlp.experts.32.gate_up_proj",
                          "model.layers.7.mlp.experts.017.gate_up_proj"}) {
    ExplainOptions options;
    options.common = common();
    options.fqn = fqn;
    CHECK(run_explain(options, fs, out, err) == ExitCode::Usage);
    CHECK(err.str().find("no parameter named") != std::string::npos);
  }
}

TEST_CASE_FIXTURE(PrestackedFixture, "inspect --match of one expert lists its row on its rank") {
  InspectOptions options;
  options.common = common();
  options.rank = 4;
  options.match = "model.layers.7.mlp.experts.17.**";
  CHECK(run_inspect(options, fs, out, err) == ExitCode::Ok);
  CHECK(out.str().find("model.layers.7.mlp.experts.gate_up_proj (expert 17 = local row 1)") !=
        std::string::npos);
  InspectOptions other = options;
  other.rank = 5;
  std::ostringstream out5;
  CHECK(run_inspect(other, fs, out5, err) == ExitCode::Ok);
  CHECK(out5.str().find("gate_up_proj") == std::string::npos);
}
