// Measured sensitivity of kbisect's A/B decision on this machine.
//
// Kernel: matmul_tiled on the CPU backend, 1024x1024x600 fp32 (~8-15 ms here), one K slice (BK = 608 >= K), so
// the work is exactly linear in K at granularity 1.
//  (a) A/A: the same compiled kernel copied to two files (two separate dlopen'd objects), decided R times
//      -> false-positive rate (worse or better).
//  (b) A/B: the candidate runs K = 603 = 600 x 1.005 (0.5% more work, same code, same "shape" for the
//      throughput accounting) -> detection rate (worse).
//  (c) seconds per decision (measurement wall time incl. warmup).
// Method: `kbisect ab`'s (harness/ab: measure_and_decide_blocks, defaults threshold 0.5%, alpha 0.05,
// blocks of 16 interleaved pairs, both sides loaded afresh per block, sequential signed-rank decision on
// the block medians). `sensitivity R --one-load` measures the earlier design instead (one load per side
// per trial, looks on single pairs: measure_and_decide) for comparison.
// Naive baseline, same kernels: each side is a separate process run of Google Benchmark with 9
// repetitions (MinTime 0.1 s each), decided by a two-sided Mann-Whitney U at alpha 0.05 on the 9 vs 9
// repetition times (what compare.py does).
//
// Usage: sensitivity [R] [--one-load] (default R = 40). Progress goes to stderr; the last two stdout lines are
//   naive:       aa_false_positive=<x> ab_power=<y> median_decision_s=<z>
//   sensitivity: aa_false_positive=<x> ab_power=<y> median_decision_s=<z>
// The arms above change work in one binary, never code, so they say nothing about code changes, which are
// what compilers make (docs/statistics.md). `sensitivity --code-change [P]` (default P = 10) is that arm:
// pairs of builds whose code differs (bench/ab_processes.h: -falign-functions 16/64, -O3/-O2, clang-19/16,
// and the same build as the control), each decided by `kbisect ab` in P separate processes. With no
// ground truth for a code change, the truth is the pooled estimate (the median of the P estimates): a
// verdict is right when it names the truth's side of the 0.5% threshold (worse / better / same) and false
// when it names another side; "unsure" is neither. Last line:
//   code_change: worst_power=<x> worst_false_verdicts=<y>
// (power over the pairs whose pooled estimate is beyond the threshold; false verdicts over all pairs).
// Internal: sensitivity --child SO M N K  runs one Google Benchmark process and prints its JSON.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "backends/backend.h"
#include "backends/cache.h"
#include "bench/ab_processes.h"
#include "backends/toolchain.h"
#include "harness/ab.h"
#include "harness/compare.h"
#include "core/error.h"
#include "core/fsutil.h"
#include "core/process.h"
#include "harness/reference.h"
#include "harness/runner.h"
#include "stats/stats.h"

using namespace kb;

