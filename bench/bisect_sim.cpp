// bisect_sim: seeded synthetic histories driving the real bisection loop, strategy and decisions
// (bisect/simulate), compared with plain bisect and a Pinpoint emulation on the same histories.
//
//   bisect_sim [--histories N] [--commits N] [--step F] [--cv F] [--outliers F] [--build-fail F]
//              [--code-change F] [--threshold F] [--max-samples N] [--min-samples N] [--alpha F]
//              [--block-rounds N (0: one load per commit)] [--load-sd F (placement offset per load)]
//              [--threads N] [--seed S] [--extra-histories N (0: the spec scenario only)]
//              [--build-min F] [--measure-min F] [--wall-histories N (0: no wall-clock table)] [--wall-only]
//              [--spec-depth N (levels speculated below a round that waits for a build)]
//              [--l3-only] [--l3-histories N (0: no L3 tables)] [--l3-today N] [--l3-cv F] [--kernel-histories N]
//              [--trace-l3 I (the log of L3 history I at --commits, --step)] [--confidence F] [--build-cost F]
//
// After the spec's scenario (one step, the three methods), further scenarios on the same model: Pinpoint
// told that the regression exists (no reproduction gate), the expected measured fraction from the model
// (analytic), a realistic code-change rate, prior weights (uniform / informative / misleading), parallel
// rounds (P = 1, 3, 7) and several changes (two regressions and a partial recovery). Then the wall-clock
// table (bisect/simulate_wall.h; --wall-only prints only it): sequential, `parallel: P` on one node, and
// 1, 4, 8, 16 builders with speculation, for builds of --build-min minutes. Then the expensive-sample (L3)
// tables (bench/bisect_sim_l3.h; --l3-only prints only them): single runs at --l3-cv noise, probabilistic
// bisection beside today's design, and the kernel-timing model bisected both ways.
// Last line (the spec scenario): bisect_sim: accuracy=<a> median_builds=<b> median_samples=<c>
// pinpoint_samples=<d> measured_fraction=<e>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "bench/bisect_sim.h"
#include "bench/bisect_sim_l3.h"
#include "bisect/bisector.h"
#include "bisect/simulate.h"
#include "bisect/simulate_wall.h"
#include "stats/stats.h"

using namespace kb::bisect;
using namespace bisect_sim;

