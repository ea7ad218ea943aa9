// A user kernel's own arguments and the baseline-output check's rule (backends/triton/user_args.h): the
// storage a strided view spans, initial bytes that are the same for every toolchain and kernel, the
// comparison (bitwise / per-dtype tolerance, NaN, integers), the tolerance chosen per release pair, and the
// launch bound to a real Triton 3.5.1 build of the user's softmax and attention (widths from the PTX).
#include <cmath>
#include <cstring>
#include <filesystem>
#include <optional>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "backends/backend.h"
#include "backends/half_bits.h"
#include "backends/triton/triton_compile.h"
#include "backends/triton/user_kernel.h"
#include "core/error.h"
#include "core/fsutil.h"
#include "tests/common/test_tmp.h"
#if KBISECT_WITH_CUDA
#include "backends/cuda/triton_launch.h"
#include "backends/cuda/user_tensors.h"
#include "backends/cuda/nvrtc_cubin.h"
#endif

namespace kb {
namespace {

const std::string kData = KBISECT_SOURCE_DIR "/tests/data/user-kernels";

// parse_user_kernel(path) must throw InputError naming the file and holding `want`.
void expect_refused(const std::string& path, const std::string& want) {
  try {
    triton::parse_user_kernel(path);
    ADD_FAILURE() << "accepted:\n" << read_file(path);
  } catch (const InputError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(std::filesystem::path(path).filename().string() + ":"), std::string::npos) << msg;
    EXPECT_NE(msg.find(want), std::string::npos) << "want '" << want << "' in: " << msg;
  }
}

TEST(UserArgs, StorageInitAndSeeds) {
  const triton::UserKernel k = triton::parse_user_kernel(kData + "/softmax.yaml");
  ASSERT_EQ(k.launches.size(), 2u);
  const triton::LaunchArgs& a = k.launches.at("4096x1000");
  const triton::TensorArg& in = a.tensors.at("in_ptr");
  const triton::TensorArg& out = a.tensors.at("out_ptr");
  EXPECT_FALSE(in.output);
  EXPECT_TRUE(out.output);
  EXPECT_EQ(in.strides, (std::vector<int64_t>{1008, 1}));
  EXPECT_EQ(in.storage_elements(), 4095 * 1008 + 1000);  // the last row ends at its last column
  EXPECT_EQ(in.storage_bytes(), in.storage_elements() * 2);
  EXPECT_EQ(a.ints.at("n_cols"), 1000);
  // Contiguous strides when none are given.
  EXPECT_EQ(k.launches.at("1024x768").tensors.at("in_ptr").strides, (std::vector<int64_t>{768, 1}));

  // uniform in [-4, 4) as fp16, the same bytes every time for the same shape and argument; another
  // argument or shape draws other values; zeros are zeros.
  const auto b1 = triton::initial_bytes(in, triton::arg_seed("4096x1000", "in_ptr"));
  const auto b2 = triton::initial_bytes(in, triton::arg_seed("4096x1000", "in_ptr"));
  const auto b3 = triton::initial_bytes(in, triton::arg_seed("4096x1000", "out_ptr"));
  EXPECT_EQ(b1, b2);
  EXPECT_NE(b1, b3);
  double lo = 1e9, hi = -1e9, sum = 0;
  for (int64_t i = 0; i < in.storage_elements(); ++i) {
    const double v = triton::element_value("fp16", b1.data(), i);
    lo = std::min(lo, v), hi = std::max(hi, v), sum += v;
  }
  EXPECT_GE(lo, -4.0);
  EXPECT_LE(hi, 4.0);
  EXPECT_LT(lo, -3.9);
  EXPECT_GT(hi, 3.9);
  EXPECT_NEAR(sum / double(in.storage_elements()), 0.0, 0.02);
  const auto z = triton::initial_bytes(out, 1);
  EXPECT_TRUE(std::all_of(z.begin(), z.end(), [](uint8_t c) { return c == 0; }));
  // A value and integers.
  triton::TensorArg v{"bf16", {3}, {1}, {triton::TensorInit::Kind::value, 0, 0, 1.5}, false};
  EXPECT_EQ(triton::element_value("bf16", triton::initial_bytes(v, 7).data(), 2), 1.5);
  triton::TensorArg ints{"i32", {1000}, {1}, {triton::TensorInit::Kind::uniform, -3, 3, 0}, false};
  const auto ib = triton::initial_bytes(ints, 9);
  for (int64_t i = 0; i < 1000; ++i) {
    const double x = triton::element_value("i32", ib.data(), i);
    EXPECT_EQ(x, std::floor(x));
    EXPECT_GE(x, -3);
    EXPECT_LE(x, 2);
  }
}

std::vector<uint8_t> f16s(const std::vector<float>& xs) {
  std::vector<uint8_t> b(xs.size() * 2);
  for (size_t i = 0; i < xs.size(); ++i) {
    const uint16_t h = f16_bits(xs[i]);
    std::memcpy(b.data() + 2 * i, &h, 2);
  }
  return b;
}

TEST(UserArgs, CompareRule) {
  const auto ref = f16s({1.0f, 0.5f, NAN, 2.0f, -1.0f});
  // One fp16 ulp off at 1.0 (2^-10) differs bitwise and is within 1e-3 + 1e-3 * 1.
  auto got = f16s({1.0f + 0.0009765625f, 0.5f, NAN, 2.0f, -1.0f});
  const triton::OutputTolerance bitwise{}, loose{false, 1e-3, 1e-3};
  auto d = triton::compare_host("fp16", ref.data(), got.data(), 5, bitwise);
  EXPECT_EQ(d.mismatches, 1);
  EXPECT_EQ(d.first, 0);
  EXPECT_NEAR(d.max_abs_error, 0.0009765625, 1e-12);
  EXPECT_EQ(triton::compare_host("fp16", ref.data(), got.data(), 5, loose).mismatches, 0);
  // NaN equals NaN under a tolerance; a number where the reference has NaN, and the reverse, do not.
  got = f16s({1.0f, 0.5f, 3.0f, NAN, -1.0f});
  d = triton::compare_host("fp16", ref.data(), got.data(), 5, loose);
  EXPECT_EQ(d.mismatches, 2);
  EXPECT_EQ(d.first, 2);
  EXPECT_TRUE(std::isnan(d.first_ref));
  EXPECT_EQ(d.first_got, 3.0);
  // Beyond the tolerance: 2% at -1.
  got = f16s({1.0f, 0.5f, NAN, 2.0f, -1.02f});
  d = triton::compare_host("fp16", ref.data(), got.data(), 5, loose);
  EXPECT_EQ(d.mismatches, 1);
  EXPECT_EQ(d.first, 4);
  // Integers compare exactly whatever the tolerance.
  const int32_t ri[3] = {1, 2, 3}, gi[3] = {1, 2, 4};
  EXPECT_EQ(triton::compare_host("i32", ri, gi, 3, loose).mismatches, 1);
}

TEST(UserArgs, ToleranceByReleaseAndFile) {
  triton::ToleranceRule none;
  EXPECT_TRUE(triton::tolerance_for_output(none, "fp16", true).bitwise);   // same release: bitwise
  const auto t = triton::tolerance_for_output(none, "bf16", false);        // else the default
  EXPECT_FALSE(t.bitwise);
  EXPECT_DOUBLE_EQ(t.rtol, 1.6e-2);
  EXPECT_TRUE(triton::tolerance_for_output(none, "i32", false).bitwise);   // integers: exact
  kbtest::TestDir tmp("kb-user-args");
  std::string text = read_file(kData + "/mutant.yaml");
  text.replace(text.find("  grid:"), 0, "  tolerance: {fp16: {atol: 0.01, rtol: 0}}\n");
  write_file_atomic(tmp.path + "/k.yaml", text);
  write_file_atomic(tmp.path + "/mutant.py", read_file(kData + "/mutant.py"));
  const triton::UserKernel k = triton::parse_user_kernel(tmp.path + "/k.yaml");
  const auto u = triton::tolerance_for_output(k.tolerance, "fp16", true);  // the file's, even for one release
  EXPECT_FALSE(u.bitwise);
  EXPECT_DOUBLE_EQ(u.atol, 0.01);
  EXPECT_EQ(k.bytes, "4 * n_rows * n_cols");
  EXPECT_EQ(triton::user_kernel_work(k, k.bytes, k.shapes[0], Params{}), 4.0 * 1024 * 768);
  // Bad tolerances and tensors: the file, the line and the field.
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"  tolerance: {fp8: {atol: 1}}\n", "tolerance.fp8: not a floating type"},
      {"  tolerance: {fp16: {atol: -1}}\n", "must not be negative"},
      {"  tolerance: loose\n", "'tolerance' must be 'bitwise' or a mapping"},
  };
  for (const auto& [line, want] : bad) {
    std::string t2 = read_file(kData + "/mutant.yaml");
    t2.replace(t2.find("  grid:"), 0, line);
    write_file_atomic(tmp.path + "/bad.yaml", t2);
    expect_refused(tmp.path + "/bad.yaml", want);
  }
  const std::vector<std::pair<std::string, std::string>> bad_args = {
      {"dtype: fp16, init: zeros}", "dtype: fp32, init: zeros}"},     // not the pointer's type
      {"dtype: fp16, init: zeros}", "dtype: fp16, strides: [1]}"},    // strides of another rank
      {"dtype: fp16, init: zeros}", "dtype: fp16, init: random}"},    // an unknown init
      {"init: {uniform: [-4, 4]}", "init: {uniform: [4, -4]}"},
      {"{name: row_stride, type: i32}", "{type: i32}"},  // found by fuzz_yaml: an exception escaped
      {"{name: row_stride, type: i32}", "{[x]: 1, name: row_stride, type: i32}"},  // the same: a key not a name
  };
  const std::vector<std::string> wants = {"is not the signature's element type", "strides has 1 entries",
                                          "init must be zeros", "lo 4 is not below hi -4",
                                          "signature entry has no 'name'", "'a key of signature entry' must be a scalar"};
  for (size_t i = 0; i < bad_args.size(); ++i) {
    std::string t2 = read_file(kData + "/mutant.yaml");
    t2.replace(t2.find(bad_args[i].first), bad_args[i].first.size(), bad_args[i].second);
    write_file_atomic(tmp.path + "/bad.yaml", t2);
    expect_refused(tmp.path + "/bad.yaml", wants[i]);
  }
}

