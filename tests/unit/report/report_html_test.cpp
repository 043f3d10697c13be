// The report pages (src/report): escaping, the figures against the memory engine's, bounded
// size at 16,384 ranks. The page in a real browser: tests/browser/report_test.mjs.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "backend/backend.hpp"
#include "frontend/frontend.hpp"
#include "memory/memory.hpp"
#include "outputs/readback.hpp"
#include "planner/planner.hpp"
#include "report/html.hpp"
#include "report/report.hpp"

using namespace shardc;

namespace {

std::string slurp(const std::string& rel) {
  std::ifstream in(std::filesystem::path(SHARDC_SOURCE_DIR) / rel, std::ios::binary);
  std::ostringstream stream;
  stream << in.rdbuf();
  return stream.str();
}

Plan plan_of(const std::string& model_path, const std::string& model_text,
             const std::string& recipe_text) {
  DiagnosticSink sink;
  auto model = parse_model({model_path, model_text}, sink);
  auto recipe = parse_recipe({"recipe.yaml", recipe_text}, sink);
  REQUIRE(model);
  REQUIRE(recipe);
  auto plan = build_plan(*model, *recipe, sink);
  REQUIRE(plan);
  return *plan;
}

Plan shipped(const std::string& model, const std::string& recipe) {
  const std::string path = "plans/" + model + ".model.yaml";
  return plan_of(path, slurp(path), slurp("plans/" + recipe + ".recipe.yaml"));
}

std::size_t count(const std::string& text, const std::string& what) {
  std::size_t found = 0;
  for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1))
    ++found;
  return found;
}

std::string page_of(const Plan& plan, const MemoryReport& memory,
                    const std::vector<std::int64_t>& ranks) {
  DiagnosticSink sink;
  SourceMap sources;
  PlanReportInput in;
  in.title = "test";
  in.plan = &plan;
  in.num_params = static_cast<std::int64_t>(plan.params.size());
  in.largest = largest_params(plan);
  in.memory = &memory;
  for (std::int64_t rank : ranks) in.ranks.push_back({rank, rank_params(plan, rank), ""});
  in.diagnostics = &sink;
  in.sources = &sources;
  return render_plan_report_html(in);
}

}  // namespace

TEST_CASE("report escaping: element text, attributes and JSON inside a script element") {
  CHECK(report::escape("<script>a&b\"c'</script>") ==
        "&lt;script&gt;a&amp;b&quot;c&#39;&lt;/script&gt;");
  CHECK(report::json_string("</script>\"\\\n") == "\"\\u003c/script\\u003e\\\"\\\\\\u000a\"");
}

TEST_CASE("report: a param and a model named with HTML render as text, no element") {
  const Plan plan = plan_of("m.yaml",
                            "format: shardc.model/v1\nname: \"<b>m</b>\"\ndtype: float32\n"
                            "params:\n  - {name: \"a.<script>x</script>.w\", shape: [8, 4]}\n",
                            "format: shardc.recipe/v1\nmesh:\n  - {name: tp, size: 2}\nrules:\n"
                            "  - match: \"**\"\n    placements: {tp: Shard(0)}\n");
  const MemoryReport memory = compute_memory(plan);
  const std::string page = page_of(plan, memory, {0});
  CHECK(count(page, "<script") == 2);  // the data element and the inline script
  CHECK(count(page, "<b>") == 0);
  CHECK(count(page, "a.&lt;script&gt;x&lt;/script&gt;.w") >= 2);  // largest params, rank 0's table
  CHECK(count(page, "&lt;b&gt;m&lt;/b&gt;") >= 2);
}

TEST_CASE("report: the bars' min / median / max totals are stage_memory's") {
  const Plan plan = shipped("deepseek-v3", "deepseek-v3-pp16-ep64");
  const auto memory = memory_classes(plan);
  REQUIRE(memory);
  const std::string page = page_of(plan, *memory, {});
  const std::regex bar(
      "<g class=\"bar\" data-stage=\"(\\d+)\" data-stat=\"(\\w+)\" data-rank=\"(\\d+)\" "
      "data-bytes=\"(\\d+)\"");
  std::map<std::string, std::int64_t> bars;
  for (auto it = std::sregex_iterator(page.begin(), page.end(), bar); it != std::sregex_iterator();
       ++it) {
    bars[(*it)[1].str() + "/" + (*it)[2].str()] = std::stoll((*it)[4].str());
    // The bar's rank is of its stage, and its total is that rank's.
    const std::int64_t rank = std::stoll((*it)[3].str());
    CHECK(plan.stage_of_rank(rank) == std::stoi((*it)[1].str()));
    CHECK(memory->at(rank).total == std::stoll((*it)[4].str()));
  }
  const auto stages = stage_memory(plan, *memory);
  REQUIRE(bars.size() == 3 * stages.size());
  for (const StageMemory& stage : stages) {
    const std::string k = std::to_string(stage.stage) + "/";
    CHECK(bars[k + "min"] == stage.total.min);
    CHECK(bars[k + "median"] == stage.total.median);
    CHECK(bars[k + "max"] == stage.total.max);
  }
}

