// Golden renderings: every printer's exact output for one fixed result set (tests/data/printers). A
// change to a printer shows up here as a diff against the file; when it is intended, regenerate the
// files with KBISECT_UPDATE_GOLDEN=1 and review the diff in the commit.
#include <cstdlib>
#include <fstream>
#include <utility>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/fsutil.h"
#include "harness/compare.h"
#include "harness/printers.h"
#include "tests/common/case_fixture.h"

using namespace kb;

namespace {

const std::string kGolden = std::string(KBISECT_SOURCE_DIR) + "/tests/data/printers/";
const std::string kCompare = std::string(KBISECT_SOURCE_DIR) + "/tests/data/compare/";

// One of each status, two dtypes, static metrics and correctness fields: every column has a value.
RunResults fixed_results() {
  RunResults r;
  r.name = "golden";
  r.sweep_file = "sweeps/golden.yaml";
  r.started = "2026-12-03T10:00:00Z";
  r.finished = "2026-12-03T10:01:30Z";
  r.wall_s = 90;
  r.environment = {{"host", "runner-1"}, {"cpu", "Test CPU"}, {"kbisect_sha", "0123456789ab"}};
  CaseResult a = kbtest::ok_case("matmul_tiled", {256, 256, 256}, "clang-19", {1.0e-3, 1.1e-3, 0.9e-3, 1.05e-3, 0.95e-3});
  a.params = Params{{"BM", int64_t(96)}, {"MR", int64_t(6)}};
  a.toolchain_identity = "clang version 19.1.7, target x86_64";  // a comma the CSV must quote
  a.target = "x86-64-v3";
  a.has_static = true;
  a.code_hash = "feedc0de00112233";
  a.code_bytes = 4096;
  a.compile_s = 0.25;
  a.metrics = {{"spills", 3}, {"reloads", 5}};
  a.checked = true;
  a.max_error = 1.5e-7;
  a.tolerance = 3.1e-5;
  a.check_method = "full";
  a.check_elements = 65536;
  a.check_s = 0.125;
  a.measure_s = 0.5;
  CaseResult b = kbtest::ok_case("matmul_tiled", {512, 512, 64}, "clang-19", {2.0e-4, 2.2e-4, 2.1e-4});
  b.dtype = DType::bf16;
  b.checked = true;
  b.max_error = 2.0e-6;
  b.tolerance = 2.6e-4;
  b.check_method = "fast";
  b.check_elements = 4096;
  b.projection_ratio = 0.02;
  CaseResult s;
  s.kernel = "matmul_wgmma";
  s.backend = "cuda";
  s.shape = {4096, 4096, 4096};
  s.toolchain = "nvcc-13";
  s.status = CaseStatus::skipped;
  s.reason = "no CUDA device";
  CaseResult w = kbtest::ok_case("matmul_pipelined", {128, 128, 128}, "clang-19", {});
  w.status = CaseStatus::incorrect;
  w.reason = "max error 4.2e-03 > tolerance 3.1e-05 at C[12,7]";
  w.checked = true;
  w.max_error = 4.2e-3;
  w.tolerance = 3.1e-5;
  w.check_method = "full";
  CaseResult f = kbtest::ok_case("matmul_pipelined", {64, 64, 64}, "clang-16", {});
  f.status = CaseStatus::failed;
  f.reason = "compile failed: error: unknown argument '-mfoo'";
  r.cases = {a, b, s, w, f};
  return r;
}

void expect_golden(const std::string& name, const std::string& got) {
  const std::string path = kGolden + name;
  if (const char* u = std::getenv("KBISECT_UPDATE_GOLDEN"); u && std::string(u) == "1") {
    std::ofstream(path, std::ios::binary) << got;
    GTEST_SKIP() << "rewrote " << path;
  }
  ASSERT_TRUE(file_exists(path)) << path << " is missing (KBISECT_UPDATE_GOLDEN=1 writes it)";
  EXPECT_EQ(got, read_file(path)) << "rendering differs from " << path;
}

}  // namespace

TEST(Printers, TableMatchesGolden) { expect_golden("sweep.table.txt", render_table(fixed_results())); }
TEST(Printers, MarkdownMatchesGolden) { expect_golden("sweep.md", render_markdown(fixed_results())); }
TEST(Printers, CsvMatchesGolden) { expect_golden("sweep.csv", render_csv(fixed_results())); }
TEST(Printers, GbenchJsonMatchesGolden) { expect_golden("sweep.gbench.json", render_gbench_json(fixed_results())); }
TEST(Printers, JsonMatchesGolden) { expect_golden("sweep.json", render_json(fixed_results())); }

TEST(Printers, OutputsAreWellFormed) {
  const RunResults r = fixed_results();
  // CSV: one header and one row per case, every row with the header's field count (commas inside
  // quotes do not count).
  std::vector<size_t> fields;
  size_t n = 1;
  bool quoted = false;
  for (char ch : render_csv(r)) {
    if (ch == '"') quoted = !quoted;
    else if (ch == ',' && !quoted) ++n;
    else if (ch == '\n' && !quoted) fields.push_back(std::exchange(n, 1));
  }
  ASSERT_EQ(fields.size(), r.cases.size() + 1);
  for (size_t f : fields) EXPECT_EQ(f, fields.front());
  // JSON renderings parse, and ours round-trips.
  EXPECT_TRUE(nlohmann::json::accept(render_gbench_json(r)));
  const RunResults back = results_from_json(nlohmann::json::parse(render_json(r)), "golden");
  ASSERT_EQ(back.cases.size(), r.cases.size());
  EXPECT_EQ(render_table(back), render_table(r));
}

TEST(Printers, ComparisonTableAndMarkdownMatchGolden) {
  auto c = compare_sets(load_sample_set(kCompare + "base.json"), load_sample_set(kCompare + "new.json"), {});
  finish_comparison(c);
  c.base_origin = "base.json";  // the paths of this checkout would make the golden machine-dependent
  c.new_origin = "new.json";
  expect_golden("compare.table.txt", render_table(c));
  expect_golden("compare.md", render_markdown(c));
}
