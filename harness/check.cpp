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

// Non-finite values anywhere in C (a poisoned, unwritten element shows up here).
int64_t count_non_finite(const std::vector<float>& C, int64_t& first) {
  int64_t n = 0;
  for (size_t k = 0; k < C.size(); ++k)
    if (!std::isfinite(C[k])) {
      if (n++ == 0) first = int64_t(k);
    }
  return n;
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

// Worst |projection of C - reference projection| / bound over all projections, rows and columns, in one
// pass over C; `where` names the worst.
double projection_ratio(const GemmProblem& p, const std::vector<float>& C, double tol, std::string& where) {
  const Shape& s = p.shape;
  const size_t R = p.rows.size(), Q = p.cols.size();
  std::vector<std::vector<double>> rows(R, std::vector<double>(size_t(s.M), 0.0));
  std::vector<std::vector<double>> cols(Q, std::vector<double>(size_t(s.N), 0.0));
  for (int64_t i = 0; i < s.M; ++i) {
    const float* row = C.data() + i * s.N;
    for (size_t r = 0; r < R; ++r) {
      const std::vector<double>& x = p.rows[r].v;
      double acc = 0;
      for (int64_t j = 0; j < s.N; ++j) acc += double(row[j]) * x[size_t(j)];
      rows[r][size_t(i)] = acc;
    }
    for (size_t q = 0; q < Q; ++q) {
      const double y = p.cols[q].v[size_t(i)];
      double* out = cols[q].data();
      for (int64_t j = 0; j < s.N; ++j) out[j] += y * double(row[j]);
    }
  }
  const double slack = fp64_slack(s);
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
  scan(rows, p.rows, p.row_scale, "row");
  scan(cols, p.cols, p.col_scale, "column");
  return worst;
}

Check check_fast(const GemmProblem& p, const std::vector<float>& C, Check r) {
  Worst w;
  for (const RefElement& e : p.exact) {
    const double got = C[size_t(e.i * p.shape.N + e.j)];
    note(w, std::fabs(got - e.ref) / std::max(e.scale, 1e-300), e.i, e.j, got, e.ref);
  }
  r.checked = int64_t(p.exact.size());
  r.max_error = w.error;
  std::string at;
  r.projection_ratio = projection_ratio(p, C, r.tolerance, at);
  r.ok = w.error <= r.tolerance && r.projection_ratio <= 1.0;
  if (w.error > r.tolerance)
    r.detail = fmt::format("max normalized error {:.3g} > tolerance {:.3g} at C[{}][{}] = {} (expected {:.9g})", w.error,
                           r.tolerance, w.i, w.j, w.got, w.want);
  else if (!r.ok)
    r.detail = fmt::format("projection error {:.3g} times its bound at {} (C*x vs A*(B*x), tolerance {:.3g})",
                           r.projection_ratio, at, r.tolerance);
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

Check check_result(const GemmProblem& p, const std::vector<float>& C, const ToleranceSpec& spec) {
  Check r;
  r.method = p.full ? "full" : "fast";
  r.tolerance = tolerance_for(p.dtype, p.shape.K, spec);
  if (int64_t(C.size()) != p.shape.M * p.shape.N) {
    r.max_error = INFINITY;
    r.detail = fmt::format("result has {} elements, expected {}", C.size(), p.shape.M * p.shape.N);
    return r;
  }
  int64_t first = -1;
  if (const int64_t bad = count_non_finite(C, first)) {
    r.max_error = INFINITY;
    r.detail = fmt::format("{} non-finite values (first C[{}][{}] = {}): unwritten or overflowed elements", bad,
                           first / p.shape.N, first % p.shape.N, C[size_t(first)]);
    return r;
  }
  return p.full ? check_full(p, C, r) : check_fast(p, C, r);
}

}  // namespace kb