TEST_CASE("report: 16,384 ranks stay small (runs of equal stage, one class index per rank)") {
  const Plan plan = shipped("llama-3.1-405b", "llama-3.1-405b-dp2048-tp8");
  REQUIRE(plan.world_size == 16384);
  const auto memory = memory_classes(plan);
  REQUIRE(memory);
  const std::string page = page_of(plan, *memory, {0, 16383});
  CHECK(page.size() < std::size_t{2} << 20);
  CHECK(count(page, "class=\"cell\"") <= 128);  // one stage: one run per grid row
  CHECK(count(page, "class=\"rank-detail\"") == 2);
}

TEST_CASE("report OUTDIR: plan.json's and the rank files' rows and memory are the plan's") {
  const Plan plan = shipped("torchtitan-llama3-8b", "torchtitan-llama3-8b-pp-fsdp-tp");
  REQUIRE(plan.num_stages > 1);
  const std::vector<PlannedBuffer> buffers = plan_buffers(plan);
  const std::vector<BufferRankBytes> buffer_bytes = buffer_rank_bytes(plan, buffers);
  const MemoryReport memory = compute_memory(plan, buffer_bytes);
  std::string error;
  const auto file = readback::parse_plan_file(
      render_plan_json(plan, rank_bytes(plan), buffer_bytes, &memory), error);
  REQUIRE_MESSAGE(file, error);
  REQUIRE(file->per_rank_memory);
  // The outline: world, meshes and stages as the plan has them.
  const Plan outline = plan_outline(*file);
  CHECK(outline.model_name == plan.model_name);
  CHECK(outline.num_stages == plan.num_stages);
  CHECK(outline.pipeline_axis == plan.pipeline_axis);
  for (std::int64_t r = 0; r < plan.world_size; ++r)
    CHECK(outline.stage_of_rank(r) == plan.stage_of_rank(r));
  // The largest params, row by row.
  const std::vector<ReportParam> want = largest_params(plan);
  const std::vector<ReportParam> got = largest_params(*file);
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    CHECK(got[i].name == want[i].name);
    CHECK(got[i].bytes == want[i].bytes);
    CHECK(got[i].placements == want[i].placements);
    CHECK(got[i].rule == want[i].rule);
    CHECK(got[i].stage == want[i].stage);
    CHECK(got[i].shard_classes == want[i].shard_classes);
  }
  // Every rank file's memory, formed into classes: the same stage statistics and peak.
  std::vector<readback::RankMemoryFile> files;
  for (std::int64_t r = 0; r < plan.world_size; ++r) {
    const std::string text = render_rank_json(plan, buffers, r, memory.at(r));
    auto rm = readback::parse_rank_memory_file(text, error);
    REQUIRE_MESSAGE(rm, error);
    CHECK(rm->rank == r);
    files.push_back(*rm);
    if (r == 0) {  // one rank's params table, row by row
      auto rank_file = readback::parse_rank_file(text, error);
      REQUIRE_MESSAGE(rank_file, error);
      const ReportRank rows = report_rank(*rank_file);
      const std::vector<ReportRankParam> plan_rows = rank_params(plan, 0);
      REQUIRE(rows.params.size() == plan_rows.size());
      for (std::size_t i = 0; i < rows.params.size(); ++i) {
        CHECK(rows.params[i].name == plan_rows[i].name);
        CHECK(rows.params[i].local_shape == plan_rows[i].local_shape);
        CHECK(rows.params[i].global_offset == plan_rows[i].global_offset);
        CHECK(rows.params[i].bytes == plan_rows[i].bytes);
        CHECK(rows.params[i].shares_storage_with == plan_rows[i].shares_storage_with);
      }
    }
  }
  const MemoryReport read = memory_of_rank_files(files, file->per_rank_memory->activations);
  CHECK(read.peak == memory.peak);
  CHECK(read.peak_ranks.to_string() == memory.peak_ranks.to_string());
  CHECK(read.peak_stage == memory.peak_stage);
  const auto want_stages = stage_memory(plan, memory);
  const auto got_stages = stage_memory(outline, read);
  REQUIRE(got_stages.size() == want_stages.size());
  for (std::size_t s = 0; s < got_stages.size(); ++s) {
    CHECK(got_stages[s].num_ranks == want_stages[s].num_ranks);
    for (std::size_t k = 0; k < kMemoryKinds; ++k) {
      CHECK(got_stages[s].kinds[k].min == want_stages[s].kinds[k].min);
      CHECK(got_stages[s].kinds[k].median == want_stages[s].kinds[k].median);
      CHECK(got_stages[s].kinds[k].max == want_stages[s].kinds[k].max);
    }
    CHECK(got_stages[s].total.median == want_stages[s].total.median);
  }
  // plan.json's world summary: the total's max is the peak.
  CHECK(file->per_rank_memory->kinds.back().first == "total");
  CHECK(file->per_rank_memory->kinds.back().second.max == memory.peak);
}
