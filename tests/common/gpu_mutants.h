// The GPU mutant harness shared by the CUDA and HIP backend tests: every mutant of one kernel is
// compiled with every toolchain next to the correct kernel (two compiles at a time), so a test can check
// that each edit changed the machine code here and, on a GPU, that each mutant is reported incorrect.
#pragma once
#include <algorithm>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <tuple>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "backends/backend.h"
#include "core/error.h"
#include "core/fsutil.h"
#include "harness/check.h"
#include "harness/reference.h"
#include "tests/backends/compile_request.h"
#include "tests/common/mutants.h"
#include "tests/common/two_threads.h"

namespace kb::test {

struct GpuMutant {
  std::string name;
  std::string file;  // below kernels/
  DType dtype;
  std::vector<Edit> edits;
};

// The mutants every path of a tiled GEMM gets, in this order: one K tile skipped (`drop(which)` skips tile
// `which`: the first, `middle` and `last`), the last row tile and the last column tile left unwritten; then
// `more`, the path's own.
inline std::vector<GpuMutant> tile_mutants(const std::string& file, DType d,
                                           const std::function<Edit(const std::string&)>& drop,
                                           const std::string& middle, const std::string& last, Edit last_row_unwritten,
                                           Edit last_column_unwritten, std::vector<GpuMutant> more) {
  std::vector<GpuMutant> v = {
      {"K tile dropped (first)", file, d, {drop("0")}},
      {"K tile dropped (middle)", file, d, {drop(middle)}},
      {"K tile dropped (last)", file, d, {drop(last)}},
      {"last row tile not written", file, d, {std::move(last_row_unwritten)}},
      {"last column tile not written", file, d, {std::move(last_column_unwritten)}},
  };
  for (GpuMutant& m : more) v.push_back(std::move(m));
  return v;
}

struct MutantBuild {
  std::string what;  // "<mutant or correct>/<dtype>/<toolchain>"
  Artifact art;
  std::string error;  // the compile error, empty when it compiled
};

// Compiles `kernel` of backend `be` with `params` (over its defaults) from the kernel tree `root` into
// `out_dir`.
inline MutantBuild compile_from(Backend& be, const std::string& kernel, const Params& params, const std::string& root,
                                DType d, const Toolchain& tc, const std::string& out_dir, const std::string& what) {
  const KernelDecl& k = find_kernel(be.name(), kernel);
  CompileRequest req = compile_request(k, tc, params, d);
  req.kernel_dir = root;
  req.out_dir = out_dir;
  req.timeout_s = 300;
  make_dirs(out_dir);
  MutantBuild b;
  b.what = what;
  try {
    b.art = be.compile(req);
  } catch (const CompileError& e) {
    b.error = std::string(e.what()) + "\n" + e.log();
  } catch (const Error& e) {
    b.error = e.what();
  }
  return b;
}

struct MutantBuilds {
  std::string dir = temp_dir("kb-gpu-mutants");
  std::vector<GpuMutant> mutants;
  std::vector<Toolchain> tcs;
  std::map<std::pair<int, size_t>, MutantBuild> correct;  // (dtype, index into tcs)
  std::vector<std::vector<MutantBuild>> of_mutant;             // [mutant][toolchain]

  // `params_for` gives the parameters each dtype is compiled with (the kernel's defaults when empty).
  MutantBuilds(Backend& be, const std::string& kernel, std::vector<GpuMutant> ms, std::vector<Toolchain> ts,
               const std::function<Params(DType)>& params_for = {})
      : mutants(std::move(ms)), tcs(std::move(ts)) {
    struct Job {
      std::string root;
      DType d;
      const Toolchain* tc;
      std::string what;
      MutantBuild* into;
    };
    std::vector<Job> jobs;
    of_mutant.assign(mutants.size(), std::vector<MutantBuild>(tcs.size()));
    for (size_t t = 0; t < tcs.size(); ++t)
      for (const auto& m : mutants)
        if (!correct.count({int(m.dtype), t}))
          jobs.push_back({kernel_dir(), m.dtype, &tcs[t], fmt::format("correct/{}/{}", to_string(m.dtype), tcs[t].name),
                          &correct[{int(m.dtype), t}]});
    for (size_t i = 0; i < mutants.size(); ++i) {
      const std::string root = mutant_tree(fmt::format("{}/m{}", dir, i), mutants[i].file, mutants[i].edits);
      for (size_t t = 0; t < tcs.size(); ++t)
        jobs.push_back({root, mutants[i].dtype, &tcs[t],
                        fmt::format("{}/{}/{}", mutants[i].name, to_string(mutants[i].dtype), tcs[t].name),
                        &of_mutant[i][t]});
    }
    test::on_every_core(jobs.size(), [&](size_t j) {
      const Job& job = jobs[j];
      *job.into = compile_from(be, kernel, params_for ? params_for(job.d) : Params{}, job.root, job.d, *job.tc,
                               fmt::format("{}/out{}", dir, j), job.what);
    });
  }
  ~MutantBuilds() { remove_tree(dir); }
  MutantBuilds(const MutantBuilds&) = delete;
  MutantBuilds& operator=(const MutantBuilds&) = delete;