#if KBISECT_WITH_CUDA
// A user kernel compiled on the cuda backend by the preset Triton toolchain `toolchain` into `dir`, with its
// file's parameters; nullopt when that toolchain is not installed. Throws what the compile throws.
std::optional<Artifact> compile_user(const triton::UserKernel& k, const std::string& toolchain, DType dtype,
                                     const std::string& dir) {
  Backend& cuda = *find_backend("cuda");
  Toolchain tc;
  for (auto& t : cuda.presets())
    if (t.name == toolchain) tc = t;
  if (tc.name.empty()) return std::nullopt;
  resolve_identity(tc);
  const KernelDecl* decl = nullptr;
  for (const KernelDecl* d : triton::user_kernel_decls("cuda"))
    if (d->name == k.name) decl = d;
  if (!decl) throw Error(k.name + " is not registered");
  CompileRequest req;
  req.kernel = decl;
  req.params = decl->complete({});
  req.dtype = dtype;
  req.toolchain = &tc;
  req.kernel_dir = kernel_dir();
  req.out_dir = dir;
  make_dirs(dir);
  return cuda.compile(req);
}

// The launch of a real Triton 3.5.1 build of the user's attention: every argument in the PTX's order and
// width, pointers at the tensors' device pointers, the fp32 scale as its float bits, the hidden scratch
// pointers last; a width the PTX disagrees with is refused.
TEST(UserArgs, LaunchOfARealBuildBindsEveryArgumentAtItsWidth) {
  const std::string py = triton::triton_env_root() + "/triton-3.5.1/bin/python";
  if (!file_exists(py)) GTEST_SKIP() << py << " missing: run scripts/install-deps";
  const triton::UserKernel& k = triton::load_user_kernel(kData + "/attention.yaml");
  kbtest::TestDir tmp("kb-user-launch");
  const auto art = compile_user(k, "triton-3.5.1-sm90a", DType::bf16, tmp.path + "/b");
  ASSERT_TRUE(art);
  const cuda::TritonLaunch t = cuda::TritonLaunch::read(*art);
  ASSERT_EQ(t.ptx_param_bytes.size(), size_t(t.ptx_params));
  EXPECT_EQ(t.ptx_param_bytes[0], 8);
  EXPECT_EQ(t.ptx_param_bytes[5], 4);  // scale: .f32
  cuda::UserTensors tensors(k, "h32-s4096");
  auto ptrs = tensors.pointers();  // no device here: the addresses of the (unallocated) pointers
  EXPECT_EQ(ptrs.size(), 4u);
  const Shape& shape = k.shapes[0];
  auto b = t.plan(shape, 132);
  EXPECT_EQ(b.grid[0], 4096u / 128u);
  EXPECT_EQ(b.grid[1], 32u);
  cuda::DevicePtr g = 0, p = 0;
  t.bind(b, shape, 132, ptrs, tensors.args().reals, &g, &p);
  ASSERT_EQ(b.argv.size(), size_t(t.ptx_params));
  EXPECT_EQ(b.argv[0], ptrs.at("q_ptr"));
  EXPECT_EQ(b.argv[3], ptrs.at("o_ptr"));
  float scale = 0;
  std::memcpy(&scale, b.argv[5], 4);
  EXPECT_FLOAT_EQ(scale, 0.0884f);
  EXPECT_EQ(*static_cast<int32_t*>(b.argv[4]), 4096);  // seq_len
  EXPECT_EQ(b.argv[t.params.size()], &g);              // global scratch, then profile scratch
  // The record says fp64 where the PTX has a 4-byte parameter: refused, never launched.
  cuda::TritonLaunch wrong = t;
  wrong.params[5].type = "fp64";
  try {
    wrong.bind(b, shape, 132, ptrs, {{"scale", 0.0884}}, &g, &p);
    FAIL() << "a width the PTX disagrees with must be refused";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("launch ABI"), std::string::npos) << e.what();
  }
  // The comparison kernel compiles for Hopper and Ampere (it runs in the GPU check).
  EXPECT_FALSE(cuda::compare_cubin(90).empty());
  EXPECT_FALSE(cuda::compare_cubin(80).empty());
}

