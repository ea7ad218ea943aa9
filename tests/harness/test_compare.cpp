// `compare` on golden result files (tests/data/compare, written by make_golden.py there): verdicts,
// matching, renderings and the exit codes of the built binary.
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli/exit_codes.h"
#include "harness/compare.h"
#include "core/error.h"
#include "core/fsutil.h"
#include "core/process.h"

using namespace kb;
using stats::Verdict;

namespace {

const std::string kData = std::string(KBISECT_SOURCE_DIR) + "/tests/data/compare/";

const CaseComparison* find(const Comparison& c, const std::string& needle) {
  for (const auto& cc : c.cases)
    if (cc.key.find(needle) != std::string::npos) return &cc;
  return nullptr;
}

RunResult kbisect(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {std::string(KBISECT_BINARY_DIR) + "/kbisect"};
  argv.insert(argv.end(), args.begin(), args.end());
  RunOptions o;
  o.timeout_s = 120;
  return run_process(argv, o);
}

}  // namespace

TEST(Compare, OurResultFiles) {
  auto c = compare_sets(load_sample_set(kData + "base.json"), load_sample_set(kData + "new.json"), {});
  ASSERT_EQ(c.cases.size(), 6u);
  auto same = find(c, "/f32/512x512x512");
  ASSERT_TRUE(same && same->compared);
  EXPECT_EQ(same->decision.verdict, Verdict::same);
  EXPECT_EQ(same->base_toolchain, "clang-14");
  EXPECT_EQ(same->new_toolchain, "clang-19");
  EXPECT_EQ(same->decision.n_base, 200);
  auto worse = find(c, "/f32/256x256x256");
  ASSERT_TRUE(worse && worse->compared);
  EXPECT_EQ(worse->decision.verdict, Verdict::worse);
  EXPECT_NEAR(worse->decision.effect_pct(), 0.03, 0.005);  // generated as +3%
  EXPECT_GT(worse->decision.ci_lo_pct(), 0.0);
  auto better = find(c, "/f32/384x384x384");
  ASSERT_TRUE(better && better->compared);
  EXPECT_EQ(better->decision.verdict, Verdict::better);
  EXPECT_NEAR(better->decision.effect_pct(), 1 / 1.05 - 1, 0.005);
  auto failed = find(c, "/f32/128x128x128");
  ASSERT_TRUE(failed);
  EXPECT_FALSE(failed->compared);
  EXPECT_NE(failed->reason.find("new failed: kernel crashed"), std::string::npos) << failed->reason;
  auto only = find(c, "/f32/640x640x640");
  ASSERT_TRUE(only);
  EXPECT_FALSE(only->compared);
  EXPECT_EQ(only->reason, "only in base");
  auto noisy = find(c, "/bf16/512x512x512");
  ASSERT_TRUE(noisy && noisy->compared);
  EXPECT_EQ(noisy->decision.verdict, Verdict::unsure);  // 10 samples at 5% noise cannot settle 0.5%
  EXPECT_EQ(c.count(Verdict::worse), 1);
  EXPECT_EQ(exit_code_for(c), 1);
  ASSERT_TRUE(c.has_geomean);
  EXPECT_EQ(c.geomean.cases, 4);

  CompareOptions never;
  never.fail_on_slower = false;
  EXPECT_EQ(exit_code_for(compare_sets(load_sample_set(kData + "base.json"), load_sample_set(kData + "new.json"), never)), 0);
  // A file against itself: every compared case is the same, nothing is worse.
  auto self = compare_sets(load_sample_set(kData + "base.json"), load_sample_set(kData + "base.json"), {});
  EXPECT_EQ(self.count(Verdict::worse) + self.count(Verdict::better), 0);
  EXPECT_EQ(exit_code_for(self), 0);
}

TEST(Compare, GoogleBenchmarkJson) {
  auto base = load_sample_set(kData + "gbench_base.json");
  EXPECT_EQ(base.format, "google-benchmark");
  ASSERT_EQ(base.entries.size(), 3u);  // aggregates ignored, repetitions grouped by run_name
  for (const auto& e : base.entries) EXPECT_EQ(e.samples_s.size(), 9u) << e.key;
  // time_unit conversion: every file holds ~10 ms / ~1.3 ms / ~0.17 ms cases in ms / us / ns.
  EXPECT_NEAR(stats::median(base.entries[0].samples_s), 10e-3, 0.2e-3);
  EXPECT_NEAR(stats::median(base.entries[1].samples_s), 1.3e-3, 0.03e-3);
  EXPECT_NEAR(stats::median(base.entries[2].samples_s), 0.17e-3, 0.004e-3);
  auto c = compare_sets(base, load_sample_set(kData + "gbench_new.json"), {});
  auto slow = find(c, "BM_matmul/256");
  ASSERT_TRUE(slow && slow->compared);
  EXPECT_EQ(slow->decision.verdict, Verdict::worse);  // +4% at 0.5% noise, 9 repetitions each
  EXPECT_EQ(slow->decision.n_base, 9);
  auto err = find(c, "BM_matmul/128");
  ASSERT_TRUE(err);
  EXPECT_FALSE(err->compared);
  EXPECT_NE(err->reason.find("kernel returned 1"), std::string::npos);
  auto same = find(c, "BM_matmul/512");
  ASSERT_TRUE(same && same->compared);
  EXPECT_NE(same->decision.verdict, Verdict::worse);
  EXPECT_EQ(exit_code_for(c), 1);
  // cpu_time is read when asked for.
  auto cpu = load_sample_set(kData + "gbench_base.json", "cpu_time");
  EXPECT_NEAR(cpu.entries[0].samples_s[0] / base.entries[0].samples_s[0], 1.001, 1e-9);
}