  const MutantBuild& correct_for(size_t mutant, size_t tc) const {
    return correct.at({int(mutants[mutant].dtype), tc});
  }
};

// Every build succeeded, and every mutant's code hash differs from the correct kernel's.
inline void expect_mutants_change_code(const MutantBuilds& b) {
  for (const auto& [key, c] : b.correct) ASSERT_TRUE(c.error.empty()) << c.what << ": " << c.error;
  for (size_t i = 0; i < b.mutants.size(); ++i)
    for (size_t t = 0; t < b.tcs.size(); ++t) {
      const MutantBuild& m = b.of_mutant[i][t];
      ASSERT_TRUE(m.error.empty()) << m.what << ": " << m.error;
      EXPECT_NE(m.art.code_hash, b.correct_for(i, t).art.code_hash)
          << m.what << ": the edit did not change the machine code";
    }
}

struct Verdicts {
  Check full, fast;
};

// The inputs and both references (full, and the fast check's at every size: on the device digest where
// the backend has one) of each shape and dtype, built once for all mutants and toolchains.
class Problems {
 public:
  const GemmProblem& full(const Shape& s, DType d) { return *get(s, d, false); }
  const GemmProblem& fast(const Shape& s, DType d) { return *get(s, d, true); }

 private:
  std::shared_ptr<const GemmProblem> get(const Shape& s, DType d, bool fast) {
    auto& p = items_[{s.str(), int(d), fast}];
    if (!p) {
      ReferenceOptions opts;
      if (fast) opts.full_max_flop = 0;
      p = make_problem(s, d, 42, opts);
    }
    return p;
  }
  std::map<std::tuple<std::string, int, bool>, std::shared_ptr<const GemmProblem>> items_;
};

// Loads `art`, runs it once at `s` and checks the result with the full check and the fast one.
inline Verdicts run_and_check(Backend& be, const Artifact& art, const Shape& s, DType d, Problems& problems) {
  const KernelDecl& k = find_kernel(be.name(), art.kernel);
  const GemmProblem& full = problems.full(s, d);
  auto exe = be.load(art);
  exe->prepare(s, full.A, full.B);
  exe->run(1);
  return {check_executable(full, *exe, k.tolerance), check_executable(problems.fast(s, d), *exe, k.tolerance)};
}

// On a device: the correct kernels pass at every shape, and every mutant fails both checks at every shape.
// A toolchain whose code the device cannot load (built for another architecture) is skipped with a
// printed reason; at least one toolchain must run.
inline void expect_mutants_incorrect(Backend& be, const MutantBuilds& b,
                                     const std::function<std::vector<Shape>(DType)>& shapes_for) {
  for (size_t i = 0; i < b.mutants.size(); ++i)
    for (size_t t = 0; t < b.tcs.size(); ++t) ASSERT_TRUE(b.of_mutant[i][t].error.empty()) << b.of_mutant[i][t].what;
  Problems problems;
  std::vector<bool> runs(b.tcs.size(), true);
  for (const auto& [key, c] : b.correct) {
    ASSERT_TRUE(c.error.empty()) << c.what << ": " << c.error;
    const size_t t = key.second;
    try {
      be.load(c.art);
    } catch (const EnvError& e) {
      std::cout << "skipping " << b.tcs[t].name << " on this device: " << e.what() << "\n";
      runs[t] = false;
      continue;
    }
    for (const Shape& s : shapes_for(c.art.dtype)) {
      const Verdicts v = run_and_check(be, c.art, s, c.art.dtype, problems);
      EXPECT_TRUE(v.full.ok) << c.what << " at " << s.str() << ": " << v.full.detail;
      EXPECT_TRUE(v.fast.ok) << c.what << " at " << s.str() << ": " << v.fast.detail;
    }
  }
  ASSERT_NE(std::count(runs.begin(), runs.end(), true), 0) << "no toolchain's code loads on this device";
  int caught = 0, total = 0;
  for (size_t i = 0; i < b.mutants.size(); ++i)
    for (size_t t = 0; t < b.tcs.size(); ++t) {
      if (!runs[t]) continue;
      const MutantBuild& m = b.of_mutant[i][t];
      for (const Shape& s : shapes_for(b.mutants[i].dtype)) {
        const Verdicts v = run_and_check(be, m.art, s, b.mutants[i].dtype, problems);
        EXPECT_FALSE(v.full.ok) << m.what << " at " << s.str() << " passed the full check";
        EXPECT_FALSE(v.fast.ok) << m.what << " at " << s.str() << " passed the fast check";
        caught += !v.full.ok && !v.fast.ok;
        ++total;
        std::cout << fmt::format("{:52} {:>14} full: {:40} fast: {}\n", m.what, s.str(), v.full.detail.substr(0, 40),
                                 v.fast.detail.substr(0, 60));
      }
    }
  std::cout << fmt::format("{} mutants caught: {} of {} (mutant x toolchain x shape)\n", be.name(), caught, total);
}

}  // namespace kb::test
