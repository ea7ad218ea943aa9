// Exactly the user's kernel (docs/triton.md, "Fidelity"): what kbisect compiles is what the user's own Triton
// compiles, proven against real compiles — tritonparse traces recorded here through the releases' own JIT
// (tests/data/tritonparse/fidelity-*.ndjson.gz) and direct triton.compile calls — never against kbisect's own
// expectations. Every constexpr kind carried exactly, the user's NUM_STAGES kept apart from kbisect's
// opt.num_stages, an imported matmul_kernel that loads, the JIT's specialization of a shape's arguments, and
// `kbisect import-trace --verify` identical on every stage of every trace under tests/data.
#include <filesystem>
#include <regex>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "backends/backend.h"
#include "backends/cache.h"
#include "backends/triton/fidelity.h"
#include "backends/triton/trace.h"
#include "backends/triton/triton_compile.h"
#include "backends/triton/user_kernel.h"
#include "core/error.h"
#include "core/fsutil.h"
#include "core/process.h"
#include "tests/common/test_tmp.h"

namespace kb {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
const std::string kTraces = KBISECT_SOURCE_DIR "/tests/data/tritonparse";

// Whether a Triton environment of this release is installed (whatever its folder is called).
bool have_release(const std::string& rel) {
  for (const auto& tc : triton::presets("cuda"))
    if (triton::triton_release(tc) == rel && tc.prebuilt.empty()) return true;
  return false;
}

Toolchain preset(const std::string& name) {
  Toolchain tc = find_toolchain(name);
  resolve_identity(tc);
  return tc;
}

// The user kernel file for fidelity_kernels.matmul_kernel, with `constexprs` and `extra` (options, shapes)
// spliced in; the source is a copy beside it.
std::string matmul_file(const kbtest::TestDir& dir, const std::string& name, const std::string& constexprs,
                        const std::string& extra, const std::string& strides_type = "constexpr") {
  fs::copy_file(kTraces + "/fidelity_kernels.py", dir.path + "/fidelity_kernels.py", fs::copy_options::skip_existing);
  std::string sig;
  for (const char* p : {"a_ptr", "b_ptr", "c_ptr", "bias_ptr"}) sig += fmt::format("    - {{name: {}, type: '*fp16'}}\n", p);
  for (const char* p : {"M", "N", "K", "stride_am"}) sig += fmt::format("    - {{name: {}, type: i32}}\n", p);
  sig += fmt::format("    - {{name: stride_ak, type: {}}}\n    - {{name: stride_bk, type: i32}}\n", strides_type);
  sig += fmt::format("    - {{name: stride_bn, type: {}}}\n    - {{name: stride_cm, type: i32}}\n", strides_type);
  sig += fmt::format("    - {{name: stride_cn, type: {}}}\n", strides_type);
  for (const char* p : {"SLOPE", "ACTIVATION", "HAS_BIAS", "OUT_DTYPE", "NUM_STAGES", "BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M"})
    sig += fmt::format("    - {{name: {}, type: constexpr}}\n", p);
  // Strides declared constexpr are the inner ones, equal to 1 (what the JIT specializes away).
  std::string cx = constexprs;
  if (strides_type == "constexpr" && cx.find("stride_ak") == std::string::npos)
    cx = cx.substr(0, cx.rfind('}')) + ", stride_ak: 1, stride_bn: 1, stride_cn: 1}";
  const std::string path = dir.path + "/" + name + ".yaml";
  // A compile-only case is compiled as the trace's compile was: every pointer and integer divisible by 16.
  const std::string div = "  divisible: [a_ptr, b_ptr, c_ptr, bias_ptr, M, N, K, stride_am, stride_bk, stride_cm]\n";
  write_file_atomic(path, fmt::format("triton_kernel:\n  name: {}\n  source: fidelity_kernels.py\n  function: matmul_kernel\n"
                                      "  signature:\n{}  constexprs: {}\n{}  grid: ['1']\n{}", name, sig, cx, div, extra));
  return path;
}

// Compiles a user kernel file with a toolchain through kbisect's compile path (a cache of the test's own):
// the directory holding its IR stages and kernel.json.
std::string compile_user(const std::string& file, const Toolchain& tc, const std::string& cache_dir, const std::string& shape = "") {
  return triton::compile_user_kernel(triton::load_user_kernel(file), tc, shape, CompileCache(cache_dir));
}

class Fidelity : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!find_backend("cuda")) GTEST_SKIP() << "the cuda backend is not built in";
    if (!have_release("3.5.1")) GTEST_SKIP() << "Triton 3.5.1 is not installed: run scripts/install-deps";
  }
  kbtest::TestDir tmp{"kb-fidelity"};
};

