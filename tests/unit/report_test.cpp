// Report views: SI formatting, table/CSV/Markdown rendering and the JSON fields.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "neuralcost/hardware/database.hpp"
#include "neuralcost/models/reference.hpp"
#include "neuralcost/report/profile_views.hpp"
#include "neuralcost/report/views.hpp"
#include "report/safe_text.hpp"
#include "report/si_format.hpp"
#include "report/tabular.hpp"

namespace neuralcost {
namespace {

using ::testing::HasSubstr;

Analysis transformer(std::int64_t batch) {
  ReferenceOptions o;
  o.batch = batch;
  return analyze(build_reference_model(o), HardwareDatabase::builtin().get("h100-sxm"), {batch});
}

TEST(SiFormatTest, ThreeSignificantDigitsWithPrefixes) {
  EXPECT_EQ(report::si(26216960, "FLOP"), "26.2 MFLOP");
  EXPECT_EQ(report::si(1.2e-5, "s"), "12.0 µs");
  EXPECT_EQ(report::si(999.96, "B"), "1.00 kB");
  EXPECT_EQ(report::si(0, "B"), "0 B");
  EXPECT_EQ(report::si(3.35e12, "B/s"), "3.35 TB/s");
  EXPECT_EQ(report::percent(0.1234), "12.3%");
}

TEST(SiFormatTest, SecondsTakeOnlySecondsToNanosecondsAndCountsGetSeparators) {
  EXPECT_EQ(report::si(16200, "s"), "16,200 s");    // never "16.2 ks"
  EXPECT_EQ(report::si(3.06e-10, "s"), "0.31 ns");  // never "306 ps"
  EXPECT_EQ(report::si(1.5, "s"), "1.50 s");
  EXPECT_EQ(report::si(0.0123, "s"), "12.3 ms");
  EXPECT_EQ(report::si(0, "s"), "0 s");
  EXPECT_EQ(report::grouped(25507944), "25,507,944");
  EXPECT_EQ(report::grouped(999), "999");
  EXPECT_EQ(report::grouped(1000), "1,000");
}

TEST(TabularTest, CsvUsesRawValuesAndEscapes) {
  report::Table t;
  t.headers = {"name", "value"};
  t.raw_headers = {"name", "value_bytes"};
  t.rows = {{{"a,b", ""}, {"1.00 kB", "1000"}}};
  EXPECT_EQ(report::render_table(t, Format::kCsv), "name,value_bytes\n\"a,b\",1000\n");
  EXPECT_EQ(report::render_table(t, Format::kMarkdown), "| name | value   |\n|------|---------|\n| a,b  | 1.00 kB |\n");
  // an interval is one column on screen and two numbers in CSV (a packed "-0.07:-0.04" was text a
  // spreadsheet would take for a formula, so it was escaped)
  t.headers = {"name", "change"};
  t.raw_headers = {"name", "change_low", "change_high"};
  t.rows = {{{"x", ""}, {"-6.8% .. -4.3%", "", {"-0.068", "-0.043"}}}};
  EXPECT_EQ(report::render_table(t, Format::kCsv), "name,change_low,change_high\nx,-0.068,-0.043\n");
  EXPECT_EQ(report::render_table(t, Format::kTable).find("-0.068"), std::string::npos);
}

TEST(SafeTextTest, NamesWithMarkupStayText) {
  const std::string name = "<img src=x onerror=\"alert('x')\"></script>&amp;";
  EXPECT_EQ(report::html_text(name),
            "&lt;img src=x onerror=&quot;alert(&#39;x&#39;)&quot;&gt;&lt;/script&gt;&amp;amp;");
  EXPECT_EQ(report::html_text("a\x1b[31mb\tc\n"), "a[31mb\tc\n");  // no control characters in a page
  // JSON in a <script> block: no '<' that could close it, and it parses back to the same string
  const nlohmann::json doc = {{"name", name}, {"sep", "\u2028"}};
  const std::string text = report::json_for_script(doc);
  EXPECT_EQ(text.find('<'), std::string::npos);
  EXPECT_EQ(text.find('>'), std::string::npos);
  EXPECT_EQ(text.find('&'), std::string::npos);
  EXPECT_EQ(nlohmann::json::parse(text), doc);
  EXPECT_EQ(report::markdown_text("a <b>*x*</b> [l](u) `c` | #"),
            "a &lt;b&gt;\\*x\\*&lt;/b&gt; \\[l\\](u) \\`c\\` \\| \\#");
  EXPECT_EQ(report::markdown_safe("a|<b>&"), "a\\|&lt;b&gt;&amp;");
}

TEST(SafeTextTest, BytesThatAreNotUtf8AreReplacedAndSaidSoInEveryProfileOutput) {
  // a worker's stderr cut at 500 bytes in the middle of a character, after a long profile
  ProfileRun run;
  run.backend = "python";
  run.mode = "eager";
  run.model = "ff";
  run.outcome = Outcome::failure("the worker exited: caf\xc3");
  const HardwareSpec& hw = HardwareDatabase::builtin().get("h100-sxm");
  const nlohmann::json j = nlohmann::json::parse(render_profile({run}, hw, Format::kJson));
  EXPECT_EQ(j["runs"][0]["error"], "the worker exited: caf\xEF\xBF\xBD");
  ASSERT_TRUE(j.contains("warnings")) << j.dump();
  ASSERT_EQ(j["warnings"].size(), 1u) << j.dump();
  EXPECT_THAT(j["warnings"][0].get<std::string>(),
              HasSubstr("2 strings from outside (a name, a path, a worker's output) held bytes that are not UTF-8, "
                        "replaced by U+FFFD (the first at /runs/0/error)"));
  const std::string table = render_profile({run}, hw, Format::kTable);
  EXPECT_THAT(table, HasSubstr("\nerror: the worker exited: caf\xEF\xBF\xBD\n"));
  EXPECT_THAT(table, ::testing::EndsWith("\nwarning: text from outside (a name, a path, a worker's output) held bytes "
                                         "that are not UTF-8; they are shown as U+FFFD\n"));
  // a document with warnings of its own (cost, compare) gets one more; a clean one none
  const nlohmann::json cost = nlohmann::json::parse(report::json_text({{"warnings", {"no price"}}, {"m\xff", 1}}));
  ASSERT_EQ(cost["warnings"].size(), 2u);
  EXPECT_THAT(cost["warnings"][1].get<std::string>(), HasSubstr("1 string from outside"));
  EXPECT_EQ(cost["m\xEF\xBF\xBD"], 1);
  EXPECT_FALSE(nlohmann::json::parse(render_profile({}, hw, Format::kJson)).contains("warnings"));
  EXPECT_THAT(render_profile({}, hw, Format::kTable), ::testing::Not(HasSubstr("UTF-8")));
}

TEST(AnalysisViewTest, TableShowsEveryLayerAndTotals) {
  const std::string table = render_analysis(transformer(32), Format::kTable);
  EXPECT_THAT(table, HasSubstr("transformer (batch 32, fp32) on NVIDIA H100 SXM5 80GB [h100-sxm]"));
  EXPECT_THAT(table, HasSubstr("encoder1.linear2"));
  EXPECT_THAT(table, HasSubstr("839 MFLOP in contractions"));
  EXPECT_THAT(table, HasSubstr("parameters: 397,834"));
  EXPECT_THAT(table, HasSubstr("lower bound:"));
}

TEST(AnalysisViewTest, JsonCarriesExactCountsPerOp) {
  const nlohmann::json j = analysis_json(transformer(32));
  EXPECT_EQ(j["totals"]["contraction_flops"].get<std::uint64_t>(), 32u * 26216960);
  EXPECT_EQ(j["totals"]["parameter_count"].get<std::uint64_t>(), 397834u);
  EXPECT_TRUE(j["unmodeled"].empty());
  EXPECT_TRUE(j["totals"]["complete"].get<bool>());
  std::uint64_t sum = 0;
  for (const auto& op : j["ops"]) {
    for (const char* field : {"name", "kind", "flops", "bytes_read", "bytes_written", "parameter_bytes",
                              "arithmetic_intensity", "bound", "lower_bound_seconds"}) {
      EXPECT_TRUE(op.contains(field)) << field;
    }
    EXPECT_THAT(op["bound"].get<std::string>(), ::testing::AnyOf("compute", "memory"));
    sum += op["flops"].get<std::uint64_t>();
  }
  EXPECT_EQ(sum, j["totals"]["flops"].get<std::uint64_t>());
  EXPECT_EQ(j["hardware"]["id"], "h100-sxm");
}

TEST(HardwareViewTest, ShowJsonIsAValidSpecFile) {
  const HardwareSpec& h = HardwareDatabase::builtin().get("h100-pcie");
  const std::string text = render_hardware(h, Format::kJson);
  const HardwareSpec back = parse_hardware_spec(text, "roundtrip.json");
  EXPECT_EQ(back.id, h.id);
  EXPECT_EQ(back.peak_flops_per_second, h.peak_flops_per_second);
  EXPECT_EQ(back.memory_bandwidth_bytes_per_second, h.memory_bandwidth_bytes_per_second);
  EXPECT_EQ(back.sources, h.sources);
}

}  // namespace
}  // namespace neuralcost
