#include <gtest/gtest.h>

#include "tests/common/case_fixture.h"

#include <cmath>

#include "core/error.h"
#include "core/fsutil.h"
#include "harness/printers.h"
#include "harness/reference.h"
#include "harness/results.h"

using namespace kb;

TEST(Results, SummarizeKnownValues) {
  // samples 1..5 (+ an outlier 100): median 3.5, mean 19.1667
  auto s = summarize({1, 2, 3, 4, 5, 100}, 2e12);
  EXPECT_EQ(s.samples, 6);
  EXPECT_DOUBLE_EQ(s.median_s, 3.5);
  EXPECT_NEAR(s.mean_s, 115.0 / 6, 1e-12);
  EXPECT_DOUBLE_EQ(s.min_s, 1);
  EXPECT_DOUBLE_EQ(s.max_s, 100);
  EXPECT_NEAR(s.tflops, 2.0 / 3.5, 1e-12);
  // MAD of {1,2,3,4,5,100} around 3.5 = median{2.5,1.5,.5,.5,1.5,96.5} = 1.5 -> robust CI stays small.
  // sigma = MAD / Phi^-1(3/4); the median's standard error is sqrt(pi/2) * sigma / sqrt(n).
  const double sigma = 1.5 / 0.6744897501960817;
  EXPECT_NEAR(s.ci_rel, 1.96 * std::sqrt(M_PI / 2) * sigma / std::sqrt(6.0) / 3.5, 1e-12);
  EXPECT_NEAR(s.ci_rel, 1.96 * 1.2533 * 1.4826 * 1.5 / std::sqrt(6.0) / 3.5, 1e-4);  // the rounded constants
  EXPECT_GT(s.noise, 1.0);  // the outlier dominates stddev/mean
}

TEST(Results, JsonRoundTripKeepsEverything) {
  RunResults r;
  r.name = "t";
  CaseResult c;
  c.kernel = "matmul_tiled";
  c.backend = "cpu";
  c.params = Params{{"BM", int64_t(64)}, {"S", std::string("x")}};
  c.shape = {8, 16, 32};
  c.dtype = DType::bf16;
  c.toolchain = "g++";
  c.toolchain_identity = "abc";
  c.status = CaseStatus::ok;
  c.has_static = true;
  c.code_hash = "h";
  c.code_bytes = 123;
  c.metrics["registers"] = 40;
  c.samples_s = {1e-3, 2e-3, 3e-3};
  c.conditions.batch = 4;
  c.conditions.stop_reason = "noise";
  r.cases.push_back(c);
  std::string dir = temp_dir("kbisect-test-");
  save_results(r, dir + "/r.json");
  auto back = load_results(dir + "/r.json");
  ASSERT_EQ(back.cases.size(), 1u);
  const auto& b = back.cases[0];
  EXPECT_EQ(b.key(), c.key());
  EXPECT_EQ(b.id(), c.id());
  EXPECT_EQ(b.params.get_string("S"), "x");
  EXPECT_EQ(b.code_bytes, 123);
  EXPECT_EQ(b.metrics.at("registers"), 40);
  EXPECT_EQ(b.samples_s, c.samples_s);
  EXPECT_EQ(b.conditions.batch, 4);
  EXPECT_DOUBLE_EQ(b.summary.median_s, 2e-3);
  remove_tree(dir);
}

TEST(Results, BadFilesAreInputErrors) {
  std::string dir = temp_dir("kbisect-test-");
  write_file_atomic(dir + "/bad.json", "{not json");
  EXPECT_THROW(load_results(dir + "/bad.json"), InputError);
  write_file_atomic(dir + "/nocases.json", "{\"x\": 1}");
  EXPECT_THROW(load_results(dir + "/nocases.json"), InputError);
  write_file_atomic(dir + "/badcase.json", "{\"cases\": [{\"kernel\": \"k\"}]}");
  try {
    load_results(dir + "/badcase.json");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("cases[0]"), std::string::npos) << e.what();
  }
  EXPECT_THROW(load_results(dir + "/missing.json"), InputError);
  // A shape too large for int64 (fuzz_results_json: nlohmann converted 2.5e20 to long, undefined behaviour).
  CaseResult c = kbtest::ok_case("k", {2, 3, 4}, "t", {1e-3});
  RunResults r;
  r.cases.push_back(c);
  nlohmann::json j = to_json(r);
  j["cases"][0]["shape"]["N"] = 2.5e20;
  write_file_atomic(dir + "/huge.json", j.dump());
  try {
    load_results(dir + "/huge.json");
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("cases[0]: case k shape: field 'N' = 2.5e+20 is out of range"),
              std::string::npos)
        << e.what();
  }
  remove_tree(dir);
}

TEST(Printers, GoogleBenchmarkJsonHasRepetitions) {
  RunResults r;
  CaseResult c = kbtest::ok_case("k", {1, 1, 1}, "t", {1e-6, 2e-6});
  r.cases.push_back(c);
  auto j = nlohmann::json::parse(render_gbench_json(r));
  int iterations = 0;
  for (const auto& b : j["benchmarks"])
    if (b["run_type"] == "iteration") {
      ++iterations;
      EXPECT_EQ(b["repetitions"], 2);
      EXPECT_EQ(b["time_unit"], "ns");
    }
  EXPECT_EQ(iterations, 2);
  EXPECT_NE(render_table(r).find("(1, 1, 1)"), std::string::npos);
  EXPECT_NE(render_csv(r).find("k,cpu,"), std::string::npos);
  EXPECT_THROW(parse_formats("table,xml", {"table", "json"}), InputError);
}

TEST(Reference, RoundingAndCheck) {
  EXPECT_EQ(round_to_dtype(1.0f + 1.0f / 512, DType::bf16), 1.0f);  // below half an ulp of bf16 (2^-7)
  EXPECT_EQ(round_to_dtype(1.0f + 3.0f / 256, DType::bf16), 1.0f + 1.0f / 64);  // ties/nearest
  auto p = make_problem({5, 7, 9}, DType::f32, 1);
  std::vector<float> c(p->C.begin(), p->C.end());
  EXPECT_TRUE(check_result(*p, c).ok);
  c[8] += 0.01f;
  auto chk = check_result(*p, c);
  EXPECT_FALSE(chk.ok);
  EXPECT_NE(chk.detail.find("C[1][1]"), std::string::npos) << chk.detail;
  c[8] = NAN;
  EXPECT_FALSE(check_result(*p, c).ok);
  // A bf16 output adds its rounding; bf16 inputs alone do not (their products are exact in fp32).
  EXPECT_GT(tolerance_for(DType::bf16, 64, {1, DType::bf16}), tolerance_for(DType::f32, 64));
  EXPECT_GT(tolerance_for(DType::f32, 4096), tolerance_for(DType::f32, 64));
}