namespace {

// Expected measured/visited fraction for the spec's model (analytic): a visited commit halfway through a
// range of R candidates is classified by its code hash when no commit between it and the range end on the
// culprit-free side changes code: probability (d_hi/R) q0^d_lo + (d_lo/R) q0^d_hi with q0 = 1 - code_change;
// a visited commit that fails to build is not measured either.
double expected_measured_fraction(int commits, double code_change, double build_fail) {
  const double q0 = 1 - code_change;
  double measured = 0;
  int steps = 0;
  for (int R = commits; R >= 2; R = (R + 1) / 2) {
    const int dl = R / 2, dh = R - dl;
    const double same = (double(dh) / R) * std::pow(q0, dl) + (double(dl) / R) * std::pow(q0, dh);
    measured += (1 - build_fail) * (1 - same);
    ++steps;
    if (R == 2) break;
  }
  return steps ? measured / steps : 0;
}

// The wall-clock table (bisect/simulate_wall.h): the same histories bisected sequentially, with today's
// `parallel: P` on one node, and with B builders that speculate; per row the median and mean wall time to
// the verdict, the builds started and cancelled, and the accuracy of the decisions replayed.
void wall_table(const SimConfig& c, int histories, int threads, uint64_t seed, const WallConfig& base) {
  struct Row {
    std::string name;
    int workers;
    bool cluster;
    int builders;
  };
  const std::vector<Row> rows = {{"sequential (parallel: 1, one node)", 1, false, 1},
                                 {"parallel: 3, one node", 3, false, 1},
                                 {"parallel: 7, one node", 7, false, 1},
                                 {"1 builder, speculation", 1, true, 1},
                                 {"4 builders, speculation", 1, true, 4},
                                 {"8 builders, speculation", 1, true, 8},
                                 {"16 builders, speculation", 1, true, 16},
                                 {"8 builders, parallel: 3, speculation", 3, true, 8}};
  const size_t nh = size_t(histories);
  std::map<int, std::vector<std::pair<MethodResult, std::vector<WallRound>>>> runs;  // per workers
  for (int P : {1, 3, 7}) {
    auto& v = runs[P];
    v.resize(nh);
    parallel_for(histories, threads, [&](int i) {
      const uint64_t s = seed * 1000003ULL + uint64_t(i);
      History h = make_history(c, s);
      Outcome o;
      RunOptions opt;
      opt.workers = P;
      opt.outcome = &o;
      v[size_t(i)].first = run_kbisect(c, h, s, opt);
      v[size_t(i)].second = wall_trace(o, h.n);
    });
  }
  std::cout << fmt::format(
      "wall clock: {} histories of {} commits, B_t = {:.0f} min per build, {:.0f} min per measurement; one node: "
      "the k builds of a round take k*B_t; builders: speculation up to {} levels, cancellation\n",
      histories, c.commits, base.build_min, base.measure_min, base.max_depth);
  std::cout << fmt::format("{:<38} {:>9} {:>9} {:>7} {:>8} {:>10} {:>7} {:>9}\n", "method", "median h", "mean h", "x seq",
                           "started", "cancelled", "x seq", "accuracy");
  double seq_wall = 0, seq_builds = 0;
  for (const Row& row : rows) {
    WallConfig w = base;
    w.cluster = row.cluster;
    w.builders = row.builders;
    std::vector<double> wall(nh), started(nh), cancelled(nh);
    double correct = 0;
    parallel_for(histories, threads, [&](int i) {
      const uint64_t s = seed * 1000003ULL + uint64_t(i);
      const History h = make_history(c, s);
      const auto& [mr, trace] = runs[row.workers][size_t(i)];
      const WallResult r = wall_clock(trace, row.workers, h.build_fails, w);
      wall[size_t(i)] = r.wall_min / 60;
      started[size_t(i)] = r.builds_started;
      cancelled[size_t(i)] = r.builds_cancelled;
    });
    for (const auto& [mr, trace] : runs[row.workers]) correct += mr.correct;
    const double mw = median_of(wall), ms = median_of(started);
    double mean = 0;
    for (double x : wall) mean += x / double(nh);
    if (seq_wall == 0) seq_wall = mw, seq_builds = ms;
    std::cout << fmt::format("{:<38} {:>9.2f} {:>9.2f} {:>7.3f} {:>8.0f} {:>10.0f} {:>7.2f} {:>9.3f}\n", row.name, mw, mean,
                             mw / seq_wall, ms, median_of(cancelled), ms / seq_builds, correct / double(nh));
  }
}

}  // namespace

