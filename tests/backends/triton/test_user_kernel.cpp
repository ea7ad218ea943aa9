// Users' own Triton kernels from `triton_kernel:` YAML files: a softmax and an attention forward in a
// user's .py file (tests/data/user-kernels), compiled by the real kbisect under three real Triton releases
// with static metrics per release; bad files refused with the file, the field and the value.
#include <set>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "backends/backend.h"
#include "backends/triton/triton_compile.h"
#include "backends/triton/user_kernel.h"
#include "bisect/bisector.h"
#include "bisect/config.h"
#include "core/error.h"
#include "core/fsutil.h"
#include "core/process.h"
#include "tests/common/bisect_fixture.h"
#include "tests/common/test_tmp.h"

namespace kb {
namespace {

using nlohmann::json;
const std::string kData = KBISECT_SOURCE_DIR "/tests/data/user-kernels";

TEST(UserKernel, ParsesTheFile) {
  triton::UserKernel k = triton::parse_user_kernel(kData + "/attention.yaml");
  EXPECT_EQ(k.name, "user_attention_fwd");
  EXPECT_EQ(k.spec.function, "attention_fwd");
  ASSERT_EQ(k.spec.args.size(), 9u);
  EXPECT_EQ(k.spec.args[5].type, "fp32");
  EXPECT_TRUE(k.spec.args[0].divisible);   // pointers by default
  EXPECT_FALSE(k.spec.args[4].divisible);
  EXPECT_EQ(k.spec.grid, (std::vector<std::string>{"cdiv(seq_len, BLOCK_Q)", "heads"}));
  ASSERT_EQ(k.shapes.size(), 1u);
  EXPECT_EQ(k.shapes[0].str(), "h32-s4096");
  EXPECT_EQ(k.shapes[0].values.at("heads"), 32);
  EXPECT_EQ(k.shapes[0].values.at("seq_len"), 4096);  // integer scalar arguments are values too
}

// Each bad file: the error names the file, and the field or value.
TEST(UserKernel, BadFilesAreRefusedWithFileFieldAndValue) {
  kbtest::TestDir tmp("kb-user-kernel");
  write_file_atomic(tmp.path + "/k.py", "import triton\n");
  const std::string head = "triton_kernel:\n  name: k\n  source: k.py\n  function: f\n";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {head + "  grid: ['1']\n", "missing field 'signature'"},
      {head + "  signature: [{name: x, type: '*fp99'}]\n  grid: ['1']\n", "'*fp99'"},
      {head + "  signature: [{name: x, type: i32}, {name: x, type: i32}]\n  grid: ['1']\n", "'x' appears twice"},
      {head + "  signature: [{name: B, type: constexpr}]\n  grid: ['1']\n", "constexpr 'B' has no value"},
      {head + "  signature: [{name: x, type: i32}]\n  grid: ['1']\nshapes: [{name: s, args: {x: 1, y: 2}}]\n",
       "args.y: no such argument"},
      {head + "  signature: [{name: x, type: i32}]\n  grid: ['1']\nshapes: [{name: s, args: {}}]\n",
       "argument 'x' has no value"},
      {head + "  signature: [{name: x, type: i32}]\n  grid: ['cdiv(1,']\n", "grid"},
      {"triton_kernel:\n  name: k\n  source: missing.py\n  function: f\n  signature: [{name: x, type: i32}]\n  grid: ['1']\n",
       "'missing.py' does not exist"},
  };
  for (const auto& [text, want] : cases) {
    write_file_atomic(tmp.path + "/bad.yaml", text);
    try {
      triton::parse_user_kernel(tmp.path + "/bad.yaml");
      ADD_FAILURE() << "accepted:\n" << text;
    } catch (const InputError& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find("bad.yaml"), std::string::npos) << msg;
      EXPECT_NE(msg.find(want), std::string::npos) << "want '" << want << "' in: " << msg;
    }
  }
}

// The acceptance run: `kbisect sweep` on the user's two kernels, three releases, sm_90a and gfx942.
TEST(UserKernel, SweepCompilesBothKernelsUnderThreeReleases) {
  if (!find_backend("cuda") || !find_backend("hip")) GTEST_SKIP() << "the cuda and hip backends are not built in";
  kbtest::TestDir tmp("kb-user-sweep");
  RunOptions o;
  o.timeout_s = 900;
  RunResult r = run_process({KBISECT_BINARY_DIR "/kbisect", "sweep", kData + "/sweep.yaml", "-o", tmp.path + "/out"}, o);
  ASSERT_TRUE(r.exit_code == 0 || r.exit_code == 1) << r.status_text() << "\n" << r.out << r.err;
  const json res = json::parse(read_file(tmp.path + "/out/results.json"));
  std::map<std::string, std::set<std::string>> hashes;  // kernel/target -> code hashes over releases
  int compiled = 0;
  for (const auto& c : res["cases"]) {
    ASSERT_NE(c["status"], "failed") << c.dump();
    const auto& st = c["static"];
    ASSERT_TRUE(st.contains("code_hash")) << c.dump();
    const std::string target = c["toolchain"]["name"].get<std::string>().find("gfx") != std::string::npos ? "gfx942" : "sm_90a";
    EXPECT_EQ(c["shape"]["label"].get<std::string>().empty(), false);
    if (target == "sm_90a") EXPECT_GT(st["registers"].get<double>(), 0) << c.dump();
    else EXPECT_GT(st["vgprs"].get<double>(), 0) << c.dump();
    hashes[c["kernel"].get<std::string>() + "/" + target].insert(st["code_hash"].get<std::string>());
    ++compiled;
  }
  EXPECT_EQ(compiled, (2 + 1) * 6);  // softmax: two shapes, attention: one; six toolchains
  for (const auto& [key, h] : hashes) EXPECT_GE(h.size(), 2u) << key << ": the three releases emit one code";
}

}  // namespace
}  // namespace kb