// Case 1 of the issue: SLOPE = 0.01 reaches the TTIR as Python's 0.01 (as f32: 0.00999999977), not 0.
TEST_F(Fidelity, AFloatConstexprIsCarriedExactly) {
  const std::string f = matmul_file(tmp, "fid_float", "{SLOPE: 0.01, ACTIVATION: leaky_relu, HAS_BIAS: true, "
                                                     "OUT_DTYPE: tl.float16, NUM_STAGES: 3}", "  num_warps: 8\n  num_stages: 1\n");
  const std::string out = compile_user(f, preset("triton-3.5.1-sm90a"), tmp.path + "/cache");
  const std::string ttir = read_file(out + "/kernel.ttir");
  EXPECT_NE(ttir.find("arith.constant dense<0.00999999977> : tensor<128x128xf32>"), std::string::npos) << ttir;
  const triton::UserKernel* k = triton::find_user_kernel("fid_float");
  ASSERT_TRUE(k);
  const Params p = find_kernel("cuda", "fid_float").complete({});
  EXPECT_EQ(p.values().at("SLOPE"), ParamValue(0.01));
  EXPECT_EQ(p.values().at("BLOCK_M"), ParamValue(int64_t(128)));  // the function's default, as the JIT applies it
  EXPECT_EQ(p.str().find("OUT_DTYPE=tl.float16"), p.str().find("OUT_DTYPE"));
}

