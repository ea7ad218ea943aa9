// Which build is a user kernel's reference and how the others are held to it (harness/user_check.h): the
// first toolchain that runs a case is its baseline, a build of the same release must match it bitwise, one of
// another release within the tolerance, the file's tolerance wins, and the failure names the output and the
// first differing element. The outputs here live in host memory (a HostOutputs executable compares them
// with triton::compare_host, the rule the CUDA comparison kernel implements on the device); the device
// path itself runs in scripts/gpu-check.sh step (i).
#include <cstring>

#include <gtest/gtest.h>

#include "backends/half_bits.h"
#include "harness/user_check.h"

namespace kb {
namespace {

struct HostSnapshot : OutputSnapshot {
  std::vector<uint8_t> bytes_;
  int64_t bytes() const override { return int64_t(bytes_.size()); }
};

// One fp16 output of n elements, its values set by the test.
class HostOutputs : public Executable {
 public:
  explicit HostOutputs(std::vector<float> values) {
    for (float v : values) {
      const uint16_t h = f16_bits(v);
      out_.push_back(uint8_t(h & 0xff));
      out_.push_back(uint8_t(h >> 8));
    }
  }
  void prepare(const Shape&, const std::vector<float>&, const std::vector<float>&) override {}
  TimedSample run(int) override { return {}; }
  void flush_caches() override {}
  std::vector<float> result() override { return {}; }
  std::string clock_name() const override { return "none"; }
  std::shared_ptr<const OutputSnapshot> snapshot_outputs() override {
    auto s = std::make_shared<HostSnapshot>();
    s->bytes_ = out_;
    return s;
  }
  OutputCheck compare_outputs(const OutputSnapshot& ref, const ToleranceOf& tol) override {
    const auto& r = dynamic_cast<const HostSnapshot&>(ref);
    OutputCheck c;
    c.outputs.emplace_back("out_ptr", triton::compare_host("fp16", r.bytes_.data(), out_.data(),
                                                           int64_t(out_.size() / 2), tol("fp16")));
    return c;
  }

