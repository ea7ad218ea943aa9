// Speed target for the CPU kernels: matmul_tiled (built-in "best" config) against Eigen's GEMM, fp32,
// one thread, 512^3 and 1024^3, in the same run. Both are compiled at run time by the same toolchain
// (default clang-19 preset, -O3 -march=native) through the CompileCache and the CPU backend: our
// kernel from kernels/cpu, Eigen from a one-function source this program writes, so the ratio
// compares code, not compilers. matmul_pipelined (producer + consumer threads) is timed alongside.
//
// Extra options (before Google Benchmark's own): --toolchain NAME|FILE (default clang-19).
// Prints Google Benchmark's table, GFLOP/s per kernel and shape (median over repetitions), and as its
// last line: "matmul_tiled/eigen 1024^3 fp32: <Eigen time / our time>".
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <iostream>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "cli/exit_codes.h"
#include "backends/backend.h"
#include "backends/cache.h"
#include "backends/toolchain.h"
#include "core/error.h"
#include "core/fsutil.h"

namespace {

// Eigen's GEMM behind the same kb_gemm entry as every CPU kernel (row-major maps, fp32).
constexpr const char* kEigenSource = R"(#include <Eigen/Core>
#include "kb_cpu_kernel.h"
extern "C" int kb_gemm(const kb_gemm_args* a) {
  if (a->M <= 0 || a->N <= 0 || a->K <= 0) return 1;
  using Mat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  Eigen::Map<const Mat> A(static_cast<const float*>(a->A), a->M, a->K);
  Eigen::Map<const Mat> B(static_cast<const float*>(a->B), a->K, a->N);
  Eigen::Map<Mat> C(a->C, a->M, a->N);
  C.noalias() = A * B;
  return 0;
}
)";

std::string eigen_include_dir() {
  if (const char* d = std::getenv("KBISECT_EIGEN_INCLUDE"); d && *d) return d;
  for (const char* d : {"/usr/include/eigen3", "/usr/local/include/eigen3"})
    if (kb::file_exists(std::string(d) + "/Eigen/Core")) return d;
  throw kb::EnvError("Eigen headers not found (looked in /usr/include/eigen3, /usr/local/include/eigen3; "
                     "set KBISECT_EIGEN_INCLUDE)");
}

struct Contender {
  std::string label;                    // "matmul_tiled", "eigen", "matmul_pipelined"
  std::unique_ptr<kb::Executable> exe;  // loaded kernel
  kb::Artifact art;
};

// Collects each benchmark's median real time (seconds per iteration) while printing the usual table.
class MedianCollector : public benchmark::ConsoleReporter {
 public:
  MedianCollector() : ConsoleReporter(isatty(1) ? OO_ColorTabular : OO_Tabular) {}
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const auto& r : runs) {
      // GetAdjustedRealTime() is per iteration, in the benchmark's time unit.
      const double s = r.GetAdjustedRealTime() / benchmark::GetTimeUnitMultiplier(r.time_unit);
      if (r.run_type == Run::RT_Aggregate && r.aggregate_name == "median") median_s[r.run_name.function_name] = s;
      if (r.run_type == Run::RT_Iteration) last_s[r.run_name.function_name] = s;
    }
    ConsoleReporter::ReportRuns(runs);
  }
  double seconds(const std::string& name) const {
    if (auto it = median_s.find(name); it != median_s.end()) return it->second;
    if (auto it = last_s.find(name); it != last_s.end()) return it->second;
    return 0;
  }
  std::map<std::string, double> median_s, last_s;
};

std::vector<float> random_matrix(int64_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = d(gen);
  return v;
}