// Case 2: a constexpr NUM_STAGES=3 beside kbisect's option opt.num_stages=1 compiles what a direct
// triton.compile of the same declaration compiles: the loop's tl.range(num_stages=NUM_STAGES) keeps 3 stages
// of A and B tiles in shared memory (96 KiB), not NUM_STAGES=1's.
TEST_F(Fidelity, AConstexprNamedNumStagesIsTheUsers) {
  const std::string cx = "{SLOPE: 0.01, ACTIVATION: leaky_relu, HAS_BIAS: true, OUT_DTYPE: tl.float16, NUM_STAGES: ";
  const Toolchain tc = preset("triton-3.5.1-sm90a");
  const std::string three = compile_user(matmul_file(tmp, "fid_st3", cx + "3}", "  num_warps: 8\n  num_stages: 1\n"), tc, tmp.path + "/c");
  const std::string one = compile_user(matmul_file(tmp, "fid_st1", cx + "1}", "  num_warps: 8\n  num_stages: 1\n"), tc, tmp.path + "/c");
  const int64_t shared3 = json::parse(read_file(three + "/kernel.json"))["shared"].get<int64_t>();
  const int64_t shared1 = json::parse(read_file(one + "/kernel.json"))["shared"].get<int64_t>();
  EXPECT_GT(shared3, shared1);
  EXPECT_EQ(json::parse(read_file(three + "/kernel.json"))["num_stages"], 1);  // the option stays kbisect's
  // The direct compile, as a user would write it: triton.compile(ASTSource(...)) with the constexprs and options.
  const std::string script = tmp.path + "/direct.py";
  write_file_atomic(script, R"(import sys, json
sys.path.insert(0, sys.argv[1])
import triton, triton.language as tl
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
import fidelity_kernels as fk
fn = fk.matmul_kernel
consts = {"stride_ak": 1, "stride_bn": 1, "stride_cn": 1, "SLOPE": 0.01, "ACTIVATION": "leaky_relu", "HAS_BIAS": True,
          "OUT_DTYPE": tl.float16, "NUM_STAGES": 3, "BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "GROUP_M": 8}
sig = {n: ("constexpr" if n in consts else ("*fp16" if n.endswith("_ptr") else "i32")) for n in fn.arg_names}
attrs = {(i,): [["tt.divisibility", 16]] for i, n in enumerate(fn.arg_names) if n not in consts}
src = ASTSource(fn, sig, constexprs={(fn.arg_names.index(k),): v for k, v in consts.items()}, attrs=attrs)
k = triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": 8, "num_stages": 1})
print(json.dumps({"shared": k.metadata.shared}))
)");
  RunOptions o;
  o.timeout_s = 300;
  o.env_set["TRITON_CACHE_DIR"] = tmp.path + "/direct-cache";
  const RunResult r = run_process({triton::triton_env_root() + "/triton-3.5.1/bin/python", script, tmp.path}, o);
  ASSERT_TRUE(r.ok()) << r.status_text() << r.err;
  EXPECT_EQ(json::parse(r.out.substr(r.out.rfind('{')))["shared"].get<int64_t>(), shared3) << r.out;
}

// Case 3: a string constexpr compiles its branch (and None compiles the other).
TEST_F(Fidelity, AStringConstexprCompilesItsBranch) {
  const Toolchain tc = preset("triton-3.5.1-sm90a");
  const std::string rest = ", HAS_BIAS: false, OUT_DTYPE: tl.float16, NUM_STAGES: 2}";
  const std::string leaky = read_file(compile_user(matmul_file(tmp, "fid_leaky", "{SLOPE: 0.1, ACTIVATION: leaky_relu" + rest, ""),
                                                   tc, tmp.path + "/c") + "/kernel.ttir");
  const std::string none = read_file(compile_user(matmul_file(tmp, "fid_none", "{SLOPE: 0.1, ACTIVATION: None" + rest, ""),
                                                  tc, tmp.path + "/c") + "/kernel.ttir");
  EXPECT_NE(leaky.find("arith.cmpf oge"), std::string::npos);
  EXPECT_EQ(none.find("arith.cmpf oge"), std::string::npos);
  EXPECT_EQ(find_kernel("cuda", "fid_none").complete({}).values().at("ACTIVATION"), ParamValue(NoneValue{}));
}

// Case 4: an imported kernel named matmul_kernel loads (names are reserved exactly, not by prefix).
TEST_F(Fidelity, AnImportedMatmulKernelLoads) {
  const triton::Trace t = triton::read_trace(kTraces + "/fidelity-3.5.1.ndjson.gz");
  const triton::ImportedKernel k = triton::write_kernel_files(t, triton::choose_compilation(t, "matmul_kernel", 0), tmp.path);
  EXPECT_EQ(k.name, "matmul_kernel_0");
  EXPECT_NO_THROW(triton::load_user_kernel(k.yaml_path));
  EXPECT_TRUE(triton::is_builtin_kernel_name("matmul_tiled"));
  EXPECT_FALSE(triton::is_builtin_kernel_name("matmul_kernel"));
  // Every kernel kbisect declares is reserved, and nothing else is.
  for (const KernelDecl* d : all_kernels())
    if (!triton::find_user_kernel(d->name)) EXPECT_TRUE(triton::is_builtin_kernel_name(d->name)) << d->name;
}

// The JIT's specialization of a shape's arguments: strides equal to 1 become constants, values divisible by
// 16 get tt.divisibility; the compile equals the trace's (recorded through the JIT with those values), and
// another shape whose values specialize alike shares the compile.
TEST_F(Fidelity, AShapesArgumentsSpecializeAsTheJitDoes) {
  std::string shapes = "shapes:\n";
  for (int64_t m : {4096, 2048}) {
    shapes += fmt::format("  - name: s{}\n    args:\n", m);
    for (const char* p : {"a_ptr", "b_ptr", "c_ptr"}) shapes += fmt::format("      {}: {{shape: [{}, {}], dtype: fp16}}\n", p, m, m);
    shapes += fmt::format("      bias_ptr: {{shape: [{}], dtype: fp16}}\n", m);
    shapes += fmt::format("      M: {0}\n      N: {0}\n      K: {0}\n      stride_am: {0}\n      stride_ak: 1\n      stride_bk: {0}\n"
                          "      stride_bn: 1\n      stride_cm: {0}\n      stride_cn: 1\n", m);
  }
  const std::string f = matmul_file(tmp, "fid_shapes", "{SLOPE: 0.01, ACTIVATION: leaky_relu, HAS_BIAS: true, "
                                                      "OUT_DTYPE: tl.float16, NUM_STAGES: 3}",
                                    "  num_warps: 8\n  num_stages: 1\n" + shapes, "i32");
  const Toolchain tc = preset("triton-3.5.1-sm90a");
  const std::string out = compile_user(f, tc, tmp.path + "/c", "s4096");
  const triton::Trace t = triton::read_trace(kTraces + "/fidelity-3.5.1.ndjson.gz");
  const triton::TraceCompilation& c = triton::choose_compilation(t, "matmul_kernel", 0);
  for (const char* stage : {"ttir", "ttgir", "ptx"}) {
    const auto d = triton::first_difference(triton::normalize_stage(stage, c.stages.at(stage)),
                                            triton::normalize_stage(stage, read_file(out + "/kernel." + std::string(stage))));
    EXPECT_EQ(d.line, 0u) << stage << " line " << d.line << "\n  trace:   " << d.expected << "\n  kbisect: " << d.got;
  }
  const json spec = json::parse(read_file(out + "/specialization.json"));
  EXPECT_EQ(spec["stride_ak"]["constant"], 1);
  const json launch = json::parse(read_file(out + "/launch.json"));
  for (const auto& p : launch["params"]) EXPECT_NE(p["name"], "stride_ak");  // specialized away: not a parameter
  // s2048's values specialize alike: the same compile (a cache hit), whose key is the JIT's classes.
  const std::string again = compile_user(f, tc, tmp.path + "/c", "s2048");
  EXPECT_EQ(again, out);
}

// The driver refuses a declaration the JIT does not follow, naming the argument.
TEST_F(Fidelity, ADeclarationTheJitDoesNotFollowIsRefused) {
  std::string shapes = "shapes:\n  - name: s\n    args:\n";
  for (const char* p : {"a_ptr", "b_ptr", "c_ptr"}) shapes += fmt::format("      {}: {{shape: [64, 64], dtype: fp16}}\n", p);
  shapes += "      bias_ptr: {shape: [64], dtype: fp16}\n      M: 64\n      N: 64\n      K: 64\n      stride_am: 64\n"
            "      stride_bk: 64\n      stride_cm: 64\n";
  const std::string f = matmul_file(tmp, "fid_bad", "{SLOPE: 0.01, ACTIVATION: None, HAS_BIAS: false, OUT_DTYPE: tl.float16, "
                                                   "NUM_STAGES: 2, stride_ak: 5, stride_bn: 1, stride_cn: 1}", shapes);
  try {
    compile_user(f, preset("triton-3.5.1-sm90a"), tmp.path + "/c", "s");
    ADD_FAILURE() << "stride_ak = 5 declared constexpr was compiled";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'stride_ak' is declared constexpr, but Triton's JIT compiled it as i32"),
              std::string::npos) << e.what();
  }
}