 private:
  std::vector<uint8_t> out_;
};

Toolchain triton_tc(const std::string& name, const std::string& release) {
  Toolchain t;
  t.name = name;
  t.version_text = "triton " + release + " (/envs/" + name + ")";
  return t;
}

TEST(UserCheck, TheFirstToolchainIsTheBaselineAndTheOthersAreHeldToIt) {
  triton::UserKernel k;
  k.name = "user_softmax";
  OutputReferences refs;
  const std::string key = "user_softmax[BLOCK=1024]/f16/1024x768";
  const std::vector<float> good = {0.25f, 0.5f, 0.125f, 1.0f};
  const Params P{{"BLOCK", int64_t(1024)}, {"opt.num_warps", int64_t(4)}};

  HostOutputs base(good);
  Check c = check_user_outputs(key, triton_tc("triton-3.5.1-sm90a", "3.5.1"), P, k, base, refs);
  EXPECT_TRUE(c.ok);
  EXPECT_EQ(c.method, "baseline");

  // The same release one fp16 ulp off at 1.0: bitwise, so incorrect, naming the element.
  HostOutputs ulp({0.25f, 0.5f, 0.125f, 1.0f + 0.0009765625f});
  c = check_user_outputs(key, triton_tc("triton-3.5.1-sm90a-other-flags", "3.5.1"), P, k, ulp, refs);
  EXPECT_FALSE(c.ok);
  EXPECT_NE(c.method.find("bitwise"), std::string::npos) << c.method;
  EXPECT_NE(c.detail.find("output out_ptr (fp16): 1 of 4 elements differ from triton-3.5.1-sm90a's (bitwise); "
                          "the first at storage index 3"), std::string::npos) << c.detail;
  // Another release: within the fp16 default (1e-5 + 1e-3 |ref|) it is correct ...
  c = check_user_outputs(key, triton_tc("triton-3.3.1-sm90a", "3.3.1"), P, k, ulp, refs);
  EXPECT_TRUE(c.ok) << c.detail;
  EXPECT_NE(c.method.find("tolerance"), std::string::npos) << c.method;
  EXPECT_NEAR(c.max_error, 0.0009765625, 1e-9);
  EXPECT_EQ(c.checked, 4);
  // ... a wrong tile is not.
  HostOutputs wrong({0.25f, 1.0f, 0.125f, 1.0f});
  c = check_user_outputs(key, triton_tc("triton-3.2.0-sm90a", "3.2.0"), P, k, wrong, refs);
  EXPECT_FALSE(c.ok);
  EXPECT_NE(c.detail.find("beyond atol 1e-05 + rtol 0.001"), std::string::npos) << c.detail;

  // The file's tolerance applies to the same release too; `bitwise` to every release.
  k.tolerance.by_dtype["fp16"] = {false, 2e-3, 0};
  c = check_user_outputs(key, triton_tc("triton-3.5.1-sm90a-other-flags", "3.5.1"), P, k, ulp, refs);
  EXPECT_TRUE(c.ok) << c.detail;
  k.tolerance = {};
  k.tolerance.always_bitwise = true;
  c = check_user_outputs(key, triton_tc("triton-3.3.1-sm90a", "3.3.1"), P, k, ulp, refs);
  EXPECT_FALSE(c.ok);

  // A tuned point (another value of a tunable parameter) is held to the same baseline, within tolerance,
  // even for the same release: another tiling may reduce in another order.
  k.tolerance = {};
  const Params tuned{{"BLOCK", int64_t(1024)}, {"opt.num_warps", int64_t(8)}};
  c = check_user_outputs(key, triton_tc("triton-3.5.1-sm90a", "3.5.1"), tuned, k, ulp, refs);
  EXPECT_TRUE(c.ok) << c.detail;
  EXPECT_NE(c.method.find("against triton-3.5.1-sm90a [BLOCK=1024,opt.num_warps=4] (tolerance"), std::string::npos) << c.method;
  c = check_user_outputs(key, triton_tc("triton-3.5.1-sm90a", "3.5.1"), tuned, k, wrong, refs);
  EXPECT_FALSE(c.ok);

  // Another case (another shape) has its own baseline.
  c = check_user_outputs("user_softmax[BLOCK=1024]/f16/4096x1000", triton_tc("triton-3.3.1-sm90a", "3.3.1"), P, k, wrong, refs);
  EXPECT_EQ(c.method, "baseline");
}

// The reference key leaves out the tunable parameters (what tune varies) and keeps the fixed ones.
TEST(UserCheck, ReferenceKeyIgnoresTunableParameters) {
  KernelDecl d;
  d.name = "user_attention_fwd";
  d.space = {{"BLOCK_Q", {int64_t(64), int64_t(128)}}, {"opt.num_warps", {int64_t(4), int64_t(8)}}};
  Shape s;
  s.label = "h32-s4096";
  const Params a{{"HEAD_DIM", int64_t(128)}, {"BLOCK_Q", int64_t(64)}, {"opt.num_warps", int64_t(4)}};
  const Params b{{"HEAD_DIM", int64_t(128)}, {"BLOCK_Q", int64_t(128)}, {"opt.num_warps", int64_t(8)}};
  const Params c{{"HEAD_DIM", int64_t(64)}, {"BLOCK_Q", int64_t(64)}, {"opt.num_warps", int64_t(4)}};
  EXPECT_EQ(user_reference_key(d, a, DType::bf16, s), user_reference_key(d, b, DType::bf16, s));
  EXPECT_NE(user_reference_key(d, a, DType::bf16, s), user_reference_key(d, c, DType::bf16, s));
  EXPECT_EQ(user_reference_key(d, a, DType::bf16, s), "user_attention_fwd[HEAD_DIM=128]/bf16/h32-s4096");
}

TEST(UserCheck, SnapshotsBeyondTheBudgetAreDroppedOldestFirst) {
  OutputReferences refs(20);  // bytes
  for (int i = 0; i < 4; ++i) {
    auto s = std::make_shared<HostSnapshot>();
    s->bytes_.assign(8, uint8_t(i));
    refs.put("case" + std::to_string(i), {s, "tc", "3.5.1", ""});
  }
  EXPECT_FALSE(refs.find("case0"));
  EXPECT_FALSE(refs.find("case1"));
  EXPECT_TRUE(refs.find("case2"));
  EXPECT_TRUE(refs.find("case3"));
  EXPECT_EQ(triton_release(triton_tc("x", "3.5.1")), "3.5.1");
  Toolchain nvcc;
  nvcc.version_text = "Cuda compilation tools, release 13.0";
  EXPECT_EQ(triton_release(nvcc), "");
}

}  // namespace
}  // namespace kb
