#include "core/rng.h"
#include "harness/reference.h"

#include <cmath>

#include <Eigen/Core>
#include <fmt/format.h>

namespace kb {

float round_to_dtype(float x, DType d) {
  switch (d) {
    case DType::f32: return x;
    case DType::bf16: return static_cast<float>(Eigen::bfloat16(x));
    case DType::f16: return static_cast<float>(Eigen::half(x));
  }
  return x;
}

std::shared_ptr<const GemmProblem> make_problem(const Shape& s, DType d, uint64_t seed) {
  auto p = std::make_shared<GemmProblem>();
  p->shape = s;
  p->dtype = d;
  p->seed = seed;
  // Random data in [-1, 1) (never zeros: zeros time faster on some hardware and hide bugs).
  Rng rng(seed ^ (uint64_t(s.M) * 0x9E3779B97F4A7C15ull) ^ (uint64_t(s.N) << 21) ^ uint64_t(s.K));
  auto dist = [](Rng& r) { return float(2 * r.uniform() - 1); };
  p->A.resize(size_t(s.M * s.K));
  p->B.resize(size_t(s.K * s.N));
  for (auto& x : p->A) x = round_to_dtype(dist(rng), d);
  for (auto& x : p->B) x = round_to_dtype(dist(rng), d);
  using RowMatF = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  using RowMatD = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  Eigen::Map<const RowMatF> A(p->A.data(), s.M, s.K), B(p->B.data(), s.K, s.N);
  RowMatD Ad = A.cast<double>(), Bd = B.cast<double>();
  RowMatD C = Ad * Bd;
  RowMatD S = Ad.cwiseAbs() * Bd.cwiseAbs();
  p->C.assign(C.data(), C.data() + C.size());
  p->scale.assign(S.data(), S.data() + S.size());
  return p;
}

double tolerance_for(DType d, int64_t K) {
  // fp32 accumulation of K products: worst-case relative bound ~K*u (u = 2^-24); we allow 2*K*u with a
  // floor. Low-precision dtypes may also round the output (tensor-core kernels): add 2 ulps of bf16/f16.
  double acc = std::max(1e-6, 2.0 * double(K) * std::ldexp(1.0, -24));
  switch (d) {
    case DType::f32: return acc;
    case DType::bf16: return acc + 2 * std::ldexp(1.0, -8);
    case DType::f16: return acc + 2 * std::ldexp(1.0, -11);
  }
  return acc;
}

Check check_result(const GemmProblem& p, const std::vector<float>& C) {
  Check r;
  r.tolerance = tolerance_for(p.dtype, p.shape.K);
  if (C.size() != p.C.size()) {
    r.detail = fmt::format("result has {} elements, expected {}", C.size(), p.C.size());
    r.max_error = INFINITY;
    return r;
  }
  size_t nan = 0, worst = 0;
  for (size_t i = 0; i < C.size(); ++i) {
    if (!std::isfinite(C[i])) {
      ++nan;
      worst = i;
      r.max_error = INFINITY;
      continue;
    }
    double e = std::fabs(double(C[i]) - p.C[i]) / std::max(p.scale[i], 1e-30);
    if (e > r.max_error) {
      r.max_error = e;
      worst = i;
    }
  }
  r.ok = nan == 0 && r.max_error <= r.tolerance;
  if (!r.ok) {
    size_t N = size_t(p.shape.N);
    r.detail = fmt::format("max normalized error {:.3g} > tolerance {:.3g} at C[{}][{}] = {} (expected {:.9g}){}",
                           r.max_error, r.tolerance, worst / N, worst % N, C[worst], p.C[worst],
                           nan ? fmt::format(", {} non-finite values", nan) : "");
  }
  return r;
}

std::shared_ptr<const GemmProblem> ReferenceCache::get(const Shape& s, DType d, uint64_t seed) {
  for (auto it = items_.begin(); it != items_.end(); ++it) {
    const auto& p = **it;
    if (p.shape.M == s.M && p.shape.N == s.N && p.shape.K == s.K && p.dtype == d && p.seed == seed) {
      auto hit = *it;
      items_.erase(it);
      items_.push_front(hit);
      return hit;
    }
  }
  auto p = make_problem(s, d, seed);
  items_.push_front(p);
  while (items_.size() > capacity_) items_.pop_back();
  return p;
}

}  // namespace kb