// AMD buffer ops (on by default from 3.8): the JIT gives a tensor whose storage fits 2 GiB a 32-bit pointer
// range; a compile-only file names the tensors that do not (`large:`), and import-trace writes that list
// from a TTIR where some pointers have the range and others not.
TEST_F(Fidelity, ThePointerRangeOfAmdBufferOpsFollowsTheTensorsSize) {
  if (!find_backend("hip")) GTEST_SKIP() << "the hip backend is not built in";
  if (!have_release("3.9.0")) GTEST_SKIP() << "Triton 3.9.0 is not installed: run scripts/install-deps";
  const std::string f = matmul_file(tmp, "fid_large", "{SLOPE: 0.01, ACTIVATION: None, HAS_BIAS: false, OUT_DTYPE: tl.float16, "
                                                     "NUM_STAGES: 2}", "  large: [a_ptr]\n");
  const std::string ttir = read_file(compile_user(f, preset("triton-3.9.0-gfx942"), tmp.path + "/c") + "/kernel.ttir");
  const std::vector<triton::TtirArg> args = triton::ttir_signature(ttir, "matmul_kernel");
  ASSERT_GE(args.size(), 2u) << ttir;
  EXPECT_FALSE(args[0].pointer_range32) << ttir;  // a_ptr: 2 GiB of storage
  EXPECT_TRUE(args[1].pointer_range32) << ttir;   // b_ptr: 1 MiB
  // The import of such a compile names a_ptr as large, and the imported file compiles to the same TTIR.
  triton::Trace t;
  triton::TraceCompilation c;
  c.kernel = "matmul_kernel";
  c.target = "hip gfx942";
  c.python_source = read_file(kTraces + "/fidelity_kernels.py");
  c.full_file = true;
  c.params = {"a_ptr", "b_ptr", "c_ptr", "bias_ptr", "M", "N", "K", "stride_am", "stride_ak", "stride_bk", "stride_bn",
              "stride_cm", "stride_cn", "SLOPE", "ACTIVATION", "HAS_BIAS", "OUT_DTYPE", "NUM_STAGES", "BLOCK_M",
              "BLOCK_N", "BLOCK_K", "GROUP_M"};
  for (const auto& [n, v] : std::vector<std::pair<std::string, std::string>>{
           {"stride_ak", "1"}, {"stride_bn", "1"}, {"stride_cn", "1"}, {"SLOPE", "0.01"}, {"ACTIVATION", "null"},
           {"HAS_BIAS", "false"}, {"OUT_DTYPE", "\"triton.language.core.dtype('fp16')\""}, {"NUM_STAGES", "2"},
           {"BLOCK_M", "128"}, {"BLOCK_N", "128"}, {"BLOCK_K", "64"}, {"GROUP_M", "8"}})
    c.constants.emplace_back(n, v);
  c.ttir = ttir;
  c.num_warps = 4;
  c.num_stages = 3;
  const triton::ImportedKernel k = triton::write_kernel_files(t, c, tmp.path + "/imported");
  EXPECT_NE(read_file(k.yaml_path).find("large: [a_ptr]"), std::string::npos) << read_file(k.yaml_path);
  const std::string again = read_file(compile_user(k.yaml_path, preset("triton-3.9.0-gfx942"), tmp.path + "/c") + "/kernel.ttir");
  const auto d = triton::first_difference(triton::normalize_stage("ttir", ttir), triton::normalize_stage("ttir", again));
  EXPECT_EQ(d.line, 0u) << d.expected << "\n" << d.got;
}

