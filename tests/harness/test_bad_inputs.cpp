// Bad input a new user gives the sweep: a shape too large for memory is a skipped case whose reason says
// how much it needs (the sweep goes on), and `-o` naming an existing regular file is bad input (exit 2).
#include <gtest/gtest.h>

#include "core/error.h"
#include "core/fsutil.h"
#include "core/process.h"
#include "harness/results.h"
#include "harness/sweep.h"

using namespace kb;

namespace {

RunResult kbisect(std::vector<std::string> args) {
  args.insert(args.begin(), KBISECT_BINARY_DIR "/kbisect");
  RunOptions po;
  po.timeout_s = 600;
  return run_process(args, po);
}

const char* kHugeSweep = R"(
toolchains: [g++]
benchmarks:
  - kernel: matmul_tiled
    shapes: [[1000000, 1000000, 1000000]]
)";

}  // namespace

TEST(BadInput, ShapeMemoryIsCheckedBeforeAllocating) {
  // (3 * 1e12 elements) * 4 bytes.
  auto why = shape_memory_reason({1000000, 1000000, 1000000});
  ASSERT_TRUE(why);
  EXPECT_NE(why->find("needs 12 TB of operands"), std::string::npos) << *why;
  // 3 * 1e8 * 4 = 1.2 GB against 1 GB of memory, and against 2 GB.
  auto small = shape_memory_reason({10000, 10000, 10000}, 1e9);
  ASSERT_TRUE(small);
  EXPECT_EQ(*small, "needs 1.2 GB of operands, more than the 1 GB of memory");
  EXPECT_FALSE(shape_memory_reason({10000, 10000, 10000}, 2e9));
  EXPECT_FALSE(shape_memory_reason({16, 16, 16}));
}

TEST(BadInput, HugeShapeIsASkippedCaseAndTheSweepGoesOn) {
  auto sw = parse_sweep(R"(
toolchains: [g++]
benchmarks:
  - kernel: matmul_tiled
    shapes: [[1000000, 1000000, 1000000], [16, 16, 16]]
)",
                        "t.yaml");
  ASSERT_EQ(sw.cases.size(), 2u);
  ASSERT_TRUE(sw.cases[0].skip_reason);
  EXPECT_NE(sw.cases[0].skip_reason->find("needs 12 TB of operands"), std::string::npos);
  EXPECT_FALSE(sw.cases[1].skip_reason);

  std::string dir = temp_dir("kbisect-bad-input");
  write_file_atomic(dir + "/s.yaml", kHugeSweep);
  auto r = kbisect({"sweep", dir + "/s.yaml", "-o", dir + "/out", "--format", "json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto res = load_results(dir + "/out/results.json");
  ASSERT_EQ(res.cases.size(), 1u);
  EXPECT_EQ(res.cases[0].status, CaseStatus::skipped);
  EXPECT_NE(res.cases[0].reason.find("needs 12 TB of operands"), std::string::npos) << res.cases[0].reason;
  remove_tree(dir);
}

TEST(BadInput, OutputDirectoryThatIsARegularFileIsBadInput) {
  std::string dir = temp_dir("kbisect-bad-input");
  write_file_atomic(dir + "/taken", "a file\n");
  try {
    make_dirs(dir + "/taken/sub");
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::input) << e.what();
  }
  write_file_atomic(dir + "/s.yaml", kHugeSweep);
  auto r = kbisect({"sweep", dir + "/s.yaml", "-o", dir + "/taken", "--format", "json"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find(dir + "/taken"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("not a directory"), std::string::npos) << r.err;
  remove_tree(dir);
}