namespace kb {
namespace {

// A bisection over Triton releases on the user's attention kernel: the commit that moves the in-tree
// toolchain from 3.5.1 back to 3.3.1 takes its gfx942 VGPRs from 199 to 256 (and 42 spilled; measured
// here), named with no samples.
TEST(UserKernel, BisectionNamesTheReleaseChangeForTheAttentionKernel) {
  if (!find_backend("hip")) GTEST_SKIP() << "the hip backend is not built in";
  kbtest::GitRepo r;
  auto tc = [](const std::string& rel) {
    return fmt::format("name: in-tree-triton\nbackend: hip\nkind: triton\ncompiler: {}/triton-{}/bin/python\n"
                       "target: gfx942\nenv: {{TRITON_HIP_LLD_PATH: /usr/lib/llvm-19/bin/ld.lld}}\n",
                       triton::triton_env_root(), rel);
  };
  std::vector<std::string> s;
  s.push_back(r.commit({{"tc.yaml", tc("3.5.1")}}, "good: triton 3.5.1"));
  s.push_back(r.commit({{"README", "a\n"}}, "docs"));
  s.push_back(r.commit({{"tc.yaml", tc("3.3.1")}}, "pin triton back to 3.3.1"));
  s.push_back(r.commit({{"README", "b\n"}}, "docs again"));
  const std::string cfg = fmt::format(R"(name: user-attention
repo: {}
good: {}
bad: {}
provider: {{in_tree: tc.yaml}}
user_kernels: [{}/attention.yaml]
benchmarks:
  - {{kernel: user_attention_fwd, backend: hip}}
metric: registers
threshold: 10%
budgets: {{max_builds: 6}}
)", r.path(), s.front(), s.back(), kData);
  const std::string path = r.tmp() + "/bisect.yaml";
  write_file_atomic(path, cfg);
  bisect::BisectRun run = bisect::bisect(bisect::load_bisect_config(path), r.tmp() + "/work", false);
  ASSERT_EQ(run.outcome.verdict, "culprit") << run.outcome.summary;
  EXPECT_EQ(run.commits[size_t(run.outcome.culprit)].sha, s[2]);
  EXPECT_EQ(run.outcome.samples, 0);
}

// `kbisect tune` over a user kernel's declared space (its file's `space`), named by its file and a shape of
// it: here the points compile and rank on static metrics (no GPU), and the winner goes into the table.
TEST(UserKernel, TuneTakesTheKernelFileAndItsShapeNames) {
  if (!file_exists(triton::triton_env_root() + "/triton-3.5.1/bin/python"))
    GTEST_SKIP() << "Triton 3.5.1 is not installed: run scripts/install-deps";
  kbtest::TestDir tmp("kb-user-tune");
  RunOptions o;
  o.timeout_s = 600;
  RunResult r = run_process({KBISECT_BINARY_DIR "/kbisect", "tune", kData + "/softmax.yaml", "--toolchain",
                             "triton-3.5.1-sm90a", "--shape", "1024x768", "--dtype", "f16", "--budget-s", "5", "-o",
                             tmp.path + "/table.json"}, o);
  ASSERT_TRUE(r.ok()) << r.status_text() << r.out << r.err;
  EXPECT_NE(r.out.find("cuda/user_softmax f16 1024x768 on triton-3.5.1-sm90a"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("static rank 4 of 4"), std::string::npos) << r.out;  // BLOCK x opt.num_warps: 2 x 2 points
  const json t = json::parse(read_file(tmp.path + "/table.json"));
  ASSERT_EQ(t["entries"].size(), 1u);
  EXPECT_EQ(t["entries"][0]["kernel"], "user_softmax");
  EXPECT_EQ(t["entries"][0]["shape"], "1024x768");
  r = run_process({KBISECT_BINARY_DIR "/kbisect", "tune", kData + "/softmax.yaml", "--toolchain", "triton-3.5.1-sm90a",
                   "--shape", "2x2", "--dtype", "f16"}, o);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--shape '2x2': " + kData + "/softmax.yaml has no such shape (it has: 4096x1000, 1024x768)"),
            std::string::npos) << r.err;
}

}  // namespace
}  // namespace kb