// run is the benchmark script: compile each contender, check it against Eigen, time it, print the
// table; kept in one piece so the printed figures read in the order they are computed.
int run(int argc, char** argv) {
  std::string tc_name = "clang-19";
  std::vector<char*> args = {argv[0]};
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--toolchain") == 0 && i + 1 < argc)
      tc_name = argv[++i];
    else
      args.push_back(argv[i]);
  }
  // Defaults that suit a noisy 2-core VM; any --benchmark_* option given on the command line wins.
  std::vector<std::string> defaults = {"--benchmark_repetitions=7", "--benchmark_enable_random_interleaving=true",
                                       "--benchmark_min_time=0.2", "--benchmark_report_aggregates_only=true"};
  std::vector<std::string> own;
  for (const auto& d : defaults) {
    std::string key = d.substr(0, d.find('='));
    bool given = false;
    for (size_t i = 1; i < args.size(); ++i) given |= std::string(args[i]).rfind(key, 0) == 0;
    if (!given) own.push_back(d);
  }
  for (auto& s : own) args.push_back(s.data());
  int bargc = int(args.size());
  benchmark::Initialize(&bargc, args.data());
  if (benchmark::ReportUnrecognizedArguments(bargc, args.data())) return 2;

  kb::Toolchain tc = kb::find_toolchain(tc_name);
  kb::resolve_identity(tc);
  kb::Backend& backend = kb::backend_for(tc);
  kb::CompileCache cache;
  const std::string kdir = kb::kernel_dir();

  std::vector<Contender> contenders;
  auto compile = [&](const std::string& label, const kb::KernelDecl& k, const kb::Toolchain& t,
                     const std::string& dir, const kb::Params& params) {
    kb::CompileRequest req;
    req.kernel = &k;
    req.params = params;
    req.dtype = kb::DType::f32;
    req.toolchain = &t;
    req.kernel_dir = dir;
    Contender c;
    c.label = label;
    c.art = cache.compile(backend, req);
    c.exe = backend.load(c.art);
    std::cerr << fmt::format("{}: {} [{}] {} ({}, {} code bytes)\n", label, c.art.toolchain, params.str(),
                             c.art.cache_hit ? "cached" : fmt::format("compiled in {:.2f} s", c.art.compile_s),
                             c.art.binary_path, c.art.code_bytes);
    contenders.push_back(std::move(c));
  };
  auto best = [](const kb::KernelDecl& k) {
    for (const auto& [name, p] : k.configs)
      if (name == "best") return k.complete(p);
    throw kb::Error(k.name + " declares no 'best' config");
  };
  const kb::KernelDecl& tiled = kb::find_kernel("cpu", "matmul_tiled");
  const kb::KernelDecl& piped = kb::find_kernel("cpu", "matmul_pipelined");
  compile("matmul_tiled", tiled, tc, kdir, best(tiled));
  compile("matmul_pipelined", piped, tc, kdir, best(piped));

  // Eigen: same compiler and flags, plus its include path and NDEBUG (no Eigen assertions).
  std::string edir = kb::temp_dir("kbisect-eigen");
  kb::write_file_atomic(edir + "/eigen_gemm.cpp", kEigenSource);
  kb::KernelDecl eigen_decl;
  eigen_decl.name = "eigen_gemm";
  eigen_decl.backend = "cpu";
  eigen_decl.source = "eigen_gemm.cpp";
  eigen_decl.dtypes = {kb::DType::f32};
  kb::Toolchain etc = tc;
  etc.name = tc.name + "+eigen";
  etc.flags.insert(etc.flags.end(), {"-I" + eigen_include_dir(), "-I" + kdir + "/cpu", "-DNDEBUG"});
  etc.identity.clear();
  kb::resolve_identity(etc);
  compile("eigen", eigen_decl, etc, edir, {});
  kb::remove_tree(edir);

  const std::vector<int64_t> sizes = {512, 1024};
  for (int64_t n : sizes) {
    kb::Shape shape{n, n, n};
    auto A = random_matrix(n * n, 1), B = random_matrix(n * n, 2);
    for (auto& c : contenders) {
      c.exe->prepare(shape, A, B);
      c.exe->run(1);
    }
    // Results must agree before any time counts (fp32, K up to 1024: well under 1e-3 relative).
    const auto ref = contenders[2].exe->result();
    double scale = 0;
    for (float v : ref) scale = std::max(scale, double(std::abs(v)));
    for (size_t i = 0; i < 2; ++i) {
      const auto got = contenders[i].exe->result();
      double err = 0;
      for (size_t e = 0; e < got.size(); ++e) err = std::max(err, double(std::abs(got[e] - ref[e])));
      if (!(err <= 1e-4 * scale))
        throw kb::Error(fmt::format("{} at {}^3 disagrees with Eigen: max error {:.3g} (scale {:.3g})",
                                    contenders[i].label, n, err, scale));
    }
  }
  // Each benchmark prepares its own shape (prepare() re-binds buffers), so random interleaving works.
  for (int64_t n : sizes) {
    for (auto& c : contenders) {
      kb::Executable* exe = c.exe.get();
      std::string name = fmt::format("{}/{}^3/fp32", c.label, n);
      benchmark::RegisterBenchmark(name.c_str(), [exe, n](benchmark::State& st) {
        kb::Shape shape{n, n, n};
        auto A = random_matrix(n * n, 1), B = random_matrix(n * n, 2);
        exe->prepare(shape, A, B);
        exe->run(1);  // warm
        for (auto _ : st) exe->run(1);
        st.counters["GFLOP/s"] = benchmark::Counter(shape.flops() * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
      })->Unit(benchmark::kMillisecond)->UseRealTime();
    }
  }

  MedianCollector rep;
  benchmark::RunSpecifiedBenchmarks(&rep);
  benchmark::Shutdown();

  std::cout << fmt::format("\ntoolchain: {} ({}), identity {}\n", tc.name, tc.version_text, tc.identity.substr(0, 12));
  std::cout << "threads: matmul_tiled 1, eigen 1, matmul_pipelined 1 producer + CONSUMERS consumers\n";
  for (int64_t n : sizes) {
    double flops = 2.0 * double(n) * double(n) * double(n);
    for (const auto& c : contenders) {
      double s = rep.seconds(fmt::format("{}/{}^3/fp32", c.label, n));
      std::cout << fmt::format("{:>17} {:>4}^3 fp32: {:8.3f} ms {:7.1f} GFLOP/s\n", c.label, n, s * 1e3,
                               s > 0 ? flops / s * 1e-9 : 0.0);
    }
  }
  double ours = rep.seconds("matmul_tiled/1024^3/fp32"), eig = rep.seconds("eigen/1024^3/fp32");
  if (ours <= 0 || eig <= 0) {
    std::cout << "matmul_tiled/eigen 1024^3 fp32: n/a (filtered out)\n";
    return 0;
  }
  std::cout << fmt::format("matmul_tiled/eigen 1024^3 fp32: {:.3f}\n", eig / ours);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const kb::CompileError& e) {
    std::cerr << "error: " << e.what() << "\n" << e.log() << "\n";
    return kb::exit_code_for(e);
  } catch (const kb::Error& e) {
    std::cerr << "error: " << e.what() << "\n";
    return kb::exit_code_for(e);
  }
}