namespace {

const Params kParams = {{"BM", 96}, {"BN", 512}, {"BK", 608}, {"MR", 6}, {"NR", 32}};
const Shape kBase = {1024, 1024, 600};
const Shape kSlow = {1024, 1024, 603};  // 600 * 1.005 = 603: +0.5% work exactly

Artifact artifact_at(const Artifact& like, const std::string& path) {
  Artifact a = like;
  a.binary_path = path;
  return a;
}

std::vector<float> random_inputs(size_t n, uint64_t seed) {
  stats::Rng r(seed);
  std::vector<float> v(n);
  for (auto& x : v) x = float(r.uniform() * 2 - 1);
  return v;
}

std::unique_ptr<Executable> load_prepared(Backend& be, const Artifact& art, const GemmProblem& p) {
  auto exe = be.load(art);
  exe->prepare(p.shape, p.A, p.B);
  return exe;
}

int child(int argc, char** argv) {
  // sensitivity --child SO M N K
  if (argc < 6) {
    std::cerr << "usage: sensitivity --child SO M N K\n";
    return 2;
  }
  Artifact art;
  art.kernel = "matmul_tiled";
  art.backend = "cpu";
  art.dtype = DType::f32;
  art.binary_path = argv[2];
  art.entry = "kb_gemm";
  Shape s{std::atoll(argv[3]), std::atoll(argv[4]), std::atoll(argv[5])};
  auto exe = find_backend("cpu")->load(art);
  exe->prepare(s, random_inputs(size_t(s.M * s.K), 1), random_inputs(size_t(s.K * s.N), 2));
  benchmark::RegisterBenchmark("matmul", [&](benchmark::State& st) {
    for (auto _ : st) exe->run(1);
  })->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(0.1)->Repetitions(9);
  std::vector<std::string> args = {argv[0], "--benchmark_format=json"};
  std::vector<char*> cargs;
  for (auto& a : args) cargs.push_back(a.data());
  int n = int(cargs.size());
  benchmark::Initialize(&n, cargs.data());
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

struct Tally {
  int trials = 0, worse = 0, better = 0, same = 0, unsure = 0;
  std::vector<double> seconds, effects;
  void add(stats::Verdict v, double s, double effect) {
    ++trials;
    worse += v == stats::Verdict::worse;
    better += v == stats::Verdict::better;
    same += v == stats::Verdict::same;
    unsure += v == stats::Verdict::unsure;
    seconds.push_back(s);
    effects.push_back(effect);
  }
  std::string line() const {
    return fmt::format("{} trials: worse {} better {} same {} unsure {}; median {:.1f} s; median effect {:+.3f}%",
                       trials, worse, better, same, unsure, seconds.empty() ? 0 : stats::median(seconds),
                       effects.empty() ? 0 : 100 * std::expm1(stats::median(effects)));
  }
};

// The code-change arm (see the top of the file).
int code_change(int processes) {
  const std::string kbisect =
      (std::filesystem::path(executable_path()).parent_path().parent_path() / "kbisect").string();
  if (!std::filesystem::exists(kbisect)) throw EnvError("no kbisect at " + kbisect);
  const double threshold = 0.5, budget_s = 6;
  const std::string root = temp_dir("kb-sensitivity-code");
  std::cout << fmt::format("code-change arm: {}, {} processes per pair, threshold {}%\n", bench::cpu_model(),
                           processes, threshold);
  double worst_power = 1, worst_false = 0;
  for (const auto& p : bench::all_pairs()) {
    const std::string dir = root + "/" + p.id;
    bench::write_pair(dir, p);
    std::vector<bench::Estimate> es;
    std::vector<double> eff;
    for (int k = 0; k < processes; ++k) {
      es.push_back(bench::run_ab(kbisect, dir, fmt::format("{}/run{}", dir, k), budget_s));
      eff.push_back(es.back().effect);
      std::cerr << fmt::format("  ({}) {}/{}: {:+.2f}% {}\n", p.id, k + 1, processes, es.back().effect,
                               es.back().verdict);
    }
    const double truth = stats::median(eff);
    const std::string right = truth > threshold ? "worse" : truth < -threshold ? "better" : "same";
    int ok = 0, wrong = 0, unsure = 0;
    for (const auto& e : es) {
      if (e.verdict == "unsure") ++unsure;
      else if (e.verdict == right) ++ok;
      else ++wrong;
    }
    const double power = double(ok) / processes, false_rate = double(wrong) / processes;
    std::cout << fmt::format("({}) {}: pooled {:+.2f}% -> right verdict '{}': {} right, {} false, {} unsure "
                             "(power {:.2f}, false verdicts {:.2f})\n",
                             p.id, p.what, truth, right, ok, wrong, unsure, power, false_rate);
    // Power is the share of right verdicts where there is an effect to find; where the truth is "same", a
    // budget-limited CI rarely fits inside the threshold (unsure), which is no error: only false verdicts count.
    if (right != "same") worst_power = std::min(worst_power, power);
    worst_false = std::max(worst_false, false_rate);
  }
  remove_tree(root);
  std::cout << fmt::format("code_change: worst_power={:.2f} worst_false_verdicts={:.2f}\n", worst_power, worst_false);
  return 0;
}

}  // namespace

// main is the experiment as one script (A/A, A/B, naive arm, then the summary lines); long because
// each arm prints its own figures, not because it holds logic shared with anything else.
int main(int argc, char** argv) {
  if (argc > 1 && std::string(argv[1]) == "--child") return child(argc, argv);
  try {
    if (argc > 1 && std::string(argv[1]) == "--code-change") return code_change(argc > 2 ? std::max(3, std::atoi(argv[2])) : 10);
    int R = 40;
    bool one_load = false;
    for (int i = 1; i < argc; ++i) {
      if (std::string(argv[i]) == "--one-load") one_load = true;
      else R = std::max(1, std::atoi(argv[i]));
    }
    const double budget_s = 30;
    std::string tc_name = "clang-19";
    Toolchain tc;
    try {
      tc = find_toolchain(tc_name);
    } catch (const Error&) {
      auto ps = preset_toolchains();
      if (ps.empty()) throw EnvError("no CPU toolchain found");
      tc = ps.front();
    }
    resolve_identity(tc);
    Backend& be = backend_for(tc);
    CompileCache cache;
    CompileRequest req;
    req.kernel = &find_kernel("cpu", "matmul_tiled");
    req.params = req.kernel->complete(kParams);
    req.dtype = DType::f32;
    req.toolchain = &tc;
    req.kernel_dir = kernel_dir();
    Artifact art = cache.compile(be, req);
    const std::string dir = temp_dir("kb-sensitivity");
    const std::string so_a = dir + "/copy_a.so", so_b = dir + "/copy_b.so";
    std::filesystem::copy_file(art.binary_path, so_a);
    std::filesystem::copy_file(art.binary_path, so_b);
    std::cerr << fmt::format("sensitivity: {} {} matmul_tiled[{}] {} vs {}, R={} per experiment, budget {} s\n",
                             tc.name, tc.version_text, req.params.str(), kBase.str(), kSlow.str(), R, budget_s);

    // Inputs (and the Eigen reference, once) per shape; both copies are checked once here.
    auto base_problem = make_problem(kBase, DType::f32);
    auto slow_problem = make_problem(kSlow, DType::f32);
    for (const auto* so : {&so_a, &so_b})
      for (const auto* p : {&base_problem, &slow_problem}) {
        auto exe = load_prepared(be, artifact_at(art, *so), **p);
        exe->run(1);
        auto chk = check_result(**p, exe->result());
        if (!chk.ok) throw Error("sensitivity: kernel result incorrect: " + chk.detail);
      }

    AbOptions defaults;           // kbisect ab defaults
    stats::DecisionConfig dcfg;   // threshold 0.5%, alpha 0.05
    stats::DecisionConfig bcfg = dcfg;
    bcfg.min_n = defaults.min_blocks;
    bcfg.max_n = defaults.max_blocks;
    MeasureConfig mcfg;
    mcfg.warmup_s = 0.1;
    mcfg.placement = defaults.placement;
    std::cerr << fmt::format("method: {}\n", one_load ? "one load per side, looks on pairs"
                                                      : fmt::format("blocks of {} pairs, fresh loads per block",
                                                                    defaults.pairs_per_block));

    Tally aa, ab;
    for (int t = 0; t < R; ++t) {
      for (int exp = 0; exp < 2; ++exp) {
        // A/A alternates which copy is "A".
        const bool swap = t % 2 == 1;
        const Artifact art_a = artifact_at(art, swap ? so_b : so_a), art_b = artifact_at(art, swap ? so_a : so_b);
        const auto& pb_ptr = exp == 0 ? base_problem : slow_problem;
        const GemmProblem& pb = *pb_ptr;
        mcfg.seed = uint64_t(1000 + 2 * t + exp);
        PairOutcome po;
        if (one_load) {
          auto ea = load_prepared(be, art_a, *base_problem);
          auto eb = load_prepared(be, art_b, pb);
          po = measure_and_decide(*ea, *eb, mcfg, dcfg, budget_s);
        } else {
          // As `kbisect ab` measures (its placement: a worker process per block by default).
          po = measure_and_decide_blocks({fresh_loads(be, art_a, base_problem), fresh_loads(be, art_b, pb_ptr)}, mcfg,
                                         bcfg, budget_s, defaults.pairs_per_block);
        }
        Tally& tl = exp == 0 ? aa : ab;
        tl.add(po.decision.verdict, po.wall_s, po.decision.effect);
        std::cerr << fmt::format("  {} {:2}/{}: {:6} {:+.3f}% [{:+.3f}%, {:+.3f}%] {} pairs {:.1f} s\n",
                                 exp == 0 ? "A/A" : "A/B", t + 1, R, stats::to_string(po.decision.verdict),
                                 100 * po.decision.effect_pct(), 100 * po.decision.ci_lo_pct(),
                                 100 * po.decision.ci_hi_pct(), po.decision.n_base, po.wall_s);
      }
    }

    // Naive baseline: separate Google Benchmark processes, 9 repetitions each, two-sided MWU.
    const std::string self = executable_path();
    auto gb_run = [&](const std::string& so, const Shape& s) {
      auto r = run_process({self, "--child", so, std::to_string(s.M), std::to_string(s.N), std::to_string(s.K)}, {});
      if (!r.ok()) throw Error("naive child failed: " + r.status_text() + "\n" + tail(r.err, 1000));
      auto set = sample_set_from_google_benchmark(nlohmann::json::parse(r.out), "naive child");
      if (set.entries.size() != 1 || set.entries[0].samples_s.size() != 9)
        throw Error("naive child: expected one benchmark with 9 repetitions");
      return std::make_pair(set.entries[0].samples_s, r.wall_s);
    };
    int naive_aa_fp = 0, naive_ab_hit = 0;
    std::vector<double> naive_s;
    for (int t = 0; t < R; ++t) {
      for (int exp = 0; exp < 2; ++exp) {
        const bool swap = t % 2 == 1;
        auto [xa, sa] = gb_run(swap ? so_b : so_a, kBase);
        auto [xb, sb] = gb_run(swap ? so_a : so_b, exp == 0 ? kBase : kSlow);
        auto u = stats::mann_whitney(xa, xb);
        const bool different = u.p_two_sided < 0.05;
        const bool slower = stats::median(xb) > stats::median(xa);
        if (exp == 0) naive_aa_fp += different;
        else naive_ab_hit += different && slower;
        naive_s.push_back(sa + sb);
        std::cerr << fmt::format("  naive {} {:2}/{}: p={:.4f} {:+.3f}% {}\n", exp == 0 ? "A/A" : "A/B", t + 1, R,
                                 u.p_two_sided, 100 * (stats::median(xb) / stats::median(xa) - 1),
                                 different ? (slower ? "slower" : "faster") : "no difference");
      }
    }
    remove_tree(dir);

    std::vector<double> all = aa.seconds;
    all.insert(all.end(), ab.seconds.begin(), ab.seconds.end());
    std::cout << "A/A (kbisect): " << aa.line() << "\n";
    std::cout << "A/B (kbisect): " << ab.line() << "\n";
    std::cout << fmt::format("naive:       aa_false_positive={:.3f} ab_power={:.3f} median_decision_s={:.1f}\n",
                             double(naive_aa_fp) / R, double(naive_ab_hit) / R, stats::median(naive_s));
    std::cout << fmt::format("sensitivity: aa_false_positive={:.3f} ab_power={:.3f} median_decision_s={:.1f}\n",
                             double(aa.worse + aa.better) / R, double(ab.worse) / R, stats::median(all));
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "sensitivity: error: " << e.what() << "\n";
    return 1;
  }
}
