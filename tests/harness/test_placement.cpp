// Every fresh-load block must land somewhere new: a real CPU kernel loaded block after block in one
// process gets a new code address for its entry and new operand addresses each time (a dlopen after
// dlclose, or an mmap after munmap, would otherwise return the same address in every block), and ab's
// block design records where each block's loads were. With the block worker, every block is measured in
// a process of its own, so everything the process keeps fixed moves too.
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "backends/backend.h"
#include "backends/cache.h"
#include "backends/cpu/placement.h"
#include "backends/toolchain.h"
#include "core/error.h"
#include "core/fsutil.h"
#include "core/rng.h"
#include "harness/ab.h"
#include "harness/block_worker.h"
#include "harness/measure.h"
#include "tests/common/test_tmp.h"

using namespace kb;

namespace {

// One compiled CPU kernel and factories that load it afresh and prepare it on a small GEMM.
struct LoadedKernel {
  Backend& be = *find_backend("cpu");
  kbtest::TestDir cache_dir{"kb-placement-cache"};
  CompileCache cache{cache_dir.path};
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
  // The same load, with the recipe a block worker makes it from.
  ExecutableFactory factory() {
    const std::shared_ptr<void> none;
    auto r = std::make_shared<LoadRecipe>(LoadRecipe{art, shape, {none, &A}, {none, &B}});
    return ExecutableFactory([this] { return load(); }, r);
  }
};

// Sets an environment variable for one scope.
struct ScopedEnv {
  std::string name;
  ScopedEnv(const std::string& n, const char* v) : name(n) {
    if (v) setenv(n.c_str(), v, 1); else unsetenv(n.c_str());
  }
  ~ScopedEnv() { unsetenv(name.c_str()); }
};

MeasureConfig quick(const std::string& placement = "loads") {
  MeasureConfig m;
  m.warmup_s = 0;
  m.placement = placement;
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
  std::set<uintptr_t> entries, operands, heaps, scratches;
  const int blocks = 8;
  for (int b = 0; b < blocks; ++b) {
    const auto ms = measure_fresh_block(make, quick(), 2, 30, rng);
    ASSERT_EQ(ms.size(), 2u);
    for (const auto& m : ms) {
      ASSERT_EQ(m.placements.size(), 1u);
      const std::string& p = m.placements[0];
      EXPECT_TRUE(entries.insert(field(p, "entry")).second) << "block " << b << " reuses a code address: " << p;
      operands.insert(field(p, "A") / page_bytes());
      heaps.insert(field(p, "heap"));
    }
    EXPECT_EQ(field(ms[0].placements[0], "scratch"), field(ms[1].placements[0], "scratch")) << "one measuring thread";
    // Its page within its malloc arena (thread arenas are 64 MiB-aligned; which arena a thread gets varies).
    scratches.insert((field(ms[0].placements[0], "scratch") & ((uintptr_t(64) << 20) - 1)) / page_bytes());
  }
  EXPECT_EQ(entries.size(), size_t(2 * blocks));
  // The operands move by a random gap of 0..1024 pages, so two of the 16 loads can draw one page (about 1 run
  // in 20 did), not many.
  EXPECT_GE(operands.size(), size_t(2 * blocks - 2));
  EXPECT_GT(heaps.size(), size_t(blocks));  // the heap moves too (two equal draws are possible, not many)
  // The kernels' scratch comes from the measuring thread's own malloc arena, which the loads' heap gaps do
  // not reach: it moves by that thread's gap (equal draws possible, not many).
  EXPECT_GE(scratches.size(), size_t(blocks - 2));
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

TEST(BlockWorker, EveryBlockIsMeasuredInAFreshProcessWithItsOwnPlacement) {
  LoadedKernel k;
  ScopedEnv env("KBISECT_BLOCK_WORKER", nullptr);
  ASSERT_NE(block_worker_path(), "") << "kbisect-worker is built next to the tests' directory";
  const std::vector<ExecutableFactory> make = {k.factory(), k.factory()};
  Rng rng(5);
  std::set<uintptr_t> entries, stacks;
  std::set<std::string> workers;
  const int blocks = 5;
  for (int b = 0; b < blocks; ++b) {
    const auto ms = measure_fresh_block(make, quick("process"), 3, 30, rng);
    ASSERT_EQ(ms.size(), 2u);
    std::string worker;
    for (const auto& m : ms) {
      ASSERT_EQ(m.samples_s.size(), 3u);
      for (double s : m.samples_s) EXPECT_GT(s, 0);
      ASSERT_EQ(m.placements.size(), 1u);
      const std::string& p = m.placements[0];
      const auto at = p.find(" worker=");
      ASSERT_NE(at, std::string::npos) << "measured in this process: " << p;
      const std::string pid = p.substr(at + 8);
      EXPECT_NE(pid, std::to_string(getpid()));
      if (worker.empty()) worker = pid;
      EXPECT_EQ(pid, worker) << "both sides of a block are measured in one process";
      EXPECT_TRUE(entries.insert(field(p, "entry")).second) << "block " << b << " reuses a code address: " << p;
      stacks.insert(field(p, "stack"));
    }
    EXPECT_TRUE(workers.insert(worker).second) << "block " << b << " reuses worker " << worker;
    EXPECT_EQ(ms[0].conditions.mode, "hot");
    EXPECT_TRUE(ms[0].conditions.interleaved);
  }
  EXPECT_EQ(entries.size(), size_t(2 * blocks));
  EXPECT_EQ(stacks.size(), size_t(blocks));
}

namespace {
// This process's children that are block workers, by /proc (comm and parent).
int worker_children() {
  int n = 0;
  for (const auto& d : std::filesystem::directory_iterator("/proc")) {
    std::ifstream f(d.path() / "stat");
    std::string stat;
    if (!std::getline(f, stat)) continue;
    const auto open = stat.find('('), close = stat.rfind(')');
    if (open == std::string::npos || close == std::string::npos) continue;
    std::istringstream rest(stat.substr(close + 2));
    char state = 0;
    long ppid = 0;
    rest >> state >> ppid;
    if (stat.substr(open + 1, close - open - 1) == "kbisect-worker" && ppid == long(getpid())) ++n;
  }
  return n;
}
}  // namespace

TEST(BlockWorker, TheNextBlocksWorkerWaitsParkedAndNoneIsLeftBehind) {
  LoadedKernel k;
  ScopedEnv env("KBISECT_BLOCK_WORKER", nullptr);
  const std::vector<ExecutableFactory> make = {k.factory(), k.factory()};
  Rng rng(11);
  for (int b = 0; b < 2; ++b) ASSERT_EQ(measure_fresh_block(make, quick("process"), 3, 30, rng).size(), 2u);
  EXPECT_EQ(worker_children(), 1) << "one worker started ahead for the next block";
  // A block of another request (other rounds): the parked worker cannot measure it and is ended.
  ASSERT_EQ(measure_fresh_block(make, quick("process"), 2, 30, rng).size(), 2u);
  EXPECT_EQ(worker_children(), 1) << "the earlier request's worker ended, one parked for this one";
}

TEST(BlockWorker, AbWithRecipesMeasuresEveryBlockInAWorker) {
  LoadedKernel k;
  stats::DecisionConfig d;
  d.min_n = d.max_n = 3;
  MeasureConfig m = quick("process");
  m.warmup_s = 0.05;  // above a warm process's per-block warmup: every block still asks the same
  const BlockWorkerCounts before = block_worker_counts();
  const PairOutcome po = measure_and_decide_blocks({k.factory(), k.factory()}, m, d, 60, 2);
  ASSERT_EQ(po.block_effects.size(), 3u);
  EXPECT_GE(block_worker_counts().used_ahead - before.used_ahead, 2) << "blocks 2 and 3 use the workers started ahead";
  for (const auto& m : po.m) {
    ASSERT_EQ(m.samples_s.size(), 6u);
    for (const auto& p : m.placements) EXPECT_NE(p.find(" worker="), std::string::npos) << p;
  }
}

TEST(BlockWorker, LoadsPlacementStaysInThisProcessAndBadSettingsAreNamed) {
  LoadedKernel k;
  const std::vector<ExecutableFactory> make = {k.factory(), k.factory()};
  Rng rng(7);
  EXPECT_EQ(MeasureConfig().placement, "loads") << "the library's default; ab and bisect choose their own";
  const auto ms = measure_fresh_block(make, quick("loads"), 2, 30, rng);
  ASSERT_EQ(ms.size(), 2u);
  EXPECT_EQ(ms[0].placements.at(0).find("worker="), std::string::npos) << ms[0].placements[0];
  // Loads without a recipe (the GPU backends') cannot go to a worker: measured here under "process" too.
  const ExecutableFactory plain([&] { return k.load(); });
  const auto here = measure_fresh_block({plain, plain}, quick("process"), 2, 30, rng);
  ASSERT_EQ(here.size(), 2u);
  EXPECT_EQ(here[0].placements.at(0).find("worker="), std::string::npos) << here[0].placements[0];
  try {
    measure_fresh_block(make, quick("elsewhere"), 2, 30, rng);
    FAIL() << "an unknown placement was accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("placement 'elsewhere'"), std::string::npos) << e.what();
  }
  ScopedEnv env("KBISECT_BLOCK_WORKER", "/nonexistent/kbisect-worker");
  try {
    measure_fresh_block(make, quick("process"), 2, 30, rng);
    FAIL() << "a worker path that is not a program was accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("KBISECT_BLOCK_WORKER=/nonexistent/kbisect-worker"), std::string::npos)
        << e.what();
  }
}

TEST(BlockWorker, ALoadThatFailsInTheWorkerFailsWithItsMessage) {
  LoadedKernel k;
  const std::string worker = block_worker_path();
  ASSERT_NE(worker, "");
  LoadRecipe bad{k.art, k.shape, {std::shared_ptr<void>(), &k.A}, {std::shared_ptr<void>(), &k.B}};
  bad.artifact.binary_path = "/nonexistent/kernel.so";
  const std::vector<ExecutableFactory> make = {
      k.factory(), ExecutableFactory([&] { return k.load(); }, std::make_shared<LoadRecipe>(bad))};
  Rng rng(9);
  try {
    measure_block_in_worker(worker, make, quick(), 2, 30, rng);
    FAIL() << "a block whose load fails in the worker returned";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("exit 1"), std::string::npos) << what;
    EXPECT_NE(what.find("/nonexistent/kernel.so"), std::string::npos) << what;
  }
}

TEST(BlockWorker, ABadRequestIsRefusedInOneLine) {
  for (const std::string& req : {std::string("not json\n"), std::string(""),
                                 std::string(R"({"rounds":2,"max_time_s":1,"seed":1,"mode":"hot","warmup_s":0,)"
                                             R"("min_sample_s":0,"loads":[],"arrays":[1000]})"
                                             "\n\x01\x02")}) {
    std::istringstream in(req);
    std::ostringstream out, err;
    EXPECT_EQ(block_worker_main(in, out, err), 2) << req;
    EXPECT_EQ(out.str(), "");
    const std::string e = err.str();
    EXPECT_EQ(e.rfind("kbisect-worker: bad request: ", 0), 0u) << e;
    EXPECT_EQ(std::count(e.begin(), e.end(), '\n'), 1) << e;
  }
}
