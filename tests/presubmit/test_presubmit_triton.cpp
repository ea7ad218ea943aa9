// A Triton release change through `kbisect presubmit` with two toolchain pairs (sm_90a and gfx942), on a
// machine without a GPU: every case is compiled by both real Triton releases, the static metrics that moved
// are reported and the gate fails the diff, nothing is timed (the GPU cases are static only, with the
// backend's reason). The figures the assertions rely on are docs/triton.md's table, measured here.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fmt/format.h>

#include "backends/backend.h"
#include "core/fsutil.h"
#include "core/process.h"
#include "tests/common/test_tmp.h"

namespace {

using json = nlohmann::json;

const std::string kKbisect = KBISECT_BINARY_DIR "/kbisect";

class PresubmitTriton : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!kb::find_backend("cuda") || !kb::find_backend("hip")) GTEST_SKIP() << "the cuda and hip backends are not built in";
    kb::write_file_atomic(dir.path + "/sweep.yaml", R"(name: triton-presubmit
tier: l1
toolchains: [triton-3.5.1-sm90a]
benchmarks:
  - kernel: triton_matmul_tiled
    dtypes: [f16, f32]
    shapes: [[4096, 4096, 4096]]
)");
    kb::write_file_atomic(dir.path + "/presubmit.yaml", R"(name: triton-release
cases: {sweep: sweep.yaml}
threshold: 1%
budget: {gpu_minutes: 10}
gate: {spills: new, registers: 5%}
)");
  }

  // Presubmit of the release change from `from` to `to` on both targets; the report.
  json run(const std::string& from, const std::string& to, int want_exit) {
    const std::string out = dir.path + "/out-" + from + "-" + to;
    kb::RunOptions o;
    o.timeout_s = 900;
    kb::RunResult r = kb::run_process({kKbisect, "presubmit", dir.path + "/presubmit.yaml",
                                       "--base-toolchain", "triton-" + from + "-sm90a", "--change-toolchain", "triton-" + to + "-sm90a",
                                       "--base-toolchain", "triton-" + from + "-gfx942", "--change-toolchain", "triton-" + to + "-gfx942",
                                       "-o", out, "-q"},
                                      o);
    EXPECT_EQ(r.exit_code, want_exit) << r.out << r.err;
    json j = json::parse(kb::read_file(out + "/presubmit.json"));
    j["junit"] = kb::read_file(out + "/junit.xml");
    return j;
  }

  // The gate failures of the case whose name starts with `prefix` and ends with `@target`.
  std::vector<std::string> gate_of(const json& j, const std::string& dtype, const std::string& target) {
    for (const auto& c : j["cases"]) {
      const std::string name = c["case"];
      if (name.find("/" + dtype + "/") != std::string::npos && name.ends_with("@" + target))
        return c["gate_failures"].get<std::vector<std::string>>();
    }
    ADD_FAILURE() << "no " << dtype << " case on " << target;
    return {};
  }

  kbtest::TestDir dir{"kb-presubmit-triton"};
};

// Every case of both targets changed code, none was timed, and each says why.
void expect_static_only(const json& j) {
  EXPECT_EQ(j["counts"]["cases"], 4);
  EXPECT_EQ(j["counts"]["changed"], 4);
  EXPECT_EQ(j["counts"]["measurements"], 0);
  EXPECT_EQ(j["budget"]["gpu_spent_s"], 0.0);
  for (const auto& c : j["cases"]) {
    EXPECT_EQ(c["state"], "changed") << c.dump();
    EXPECT_FALSE(c["static_moves"].empty()) << c.dump();
    EXPECT_EQ(c["device"], "gpu");
    ASSERT_TRUE(c.contains("not_timable")) << c.dump();  // no driver here: static metrics only
    EXPECT_FALSE(c.contains("ab"));
  }
  EXPECT_NE(j["junit"].get<std::string>().find("<skipped message=\"changed, static metrics only: "), std::string::npos);
}

}  // namespace

// Measured here (the tiled kernel's default tile, 4096^3): 3.3.1 -> 3.5.1 takes the fp16 tile from 118 to 108
// registers on sm_90a and from 174 to 142 VGPRs on gfx942, and the fp32 tile on gfx942 stops spilling (19 VGPRs
// -> 0, 256 -> 212 VGPRs): the upgrade passes the gate, the downgrade fails it on both targets.
TEST_F(PresubmitTriton, AnUpgradePassesTheStaticGateOnBothTargets) {
  const json j = run("3.3.1", "3.5.1", 0);
  expect_static_only(j);
  for (const char* dtype : {"f16", "f32"})
    for (const char* target : {"sm_90a", "gfx942"}) EXPECT_TRUE(gate_of(j, dtype, target).empty()) << dtype << " " << target;
  EXPECT_EQ(j["junit"].get<std::string>().find("<failure type=\"static-gate\""), std::string::npos);
}

TEST_F(PresubmitTriton, ADowngradeFailsTheRegisterAndNewSpillRules) {
  const json j = run("3.5.1", "3.3.1", 1);
  expect_static_only(j);
  const auto f16 = gate_of(j, "f16", "sm_90a");
  ASSERT_EQ(f16.size(), 1u);
  EXPECT_EQ(f16[0].rfind("registers: ", 0), 0u) << f16[0];
  EXPECT_NE(f16[0].find("(rule 5%)"), std::string::npos) << f16[0];
  const auto f32 = gate_of(j, "f32", "gfx942");
  bool new_spill = false;
  for (const auto& g : f32) new_spill = new_spill || (g.rfind("spills: 0 -> ", 0) == 0 && g.ends_with("(rule new)"));
  EXPECT_TRUE(new_spill) << ::testing::PrintToString(f32);
  EXPECT_TRUE(gate_of(j, "f32", "sm_90a").empty());  // 255 registers either way, 4 and 8 spill bytes: none new
  EXPECT_NE(j["junit"].get<std::string>().find("<failure type=\"static-gate\""), std::string::npos);
}
