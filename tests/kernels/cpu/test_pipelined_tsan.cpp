// matmul_pipelined under ThreadSanitizer: the kernel source is compiled straight into a small driver
// with g++ -fsanitize=thread (the kernel is built by the toolchain under test, so its hand-off must be
// race-free under any compiler) and run on shapes that wrap the ring many times with 1..3 consumers.
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "backends/backend.h"
#include "core/fsutil.h"
#include "core/process.h"

namespace kb {
namespace {

constexpr const char* kDriver = R"(#include <cmath>
#include <cstdio>
#include <vector>
#include "kb_cpu_kernel.h"
int main() {
  const long shapes[][3] = {{1, 1, 1}, {37, 29, 41}, {70, 50, 90}};
  for (const auto& s : shapes) {
    const long M = s[0], N = s[1], K = s[2];
    std::vector<float> A(M * K), B(K * N), C(M * N, NAN);
    for (long i = 0; i < M * K; ++i) A[i] = float((i * 7) % 11) - 5.0f;
    for (long i = 0; i < K * N; ++i) B[i] = float((i * 5) % 13) - 6.0f;
    kb_gemm_args a{A.data(), B.data(), C.data(), M, N, K};
    if (kb_gemm(&a) != 0) return 2;
    for (long i = 0; i < M; ++i)
      for (long j = 0; j < N; ++j) {
        double r = 0;
        for (long k = 0; k < K; ++k) r += double(A[i * K + k]) * B[k * N + j];
        if (C[i * N + j] != float(r)) { std::printf("mismatch at %ld,%ld\n", i, j); return 3; }
      }
  }
  return 0;
}
)";

TEST(PipelinedTsan, NoDataRacesAcrossStagesAndConsumers) {
  if (which("g++").empty()) GTEST_SKIP() << "g++ not found";
  const std::string dir = temp_dir("kbisect-tsan");
  write_file_atomic(dir + "/driver.cpp", kDriver);
  const std::string kd = kernel_dir();
  for (auto [stages, consumers] : {std::pair{2, 1}, {2, 3}, {4, 2}}) {
    SCOPED_TRACE(fmt::format("STAGES={} CONSUMERS={}", stages, consumers));
    std::vector<std::string> argv = {"g++", "-std=c++17", "-O1", "-g", "-fsanitize=thread", "-pthread",
                                     "-I" + kd + "/cpu", "-DKB_DTYPE_F32=1", "-DKB_BM=8", "-DKB_BN=16",
                                     "-DKB_BK=8", "-DKB_MR=4", "-DKB_NR=8"};
    argv.push_back(fmt::format("-DKB_STAGES={}", stages));
    argv.push_back(fmt::format("-DKB_CONSUMERS={}", consumers));
    argv.insert(argv.end(), {"-o", dir + "/driver", dir + "/driver.cpp", kd + "/cpu/matmul_pipelined.cpp"});
    auto c = run_process(argv, {.timeout_s = 300});
    if (!c.ok() && c.err.find("tsan") != std::string::npos) GTEST_SKIP() << "no TSan runtime: " << c.err;
    ASSERT_TRUE(c.ok()) << c.status_text() << "\n" << c.err;
    RunOptions ro;
    ro.timeout_s = 300;
    ro.env_set = {{"TSAN_OPTIONS", "halt_on_error=1 exitcode=66"}};
    auto r = run_process({dir + "/driver"}, ro);
    EXPECT_EQ(r.err.find("ThreadSanitizer"), std::string::npos) << r.err;
    EXPECT_TRUE(r.ok()) << r.status_text() << "\n" << r.out << r.err;
  }
  remove_tree(dir);
}

}  // namespace
}  // namespace kb