TEST(Compare, SeveralToolchainsPerKeyMatchOnToolchain) {
  auto c = compare_sets(load_sample_set(kData + "multi_base.json"), load_sample_set(kData + "multi_new.json"), {});
  ASSERT_EQ(c.notes.size(), 1u);
  EXPECT_NE(c.notes[0].find("key + toolchain"), std::string::npos);
  ASSERT_EQ(c.cases.size(), 2u);
  auto c19 = find(c, "/clang-19");
  ASSERT_TRUE(c19 && c19->compared);
  EXPECT_EQ(c19->decision.verdict, Verdict::worse);  // generated +4%
  auto c14 = find(c, "/clang-14");
  ASSERT_TRUE(c14 && c14->compared);
  EXPECT_NE(c14->decision.verdict, Verdict::worse);
}

TEST(Compare, BadInputNamesTheFile) {
  try {
    load_sample_set(kData + "not_results.json");
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("not_results.json"), std::string::npos);
  }
  EXPECT_THROW(load_sample_set(kData + "broken.json"), InputError);
  EXPECT_THROW(load_sample_set(kData + "does_not_exist.json"), InputError);
  EXPECT_THROW(load_sample_set(kData + "gbench_base.json", "wall_time"), InputError);
}

TEST(Compare, Renderings) {
  auto c = compare_sets(load_sample_set(kData + "base.json"), load_sample_set(kData + "new.json"), {});
  auto table = render_table(c);
  EXPECT_NE(table.find("geomean (4 cases)"), std::string::npos) << table;
  EXPECT_NE(table.find("not compared: cpu/matmul_tiled"), std::string::npos);
  EXPECT_NE(table.find("1 worse, 1 better, 1 same, 1 unsure, 2 not compared"), std::string::npos) << table;
  auto md = render_markdown(c);
  EXPECT_NE(md.find("| case | base | new | effect | CI |"), std::string::npos);
  EXPECT_NE(md.find("**worse**"), std::string::npos);
  auto j = comparison_to_json(c);
  EXPECT_EQ(j["exit_code"], 1);
  EXPECT_EQ(j["counts"]["worse"], 1);
  EXPECT_EQ(j["cases"].size(), 6u);
}

TEST(CompareCli, ExitCodes) {
  auto r = kbisect({"compare", kData + "base.json", kData + "new.json"});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("worse"), std::string::npos);
  EXPECT_EQ(kbisect({"compare", kData + "base.json", kData + "new.json", "--fail-on", "never"}).exit_code, 0);
  EXPECT_EQ(kbisect({"compare", kData + "base.json", kData + "base.json"}).exit_code, 0);
  EXPECT_EQ(kbisect({"compare", kData + "gbench_base.json", kData + "gbench_new.json"}).exit_code, 1);
  EXPECT_EQ(kbisect({"compare", kData + "base.json", kData + "not_results.json"}).exit_code, 2);
  EXPECT_EQ(kbisect({"compare", kData + "base.json", kData + "broken.json"}).exit_code, 2);
  EXPECT_EQ(kbisect({"compare", kData + "base.json", kData + "new.json", "--threshold", "abc"}).exit_code, 2);
  EXPECT_EQ(kbisect({"compare", kData + "base.json", kData + "new.json", "--fail-on", "faster"}).exit_code, 2);
  EXPECT_EQ(kbisect({"compare", kData + "base.json"}).exit_code, 2);
  // A huge threshold turns the 3% slowdown into "same": exit 0.
  EXPECT_EQ(kbisect({"compare", kData + "base.json", kData + "new.json", "--threshold", "10%"}).exit_code, 0);
}

TEST(CompareCli, FormatsAndOutputFile) {
  const std::string dir = temp_dir("kb-compare-test");
  const std::string out = dir + "/report.json";
  auto r = kbisect({"compare", kData + "base.json", kData + "new.json", "--format", "md,json", "-o", out});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.out.find("| case |"), std::string::npos);
  EXPECT_NE(r.out.find("\"exit_code\": 1"), std::string::npos);
  auto j = nlohmann::json::parse(read_file(out));
  EXPECT_EQ(j["counts"]["worse"], 1);
  remove_tree(dir);
}