TEST_F(Fidelity, OldOptionNamesInASpaceAreNamedAsWhatTheyAre) {
  const std::string f = matmul_file(tmp, "fid_space", "{SLOPE: 0.01, ACTIVATION: None, HAS_BIAS: false, OUT_DTYPE: tl.float16, "
                                                     "NUM_STAGES: 2}", "  space: {NUM_WARPS: [4, 8]}\n");
  try {
    triton::parse_user_kernel(f);
    ADD_FAILURE() << "space.NUM_WARPS accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("opt.num_warps"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("fid_space.yaml:"), std::string::npos) << e.what();
  }
  // NUM_STAGES is a constexpr here: tunable under its own name, beside the option.
  write_file_atomic(f, std::regex_replace(read_file(f), std::regex("NUM_WARPS"), "NUM_STAGES"));
  EXPECT_NO_THROW(triton::parse_user_kernel(f));
}

// Every compilation of every trace under tests/data, imported and recompiled by kbisect: identical stages.
TEST_F(Fidelity, VerifySaysIdenticalForEveryTraceHere) {
  int traces = 0;
  for (const auto& e : fs::directory_iterator(kTraces)) {
    const std::string p = e.path().string();
    if (!(p.ends_with(".ndjson") || p.ends_with(".ndjson.gz")) || fs::file_size(e.path()) == 0 ||
        p.find("no_compilation") != std::string::npos)
      continue;
    const triton::Trace t = triton::read_trace(p);
    if (!t.compilations.empty() && !t.compilations.front().triton_version.empty() &&
        !have_release(t.compilations.front().triton_version)) {
      ADD_FAILURE() << p << " needs Triton " << t.compilations.front().triton_version << ": run scripts/install-deps";
      continue;
    }
    RunOptions o;
    o.timeout_s = 900;
    const RunResult r = run_process({KBISECT_BINARY_DIR "/kbisect", "import-trace", p, "--verify"}, o);
    EXPECT_EQ(r.exit_code, 0) << p << "\n" << r.out << r.err;
    EXPECT_NE(r.out.find("verified: every stage identical"), std::string::npos) << r.out;
    EXPECT_EQ(r.out.find("differs"), std::string::npos) << r.out;
    ++traces;
  }
  EXPECT_GE(traces, 5);
}