// A host tensor descriptor, compiled by real Triton releases: 3.5.1 lowers it to TMA on sm_90a (a 128-byte
// CUtensorMap by value, then the shape as i32 and the strides as i64) and not on sm_80 (the base pointer,
// shape and strides as i64, the padding flag, then shape and strides again); both expansions must match
// the real PTX's parameters, or read() refuses the build. 3.3.1 has no tensordesc: skipped with the reason.
TEST(UserArgs, HostTensorDescriptorsExpandAsTheRealPtxSays) {
  const std::string py = triton::triton_env_root() + "/triton-3.5.1/bin/python";
  if (!file_exists(py)) GTEST_SKIP() << py << " missing: run scripts/install-deps";
  const triton::UserKernel& k = triton::load_user_kernel(kData + "/tma.yaml");
  const triton::TensorArg& in = k.launches.at("2048x1024").tensors.at("in_desc");
  EXPECT_EQ(in.strides, (std::vector<int64_t>{1024, 1}));
  EXPECT_EQ(triton::tensordesc_block("tensordesc<fp16[64, 64]>"), (std::vector<int64_t>{64, 64}));
  EXPECT_TRUE(triton::tensordesc_block("tensordesc<fp16[64, x]>").empty());
  kbtest::TestDir tmp("kb-user-tma");
  auto build = [&](const std::string& name, const std::string& dir) {
    return compile_user(k, name, DType::f16, tmp.path + "/" + dir);
  };
  const auto hopper = build("triton-3.5.1-sm90a", "sm90a");
  ASSERT_TRUE(hopper);
  const cuda::TritonLaunch t = cuda::TritonLaunch::read(*hopper);  // the count matches the PTX, or it throws
  ASSERT_EQ(t.tensordesc_meta.size(), 1u);
  ASSERT_TRUE(t.tensordesc_meta[0]);
  EXPECT_EQ(t.tensordesc_meta[0]->block, (std::vector<int64_t>{64, 64}));
  EXPECT_EQ(t.expanded_param_count(), 1 + 2 + 2 + 3);
  EXPECT_EQ(t.ptx_param_bytes, (std::vector<int>{128, 4, 4, 8, 8, 8, 4, 4, 8, 8}));
  // Binding it encodes a CUtensorMap with the driver: without one, a clear error naming the argument.
  cuda::UserTensors tensors(k, "2048x1024");
  auto b = t.plan(k.shapes[0], 132);
  EXPECT_EQ(b.grid[0], 32u);
  EXPECT_EQ(b.grid[1], 16u);
  cuda::DevicePtr g = 0, p = 0;
  try {
    t.bind(b, k.shapes[0], 132, tensors.pointers(), tensors.args().reals, &g, &p, &tensors.args().tensors);
    SUCCEED() << "a driver is present";
  } catch (const EnvError& e) {
    EXPECT_NE(std::string(e.what()).find("encoding tensor descriptor in_desc"), std::string::npos) << e.what();
  }
  const auto ampere = build("triton-3.5.1-sm80", "sm80");
  ASSERT_TRUE(ampere);
  const cuda::TritonLaunch a = cuda::TritonLaunch::read(*ampere);
  EXPECT_TRUE(a.tensordesc_meta.empty() || !a.tensordesc_meta[0]);
  EXPECT_EQ(a.expanded_param_count(), 2 + 4 * 2 + 3);
  // Without TMA nothing is encoded: the whole argument list binds at the PTX's widths here.
  auto ba = a.plan(k.shapes[0], 108);
  a.bind(ba, k.shapes[0], 108, tensors.pointers(), tensors.args().reals, &g, &p, &tensors.args().tensors);
  ASSERT_EQ(ba.argv.size(), size_t(a.ptx_params));
  EXPECT_EQ(*static_cast<int64_t*>(ba.argv[1]), 2048);  // shape[0] as i64
  EXPECT_EQ(*static_cast<int64_t*>(ba.argv[3]), 1024);  // strides[0]
  EXPECT_EQ(*static_cast<uint8_t*>(ba.argv[5]), 0);     // padding: zeros
  EXPECT_EQ(*static_cast<int32_t*>(ba.argv[6]), 2048);  // shape again, as i32
  EXPECT_EQ(*static_cast<int32_t*>(ba.argv[7]), 1024);
  // Triton 3.3.1 has no tensordesc type: skipped, naming the argument and the release needed.
  try {
    build("triton-3.3.1-sm90a", "old");
    FAIL() << "3.3.1 must skip a tensordesc kernel";
  } catch (const CompileSkipped& e) {
    EXPECT_NE(std::string(e.what()).find("in_desc is a host tensor descriptor"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("Triton 3.4 or later"), std::string::npos) << e.what();
  }
}
#endif

}  // namespace
}  // namespace kb
