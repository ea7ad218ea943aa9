#include "harness/check.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "core/error.h"
#include "harness/reference.h"

namespace kb {

namespace {

double unit_roundoff(DType d) {
  switch (d) {
    case DType::f32: return std::ldexp(1.0, -24);
    case DType::bf16: return std::ldexp(1.0, -8);
    case DType::f16: return std::ldexp(1.0, -11);
  }
  return std::ldexp(1.0, -24);
}

// The fp64 arithmetic of the reference and of the projections of C: (K + N + M + 4) roundings of 2^-53
// at most, relative to the same scales; far below any tolerance, kept so the bound stays rigorous.
double fp64_slack(const Shape& s) { return double(s.K + s.N + s.M + 4) * std::ldexp(1.0, -53); }

struct Worst {
  double error = 0;
  int64_t i = -1, j = -1;
  double got = 0, want = 0;
};

void note(Worst& w, double e, int64_t i, int64_t j, double got, double want) {
  if (e > w.error || w.i < 0) w = {e, i, j, got, want};
}

Check check_full(const GemmProblem& p, const std::vector<float>& C, Check r) {
  Worst w;
  const int64_t N = p.shape.N;
  for (size_t k = 0; k < C.size(); ++k) {
    const double e = std::fabs(double(C[k]) - p.C[k]) / std::max(p.scale[k], 1e-300);
    note(w, e, int64_t(k) / N, int64_t(k) % N, C[k], p.C[k]);
  }
  r.checked = int64_t(C.size());
  r.max_error = w.error;
  r.ok = w.error <= r.tolerance;
  if (!r.ok)
    r.detail = fmt::format("max normalized error {:.3g} > tolerance {:.3g} at C[{}][{}] = {} (expected {:.9g})", w.error,
                           r.tolerance, w.i, w.j, w.got, w.want);
  return r;
}

// Worst |projection of C - reference projection| / bound over all projections, rows and columns; `where`
// names the worst.
double projection_ratio(const GemmProblem& p, const ResultDigest& d, double tol, std::string& where) {
  const double slack = fp64_slack(p.shape);
  double worst = 0;
  auto scan = [&](const std::vector<std::vector<double>>& got, const std::vector<Projection>& ref,
                  const std::vector<double>& scale, const char* what) {
    for (size_t r = 0; r < got.size(); ++r)
      for (size_t t = 0; t < got[r].size(); ++t) {
        const double ratio = std::fabs(got[r][t] - ref[r].ref[t]) / ((tol + slack) * scale[t] + 1e-300);
        if (ratio > worst) {
          worst = ratio;
          where = fmt::format("{} {} of projection {}", what, t, r);
        }
      }
  };
  scan(d.rows, p.rows, p.row_scale, "row");
  scan(d.cols, p.cols, p.col_scale, "column");
  return worst;
}

Check start_check(const GemmProblem& p, const ToleranceSpec& spec) {
  Check r;
  r.method = p.full ? "full" : "fast";
  r.tolerance = tolerance_for(p.dtype, p.shape.K, spec);
  return r;
}

// A failed check for non-finite elements (a poisoned, unwritten element shows up here).
Check non_finite(Check r, const Shape& s, int64_t count, int64_t first, float value) {
  r.max_error = INFINITY;
  r.detail = fmt::format("{} non-finite values (first C[{}][{}] = {}): unwritten or overflowed elements", count,
                         first / s.N, first % s.N, value);
  return r;
}

}  // namespace

double tolerance_for(DType input, int64_t K, const ToleranceSpec& spec) {
  const double u = unit_roundoff(DType::f32);
  // n = K rounding steps: K - 1 adds and, for safety, one more (a kernel that adds its first product to a
  // zero, or a split-K final sum); +1 for f32 inputs, whose products are rounded (bf16 and f16 products fit
  // in fp32's 24-bit significand exactly).
  const double n = double(std::max<int64_t>(K, 1)) + (input == DType::f32 ? 1.0 : 0.0);
  const double nu = n * u * std::max(spec.accumulate_ulps, 1.0);
  double tol = nu < 1 ? nu / (1 - nu) : INFINITY;
  if (spec.output && *spec.output != DType::f32) tol = tol + unit_roundoff(*spec.output) * (1 + tol);
  return tol;
}

DigestRequest digest_request(const GemmProblem& p) {
  DigestRequest q;
  for (const auto& x : p.rows) q.row_vectors.push_back(x.v);
  for (const auto& y : p.cols) q.col_vectors.push_back(y.v);
  for (const RefElement& e : p.exact) q.cells.emplace_back(e.i, e.j);
  return q;
}

Check check_digest(const GemmProblem& p, const ResultDigest& d, const ToleranceSpec& spec) {
  Check r = start_check(p, spec);
  r.method = "fast";
  if (d.non_finite) return non_finite(r, p.shape, d.non_finite, d.first_non_finite, d.first_non_finite_value);
  if (d.cells.size() != p.exact.size() || d.rows.size() != p.rows.size() || d.cols.size() != p.cols.size())
    throw Error(fmt::format("digest of {} ({}) does not answer its request: {} cells, {} row and {} column projections",
                            p.shape.str(), d.where, d.cells.size(), d.rows.size(), d.cols.size()));
  Worst w;
  for (size_t k = 0; k < p.exact.size(); ++k) {
    const RefElement& e = p.exact[k];
    const double got = d.cells[k];
    note(w, std::fabs(got - e.ref) / std::max(e.scale, 1e-300), e.i, e.j, got, e.ref);
  }
  r.checked = int64_t(p.exact.size());
  r.max_error = w.error;
  std::string at;
  r.projection_ratio = projection_ratio(p, d, r.tolerance, at);
  r.ok = w.error <= r.tolerance && r.projection_ratio <= 1.0;
  if (w.error > r.tolerance)
    r.detail = fmt::format("max normalized error {:.3g} > tolerance {:.3g} at C[{}][{}] = {} (expected {:.9g})", w.error,
                           r.tolerance, w.i, w.j, w.got, w.want);
  else if (!r.ok)
    r.detail = fmt::format("projection error {:.3g} times its bound at {} (C*x vs A*(B*x), tolerance {:.3g})",
                           r.projection_ratio, at, r.tolerance);
  return r;
}

Check check_result(const GemmProblem& p, const std::vector<float>& C, const ToleranceSpec& spec) {
  Check r = start_check(p, spec);
  if (int64_t(C.size()) != p.shape.M * p.shape.N) {
    r.max_error = INFINITY;
    r.detail = fmt::format("result has {} elements, expected {}", C.size(), p.shape.M * p.shape.N);
    return r;
  }
  if (!p.full) return check_digest(p, host_digest(C, p.shape, digest_request(p)), spec);
  for (size_t k = 0; k < C.size(); ++k)
    if (!std::isfinite(C[k])) {
      int64_t n = 0;
      for (float c : C) n += !std::isfinite(c);
      return non_finite(r, p.shape, n, int64_t(k), C[k]);
    }
  return check_full(p, C, r);
}

Check check_executable(const GemmProblem& p, Executable& exe, const ToleranceSpec& spec) {
  if (p.full) return check_result(p, exe.result(), spec);
  return check_digest(p, exe.digest(p.shape, digest_request(p)), spec);
}

}  // namespace kb