// One constexpr changed in an imported file (BLOCK_SIZE 1024 -> 512): --verify, pointed at the imported files
// with -o, names the first stage that differs (the TTIR) and its first differing line, and exits 1. The same
// files unchanged verify identical.
TEST_F(Fidelity, VerifyNamesTheStageAndLineOfADifference) {
  const std::string trace = kTraces + "/softmax_attn_compile.ndjson", kbisect = KBISECT_BINARY_DIR "/kbisect";
  RunOptions o;
  o.timeout_s = 600;
  RunResult r = run_process({kbisect, "import-trace", trace, "--kernel", "softmax_kernel", "--index", "0", "-o", tmp.path}, o);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const std::vector<std::string> verify = {kbisect, "import-trace", trace, "--kernel", "softmax_kernel", "--index", "0",
                                           "--verify", "-o", tmp.path};
  r = run_process(verify, o);
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  const std::string yaml = tmp.path + "/softmax_kernel_0.yaml";
  const std::string text = read_file(yaml);
  ASSERT_NE(text.find("BLOCK_SIZE: 1024"), std::string::npos) << text;
  write_file_atomic(yaml, std::regex_replace(text, std::regex("BLOCK_SIZE: 1024"), "BLOCK_SIZE: 512"));
  r = run_process(verify, o);
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.out, m, std::regex(R"(ttir +differs at line (\d+))"))) << r.out;
  EXPECT_NE(r.out.find("tensor<512x"), std::string::npos) << r.out;  // the line shows kbisect's 512-wide range
  EXPECT_NE(r.out.find("tensor<1024x"), std::string::npos) << r.out;  // and the trace's 1024
  EXPECT_NE(r.out.find("NOT identical"), std::string::npos) << r.out;
}

// A release that is not here is named with the command that installs it.
TEST_F(Fidelity, VerifyNamesTheMissingRelease) {
  std::string text = read_file(kTraces + "/softmax_attn_compile.ndjson");
  json ev = json::parse(text.substr(0, text.find('\n')));
  ev["payload"]["metadata"]["triton_version"] = "3.1.7";
  write_file_atomic(tmp.path + "/old.ndjson", ev.dump() + "\n");
  RunOptions o;
  const RunResult r = run_process({KBISECT_BINARY_DIR "/kbisect", "import-trace", tmp.path + "/old.ndjson", "--verify"}, o);
  EXPECT_EQ(r.exit_code, 3) << r.out << r.err;
  EXPECT_NE(r.err.find("pip install triton==3.1.7"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace kb
