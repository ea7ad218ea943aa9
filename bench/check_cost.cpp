// What the correctness check costs: for bf16 1024^3, 4096^3, 8192^3 and 256x256x11008, the full fp64
// reference and the fast check (harness/check.h) in the same run, and the fast check as a fraction of
// one matmul_tiled run of the same shape on this CPU (clang-19, the kernel's default config).
//   bench/check_cost [--full-max N]   full reference only up to N^3 work (default 4096; 8192^3 takes minutes)
// Last line: check_cost 4096^3 bf16: <seconds> s
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>

#include <fmt/format.h>

#include "backends/backend.h"
#include "backends/cache.h"
#include "backends/toolchain.h"
#include "core/clock.h"
#include "core/fsutil.h"
#include "harness/check.h"
#include "harness/reference.h"

using namespace kb;

namespace {

std::string cpu_model() {
  std::ifstream f("/proc/cpuinfo");
  for (std::string line; std::getline(f, line);)
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  return "unknown CPU";
}

struct KernelRun {
  double kernel_s = 0, check_s = 0;
  Check check;
};

// One run of matmul_tiled on the problem, timed, and the check of its output, timed.
KernelRun run_kernel(const GemmProblem& p) {
  static CompileCache cache(temp_dir("kb-check-cost"));
  static Toolchain tc = [] {
    Toolchain t = find_toolchain("clang-19");
    resolve_identity(t);
    return t;
  }();
  const KernelDecl& k = find_kernel("cpu", "matmul_tiled");
  CompileRequest req;
  req.kernel = &k;
  req.params = k.complete({});
  req.dtype = p.dtype;
  req.toolchain = &tc;
  req.kernel_dir = kernel_dir();
  Backend& be = *find_backend("cpu");
  auto exe = be.load(cache.compile(be, req));
  exe->prepare(p.shape, p.A, p.B);
  KernelRun r;
  r.kernel_s = exe->run(1).seconds;
  const double t0 = now_s();
  r.check = check_result(p, exe->result());
  r.check_s = now_s() - t0;
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  int64_t full_max = 4096;
  for (int i = 1; i + 1 < argc; ++i)
    if (!strcmp(argv[i], "--full-max")) full_max = std::atoll(argv[i + 1]);
  std::printf("machine: %s, %u threads\n", cpu_model().c_str(), std::thread::hardware_concurrency());
  std::printf("%-16s %9s %10s %10s %10s %10s %10s %8s\n", "shape (bf16)", "inputs_s", "full_s", "fast_ref_s",
              "fast_chk_s", "kernel_s", "fast/kern", "method");
  double line_4096 = 0;
  for (Shape s : {Shape{1024, 1024, 1024}, Shape{256, 256, 11008}, Shape{4096, 4096, 4096}, Shape{8192, 8192, 8192}}) {
    ReferenceOptions full_opts, fast_opts;
    full_opts.full_max_flop = 1e300;
    fast_opts.full_max_flop = 0;
    std::string full_s = "skipped";
    if (s.M <= full_max && s.N <= full_max) {
      const double tf = now_s();
      make_problem(s, DType::bf16, 42, full_opts);
      full_s = fmt::format("{:.2f}", now_s() - tf);  // includes the inputs (inputs_s)
    }
    ReferenceOptions inputs_opts;
    inputs_opts.inputs_only = true;
    const double t0 = now_s();
    make_problem(s, DType::bf16, 42, inputs_opts);
    const double inputs_s = now_s() - t0;
    const double t1 = now_s();
    const auto p = make_problem(s, DType::bf16, 42, fast_opts);
    const double fast_ref = now_s() - t1 - inputs_s;  // the reference part, without the inputs
    const KernelRun k = run_kernel(*p);
    const double fast = fast_ref + k.check_s;
    std::printf("%-16s %9.2f %10s %10.2f %10.3f %10.2f %10.3f %8s%s\n", s.str().c_str(), inputs_s, full_s.c_str(), fast_ref,
                k.check_s, k.kernel_s, fast / k.kernel_s, k.check.method.c_str(), k.check.ok ? "" : "  (kernel INCORRECT)");
    if (s.M == 4096) line_4096 = fast;
  }
  std::printf("(inputs_s: generating A and B, which every run needs; full_s includes it, fast_ref_s does not;\n"
              " fast = fast_ref_s + fast_chk_s; fast/kern = fast / one matmul_tiled run)\n");
  std::printf("check_cost 4096^3 bf16: %.2f s\n", line_4096);
  return 0;
}
