// The report pages (src/report): escaping, the figures against the memory engine's, bounded
// size at 16,384 ranks. The page in a real browser: tests/browser/report_test.mjs.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "frontend/frontend.hpp"
#include "memory/memory.hpp"
#include "planner/planner.hpp"
#include "report/html.hpp"
#include "report/report.hpp"

using namespace shardc;

namespace {

std::string slurp(const std::string& rel) {
  std::ifstream in(std::filesystem::path(SHARDC_SOURCE_DIR) / rel, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

Plan plan_of(const std::string& model_path, const std::string& model_text,
             const std::string& recipe_text) {
  DiagnosticSink sink;
  auto m = parse_model({model_path, model_text}, sink);
  auto r = parse_recipe({"recipe.yaml", recipe_text}, sink);
  REQUIRE(m);
  REQUIRE(r);
  auto plan = build_plan(*m, *r, sink);
  REQUIRE(plan);
  return *plan;
}

Plan shipped(const std::string& model, const std::string& recipe) {
  const std::string path = "plans/" + model + ".model.yaml";
  return plan_of(path, slurp(path), slurp("plans/" + recipe + ".recipe.yaml"));
}

std::size_t count(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

std::string page_of(const Plan& plan, const MemoryReport& m, std::vector<ReportRank> ranks) {
  DiagnosticSink sink;
  SourceMap sources;
  PlanReportInput in;
  in.title = "test";
  in.plan = &plan;
  in.memory = &m;
  in.ranks = std::move(ranks);
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
  const MemoryReport m = compute_memory(plan);
  const std::string page = page_of(plan, m, {{0, ""}});
  CHECK(count(page, "<script") == 2);  // the data element and the inline script
  CHECK(count(page, "<b>") == 0);
  CHECK(count(page, "a.&lt;script&gt;x&lt;/script&gt;.w") >= 2);  // largest params, rank 0's table
  CHECK(count(page, "&lt;b&gt;m&lt;/b&gt;") >= 2);
}

TEST_CASE("report: the bars' min / median / max totals are stage_memory's") {
  const Plan plan = shipped("deepseek-v3", "deepseek-v3-pp16-ep64");
  const auto m = memory_classes(plan);
  REQUIRE(m);
  const std::string page = page_of(plan, *m, {});
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
    CHECK(m->at(rank).total == std::stoll((*it)[4].str()));
  }
  const auto stages = stage_memory(plan, *m);
  REQUIRE(bars.size() == 3 * stages.size());
  for (const StageMemory& s : stages) {
    const std::string k = std::to_string(s.stage) + "/";
    CHECK(bars[k + "min"] == s.total.min);
    CHECK(bars[k + "median"] == s.total.median);
    CHECK(bars[k + "max"] == s.total.max);
  }
}

TEST_CASE("report: 16,384 ranks stay small (runs of equal stage, one class index per rank)") {
  const Plan plan = shipped("llama-3.1-405b", "llama-3.1-405b-dp2048-tp8");
  REQUIRE(plan.world_size == 16384);
  const auto m = memory_classes(plan);
  REQUIRE(m);
  std::vector<ReportRank> ranks;
  for (std::int64_t r : {0, 16383}) ranks.push_back({r, ""});
  const std::string page = page_of(plan, *m, ranks);
  CHECK(page.size() < std::size_t{2} << 20);
  CHECK(count(page, "class=\"cell\"") <= 128);  // one stage: one run per grid row
  CHECK(count(page, "class=\"rank-detail\"") == 2);
}