// main reads the options and prints one block of figures per scenario, in the order the docs cite them;
// it is long because it is the report itself (each block a few lines), not because it holds logic.
int main(int argc, char** argv) {
  SimConfig c;
  int histories = 200, extra = 100, threads = int(std::max(1u, std::thread::hardware_concurrency()));
  uint64_t seed = 1;
  WallConfig wall;
  int wall_histories = 200;
  bool wall_only = false, l3_only = false;
  int l3_histories = 1000, l3_today = 200, kernel_histories = 50, trace_l3 = -1;
  double l3_cv = 0.003;
  for (int i = 1; i < argc; ++i) {
    auto arg = [&](const char* name) {
      if (std::strcmp(argv[i], name) != 0 || i + 1 >= argc) return (const char*)nullptr;
      return (const char*)argv[++i];
    };
    if (auto v = arg("--histories")) histories = std::atoi(v);
    else if (auto v = arg("--commits")) c.commits = std::atoi(v);
    else if (auto v = arg("--step")) c.step = std::atof(v);
    else if (auto v = arg("--cv")) c.noise.cv = std::atof(v);
    else if (auto v = arg("--outliers")) c.noise.outlier_rate = std::atof(v);
    else if (auto v = arg("--build-fail")) c.build_fail = std::atof(v);
    else if (auto v = arg("--code-change")) c.code_change = std::atof(v);
    else if (auto v = arg("--threshold")) c.threshold = std::atof(v);
    else if (auto v = arg("--max-samples")) c.max_samples_per_step = std::atoi(v);
    else if (auto v = arg("--threads")) threads = std::max(1, std::atoi(v));
    else if (auto v = arg("--min-samples")) c.min_samples = std::max(4, std::atoi(v));
    else if (auto v = arg("--alpha")) c.alpha = std::atof(v);
    else if (auto v = arg("--block-rounds")) c.block_rounds = std::max(0, std::atoi(v));
    else if (auto v = arg("--load-sd")) c.load_sd = std::atof(v);
    else if (auto v = arg("--extra-histories")) extra = std::max(0, std::atoi(v));
    else if (auto v = arg("--seed")) seed = std::strtoull(v, nullptr, 10);
    else if (auto v = arg("--build-min")) wall.build_min = std::atof(v);
    else if (auto v = arg("--measure-min")) wall.measure_min = std::atof(v);
    else if (auto v = arg("--wall-histories")) wall_histories = std::max(0, std::atoi(v));
    else if (std::strcmp(argv[i], "--wall-only") == 0) wall_only = true;
    else if (std::strcmp(argv[i], "--l3-only") == 0) l3_only = true;
    else if (auto v = arg("--l3-histories")) l3_histories = std::max(0, std::atoi(v));
    else if (auto v = arg("--l3-today")) l3_today = std::max(1, std::atoi(v));
    else if (auto v = arg("--l3-cv")) l3_cv = std::atof(v);
    else if (auto v = arg("--kernel-histories")) kernel_histories = std::max(0, std::atoi(v));
    else if (auto v = arg("--trace-l3")) trace_l3 = std::atoi(v);
    else if (auto v = arg("--confidence")) c.confidence = std::atof(v);
    else if (auto v = arg("--build-cost")) c.build_cost = std::atof(v);
    else if (auto v = arg("--spec-depth")) wall.max_depth = std::atoi(v);
    else {
      std::cerr << "usage: bisect_sim [--histories N] [--commits N] [--step F] [--cv F] [--outliers F] "
                   "[--build-fail F] [--code-change F] [--threshold F] [--max-samples N] [--min-samples N] [--alpha F] "
                   "[--block-rounds N] [--load-sd F] [--threads N] [--seed S] [--extra-histories N] [--build-min F] "
                   "[--measure-min F] [--wall-histories N] [--wall-only] [--spec-depth N] [--l3-only] [--l3-histories N] "
                   "[--l3-today N] [--l3-cv F] [--kernel-histories N] [--trace-l3 I] [--confidence F] [--build-cost F]\n";
      return 2;
    }
  }
  const size_t nh = static_cast<size_t>(histories);
  // Expensive samples: the L3 model is the spec's with run-to-run noise of --l3-cv and no outliers.
  SimConfig l3 = c;
  l3.noise.cv = l3_cv;
  l3.noise.outlier_rate = 0;
  l3.block_rounds = 0;
  if (trace_l3 >= 0) {
    // The loop's log of L3 history I (seeded as the tables' are) at --commits and --step.
    l3.threshold = l3.step / 2;
    const uint64_t s = seed * 1000003ULL + uint64_t(trace_l3);
    const History h = make_history(l3, s);
    RunOptions o;
    o.use_hashes = false;
    o.expensive = true;
    o.log = [](const std::string& line) { std::cout << line << "\n"; };
    const MethodResult r = run_kbisect(l3, h, s, o);
    std::cout << fmt::format("true culprit {}; named {}; {} runs; verdict {}; correct {}\n", h.culprit, r.named, r.samples,
                             r.verdict, r.correct);
    return 0;
  }
  if (l3_only) {
    l3_tables(l3, std::max(1, l3_histories), l3_today, threads, seed);
    if (kernel_histories > 0) kernel_table(c, kernel_histories, threads, seed);
    return 0;
  }
  if (wall_only) {
    wall_table(c, wall_histories, threads, seed, wall);
    return 0;
  }
  std::cout << fmt::format(
      "bisect_sim: {} histories of {} commits; one {:.2f}% step at a random commit; noise CV {:.1f}% lognormal, "
      "{:.0f}% outliers (+2..13%); builds fail at {:.0f}% of commits; {:.0f}% of commits leave the kernel's code "
      "unchanged\n",
      histories, c.commits, 100 * c.step, 100 * c.noise.cv, 100 * c.noise.outlier_rate, 100 * c.build_fail,
      100 * (1 - c.code_change));
  std::cout << fmt::format(
      "kbisect: threshold {:.2f}%, alpha {}, {}, up to {} rounds per step; placement offset per load sd {:.2f}%; "
      "plain: {} samples/side, MWU alpha {}; pinpoint: {}..{} samples/side, different p<={}, same p>{}\n\n",
      100 * c.threshold, c.alpha,
      c.block_rounds > 0 ? fmt::format("blocks of {} rounds with fresh loads", c.block_rounds) : "one load per commit",
      c.max_samples_per_step, 100 * c.load_sd, c.plain_samples, c.plain_alpha, c.pinpoint_start, c.pinpoint_max,
      c.pinpoint_p_diff, c.pinpoint_p_same);

  std::vector<MethodResult> kbs(nh), plain(nh), pin(nh);
  std::atomic<int> next{0};
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&] {
      for (int i; (i = next++) < histories;) {
        const uint64_t s = seed * 1000003ULL + uint64_t(i);
        History h = make_history(c, s);
        kbs[size_t(i)] = run_kbisect(c, h, s);
        plain[size_t(i)] = run_plain_bisect(c, h, s);
        pin[size_t(i)] = run_pinpoint(c, h, s);
      }
    });
  for (auto& th : pool) th.join();
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  Summary a = summarize(kbs), p = summarize(plain), q = summarize(pin);
  std::cout << fmt::format("{:<10} {:>9} {:>7} {:>14} {:>15} {:>12} {:>18}\n", "method", "accuracy", "exact",
                           "median builds", "median samples", "p90 samples", "measured/visited");
  for (auto [name, s] : {std::pair<const char*, Summary>{"kbisect", a}, {"plain", p}, {"pinpoint", q}})
    std::cout << fmt::format("{:<10} {:>9.3f} {:>7.3f} {:>14.1f} {:>15.0f} {:>12.0f} {:>18.3f}\n", name, s.accuracy,
                             s.exact, s.median_builds, s.median_samples, s.p90_samples, s.measured_fraction);
  int verdicts_unverified = 0, verdicts_other = 0;
  for (const auto& r : kbs) {
    if (r.verdict == "unverified") ++verdicts_unverified;
    else if (r.verdict != "culprit" && r.verdict != "ambiguous") ++verdicts_other;
  }
  std::cout << fmt::format(
      "\naccuracy: the culprit named, or an ambiguous answer whose candidates hold it and are, but for the last, "
      "unbuildable (what git bisect also answers); exact: the culprit named.\nkbisect verdicts other than culprit/ambiguous: {} unverified, {} other. "
      "{:.1f} s on {} threads.\n",
      verdicts_unverified, verdicts_other, secs, threads);
  if (extra > 0) {
    const size_t ne = size_t(extra);
    auto hseed = [&](int i) { return seed * 1000003ULL + uint64_t(i); };
    // (ii) Pinpoint told the regression exists (its reproduction gate skipped).
    {
      std::vector<MethodResult> told(nh);
      parallel_for(histories, threads, [&](int i) {
        History h = make_history(c, hseed(i));
        told[size_t(i)] = run_pinpoint(c, h, hseed(i), true);
      });
      Summary t = summarize(told);
      std::cout << fmt::format(
          "\npinpoint told the regression exists (no good-vs-bad gate), same {} histories: accuracy {:.3f}, median "
          "builds {:.0f}, median samples {:.0f} (p90 {:.0f}); kbisect's median samples are {:.2f}x that\n",
          histories, t.accuracy, t.median_builds, t.median_samples, t.p90_samples,
          t.median_samples > 0 ? a.median_samples / t.median_samples : 0.0);
    }
    // Floor for c: what even a clairvoyant method must spend.
    {
      const double per = sprt_samples_per_step(c.commits, c.step, c.noise.cv);
      const double steps = std::ceil(std::log2(double(c.commits))) * a.measured_fraction;
      std::cout << fmt::format(
          "floor for any method right in 99% of histories: a clairvoyant SPRT (both levels known, no drift, no "
          "outliers, only the commit measured) needs {:.0f} samples per measured step, {:.0f} per bisection over "
          "{:.1f} measured steps; the target c <= d/3 asks for {:.1f}\n",
          per, per * steps, steps, q.median_samples / 3);
    }
    // (iii) measured fraction: the model's expectation, and a realistic code-change rate.
    {
      std::cout << fmt::format(
          "measured/visited expected from the model (analytic): {:.3f} at {:.0f}% code-changing commits "
          "(measured above: {:.3f}); {:.3f} at 2%\n",
          expected_measured_fraction(c.commits, c.code_change, c.build_fail), 100 * c.code_change, a.measured_fraction,
          expected_measured_fraction(c.commits, 0.02, c.build_fail));
      SimConfig r = c;
      r.code_change = 0.02;
      std::vector<MethodResult> rk(ne);
      parallel_for(extra, threads, [&](int i) {
        History h = make_history(r, hseed(i));
        rk[size_t(i)] = run_kbisect(r, h, hseed(i));
      });
      Summary t = summarize(rk);
      std::cout << fmt::format(
          "realistic: 2% of commits change this kernel's code ({} histories): accuracy {:.3f}, median builds {:.0f}, "
          "median samples {:.0f}, measured/visited {:.3f}\n",
          extra, t.accuracy, t.median_builds, t.median_samples, t.measured_fraction);
    }
    // Placement: every load runs at its own fixed offset (sd 0.4%, the size that reproduces the A/A false
    // positives measured with one load per side in `kbisect ab`): one load per commit for the whole
    // bisection (the endpoints' offsets bias every step) against blocks with fresh loads.
    {
      SimConfig pl = c;
      pl.load_sd = 0.004;
      std::string line = fmt::format("placement offsets sd {:.1f}% per load ({} histories):", 100 * pl.load_sd, extra);
      for (int b : {0, c.block_rounds > 0 ? c.block_rounds : 4}) {
        SimConfig v = pl;
        v.block_rounds = b;
        std::vector<MethodResult> pr(ne);
        parallel_for(extra, threads, [&](int i) {
          History h = make_history(v, hseed(i));
          pr[size_t(i)] = run_kbisect(v, h, hseed(i));
        });
        Summary t = summarize(pr);
        line += fmt::format(" {}: accuracy {:.3f}, median builds {:.0f}, samples {:.0f};",
                            b == 0 ? "one load per commit" : fmt::format("blocks of {}", b), t.accuracy,
                            t.median_builds, t.median_samples);
      }
      std::cout << line << "\n";
    }
    // Priors: the culprit's files weighted 5x and 30% of the commits docs-only (0.05); misleading: the
    // culprit touches only a 0.05-weighted path and 10% of the other commits a 5x one.
    {
      std::vector<MethodResult> uni(ne), inf(ne), mis(ne);
      parallel_for(extra, threads, [&](int i) {
        History h = make_history(c, hseed(i));
        kb::stats::Rng rng(hseed(i) ^ 0x5151ULL);
        std::vector<double> wi(size_t(h.n), 1.0), wm(size_t(h.n), 1.0);
        for (int k = 1; k < h.n; ++k) {
          if (rng.uniform() < 0.30) wi[size_t(k)] = 0.05;
          if (rng.uniform() < 0.10) wm[size_t(k)] = 5;
        }
        wi[size_t(h.culprit)] = 5;
        wm[size_t(h.culprit)] = 0.05;
        RunOptions o;
        uni[size_t(i)] = run_kbisect(c, h, hseed(i), o);
        o.weights = wi;
        inf[size_t(i)] = run_kbisect(c, h, hseed(i), o);
        o.weights = wm;
        mis[size_t(i)] = run_kbisect(c, h, hseed(i), o);
      });
      Summary u = summarize(uni), f = summarize(inf), m = summarize(mis);
      std::cout << fmt::format(
          "priors ({} histories): median builds uniform {:.0f} (accuracy {:.3f}), informative {:.0f} ({:.3f}), "
          "misleading {:.0f} ({:.3f}); mean builds {:.1f} / {:.1f} / {:.1f}\n",
          extra, u.median_builds, u.accuracy, f.median_builds, f.accuracy, m.median_builds, m.accuracy,
          [&] { double x = 0; for (auto& r : uni) x += r.builds; return x / double(ne); }(),
          [&] { double x = 0; for (auto& r : inf) x += r.builds; return x / double(ne); }(),
          [&] { double x = 0; for (auto& r : mis) x += r.builds; return x / double(ne); }());
    }
    // Parallel rounds.
    {
      std::string line = fmt::format("parallel rounds ({} histories):", extra);
      for (int P : {1, 3, 7}) {
        std::vector<MethodResult> pr(ne);
        parallel_for(extra, threads, [&](int i) {
          History h = make_history(c, hseed(i));
          RunOptions o;
          o.workers = P;
          pr[size_t(i)] = run_kbisect(c, h, hseed(i), o);
        });
        std::vector<double> rounds;
        for (auto& r : pr) rounds.push_back(r.rounds);
        Summary t = summarize(pr);
        line += fmt::format(" P={}: median rounds {:.0f} (log_{}({}) = {:.1f}), builds {:.0f}, samples {:.0f}, accuracy {:.3f};",
                            P, median_of(rounds), P + 1, c.commits, std::log(double(c.commits)) / std::log(double(P + 1)),
                            t.median_builds, t.median_samples, t.accuracy);
      }
      std::cout << line << "\n";
    }
    // Several changes: +1%, +1%, then a partial recovery of -0.5% (levels 0, 1, 2.01, 1.5%).
    {
      std::vector<MethodResult> one(ne), all(ne);
      parallel_for(extra, threads, [&](int i) {
        History h = make_history_steps(c, hseed(i), {0.01, 0.01, -0.005}, 32);
        RunOptions o;
        o.several = false;
        one[size_t(i)] = run_kbisect(c, h, hseed(i), o);
        o.several = true;
        o.report_improvements = true;
        all[size_t(i)] = run_kbisect(c, h, hseed(i), o);
      });
      int found_all = 0, both_regs = 0, one_true = 0, spurious = 0;
      for (size_t i = 0; i < ne; ++i) {
        found_all += all[i].all_found;
        both_regs += all[i].regressions_true == 2;
        spurious += all[i].regressions_found - all[i].regressions_true + all[i].improvements_found - all[i].improvements_true;
        one_true += one[i].regressions_true >= 1;
      }
      Summary sa = summarize(all), so = summarize(one);
      std::cout << fmt::format(
          "several changes (+1%, +1%, -0.5% partial recovery; {} histories): both regressions named {:.3f}, all three "
          "{:.3f}, spurious {} ; median builds {:.0f}, samples {:.0f}. One-culprit mode: a true regression named {:.3f}, "
          "builds {:.0f}, samples {:.0f}\n",
          extra, double(both_regs) / double(ne), double(found_all) / double(ne), spurious, sa.median_builds,
          sa.median_samples, double(one_true) / double(ne), so.median_builds, so.median_samples);
    }
    std::cout << "\n";
  }
  if (wall_histories > 0) {
    wall_table(c, wall_histories, threads, seed, wall);
    std::cout << "\n";
  }
  if (l3_histories > 0) {
    l3_tables(l3, l3_histories, l3_today, threads, seed);
    if (kernel_histories > 0) kernel_table(c, kernel_histories, threads, seed);
    std::cout << "\n";
  }
  std::cout << fmt::format(
      "bisect_sim: accuracy={:.3f} median_builds={:.0f} median_samples={:.0f} pinpoint_samples={:.0f} "
      "measured_fraction={:.3f}\n",
      a.accuracy, a.median_builds, a.median_samples, q.median_samples, a.measured_fraction);
  return 0;
}
