// Every fresh-load block must land somewhere new: a real CPU kernel loaded block after block in one
// process gets a new code address for its entry and new operand addresses each time (a dlopen after
// dlclose, or an mmap after munmap, would otherwise return the same address in every block), and ab's
// block design records where each block's loads were.
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "backends/backend.h"
#include "backends/cache.h"
#include "backends/cpu/placement.h"
#include "backends/toolchain.h"
#include "core/fsutil.h"
#include "core/rng.h"
#include "harness/ab.h"
#include "harness/measure.h"

using namespace kb;

namespace {

// One compiled CPU kernel and factories that load it afresh and prepare it on a small GEMM.
struct LoadedKernel {
  Backend& be = *find_backend("cpu");
  CompileCache cache{temp_dir("kb-placement-cache")};
  Toolchain tc;
  Artifact art;
  Shape shape{32, 32, 32};
  std::vector<float> A = std::vector<float>(32 * 32, 1.f), B = std::vector<float>(32 * 32, 0.5f);

  LoadedKernel() {
    tc = find_toolchain("clang-19");
    resolve_identity(tc);
    const KernelDecl& k = find_kernel("cpu", "matmul_tiled");
    CompileRequest req;
    req.kernel = &k;
    req.params = k.complete({});
    req.toolchain = &tc;
    req.kernel_dir = kernel_dir();
    art = cache.compile(be, req);
  }
  std::unique_ptr<Executable> load() {
    auto e = be.load(art);
    e->prepare(shape, A, B);
    return e;
  }
};

MeasureConfig quick() {
  MeasureConfig m;
  m.warmup_s = 0;
  return m;
}

uintptr_t field(const std::string& placement, const std::string& name) {
  const auto at = placement.find(name + "=");
  EXPECT_NE(at, std::string::npos) << placement;
  return at == std::string::npos ? 0 : uintptr_t(std::stoull(placement.substr(at + name.size() + 1), nullptr, 16));
}

}  // namespace

TEST(Placement, EveryBlockOfOneProcessLoadsCodeAndOperandsAtNewAddresses) {
  LoadedKernel k;
  const std::vector<ExecutableFactory> make = {[&] { return k.load(); }, [&] { return k.load(); }};
  Rng rng(3);
  std::set<uintptr_t> entries, operands, heaps;
  const int blocks = 8;
  for (int b = 0; b < blocks; ++b) {
    const auto ms = measure_fresh_block(make, quick(), 2, 30, rng);
    ASSERT_EQ(ms.size(), 2u);
    for (const auto& m : ms) {
      ASSERT_EQ(m.placements.size(), 1u);
      const std::string& p = m.placements[0];
      EXPECT_TRUE(entries.insert(field(p, "entry")).second) << "block " << b << " reuses a code address: " << p;
      EXPECT_TRUE(operands.insert(field(p, "A") / page_bytes()).second) << "block " << b << " reuses A's page: " << p;
      heaps.insert(field(p, "heap"));
    }
  }
  EXPECT_EQ(entries.size(), size_t(2 * blocks));
  EXPECT_GT(heaps.size(), size_t(blocks));  // the heap moves too (two equal draws are possible, not many)
}

TEST(Placement, AbBlocksRecordEachSidesPlacementPerBlock) {
  LoadedKernel k;
  stats::DecisionConfig d;
  d.min_n = d.max_n = 4;
  const PairFactory make = [&](int) { return k.load(); };
  const PairOutcome po = measure_and_decide_blocks(make, quick(), d, 60, 2);
  ASSERT_EQ(po.block_effects.size(), 4u);
  std::set<uintptr_t> entries;
  for (const auto& m : po.m) {
    ASSERT_EQ(m.placements.size(), 4u);
    for (const auto& p : m.placements) entries.insert(field(p, "entry"));
  }
  EXPECT_EQ(entries.size(), 8u);
}

TEST(Placement, NonCpuExecutablesHaveNone) {
  struct Fake : Executable {
    void prepare(const Shape&, const std::vector<float>&, const std::vector<float>&) override {}
    TimedSample run(int) override { return {}; }
    void flush_caches() override {}
    std::vector<float> result() override { return {}; }
    std::string clock_name() const override { return "none"; }
  } fake;
  EXPECT_FALSE(placement_of(fake).has_value());
  EXPECT_EQ(fake.placement(), "");
}
