#include "harness/reference.h"

#include <algorithm>
#include <cmath>
#include <thread>

#include <Eigen/Core>
#include <fmt/format.h>

#include "core/rng.h"

namespace kb {

namespace {

using RowMatF = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using RowMatD = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

// Runs fn(lo, hi) over [0, n) split across the machine's cores.
template <class Fn>
void parallel_rows(int64_t n, Fn fn) {
  const int64_t t = std::clamp<int64_t>(std::thread::hardware_concurrency(), 1, 64);
  if (t == 1 || n < 64) return fn(int64_t(0), n);
  std::vector<std::thread> pool;
  const int64_t step = (n + t - 1) / t;
  for (int64_t lo = 0; lo < n; lo += step) pool.emplace_back(fn, lo, std::min(n, lo + step));
  for (auto& th : pool) th.join();
}

// Full reference: two fp64 GEMMs (C and |A|*|B|) with Eigen, rows split across the cores.
void build_full(GemmProblem& p) {
  const Shape& s = p.shape;
  Eigen::Map<const RowMatF> A(p.A.data(), s.M, s.K), B(p.B.data(), s.K, s.N);
  const RowMatD Bd = B.cast<double>(), Babs = Bd.cwiseAbs();
  p.C.resize(size_t(s.M * s.N));
  p.scale.resize(size_t(s.M * s.N));
  parallel_rows(s.M, [&](int64_t lo, int64_t hi) {
    const RowMatD Ad = A.middleRows(lo, hi - lo).cast<double>();
    Eigen::Map<RowMatD>(p.C.data() + lo * s.N, hi - lo, s.N).noalias() = Ad * Bd;
    Eigen::Map<RowMatD>(p.scale.data() + lo * s.N, hi - lo, s.N).noalias() = Ad.cwiseAbs() * Babs;
  });
  p.full = true;
}

// x (length n) of random +-1.
std::vector<double> signs(Rng& rng, int64_t n) {
  std::vector<double> v(static_cast<size_t>(n));
  for (auto& x : v) x = (rng.next() >> 63) ? 1.0 : -1.0;
  return v;
}

// One of several vectors a matrix is multiplied with in one pass; `absolute` uses |X|.
struct Operand {
  const std::vector<double>* v;
  bool absolute;
};

// y_t = X * v_t for every operand, in one pass over X (r x c, row-major float), in fp64; rows split
// across the cores.
std::vector<std::vector<double>> mat_vecs(const float* X, int64_t r, int64_t c, const std::vector<Operand>& ops) {
  std::vector<std::vector<double>> y(ops.size(), std::vector<double>(static_cast<size_t>(r)));
  parallel_rows(r, [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) {
      const float* row = X + i * c;
      for (size_t t = 0; t < ops.size(); ++t) {
        const double* v = ops[t].v->data();
        double acc = 0;
        if (ops[t].absolute)
          for (int64_t k = 0; k < c; ++k) acc += std::fabs(double(row[k])) * v[k];
        else
          for (int64_t k = 0; k < c; ++k) acc += double(row[k]) * v[k];
        y[t][size_t(i)] = acc;
      }
    }
  });
  return y;
}

// y_t = v_t * X for every operand (length c), in one pass over X; columns split across the cores.
std::vector<std::vector<double>> vec_mats(const std::vector<Operand>& ops, const float* X, int64_t r, int64_t c) {
  std::vector<std::vector<double>> y(ops.size(), std::vector<double>(static_cast<size_t>(c), 0.0));
  parallel_rows(c, [&](int64_t lo, int64_t hi) {
    for (int64_t i = 0; i < r; ++i) {
      const float* row = X + i * c;
      for (size_t t = 0; t < ops.size(); ++t) {
        const double w = (*ops[t].v)[size_t(i)];
        double* out = y[t].data();
        if (ops[t].absolute)
          for (int64_t j = lo; j < hi; ++j) out[j] += w * std::fabs(double(row[j]));
        else
          for (int64_t j = lo; j < hi; ++j) out[j] += w * double(row[j]);
      }
    }
  });
  return y;
}

// Freivalds projections and their scales: rows C*x = A*(B*x) and |A|*(|B|*1), columns y*C = (y*A)*B and
// (1*|A|)*|B|; two passes over each of A and B.
void build_projections(GemmProblem& p, Rng& rng, int count) {
  const Shape& s = p.shape;
  std::vector<std::vector<double>> xs, ys;
  for (int r = 0; r < count; ++r) {
    xs.push_back(signs(rng, s.N));
    ys.push_back(signs(rng, s.M));
  }
  const std::vector<double> ones_n(size_t(s.N), 1.0), ones_m(size_t(s.M), 1.0);
  auto operands = [](const std::vector<std::vector<double>>& vs, const std::vector<double>& ones) {
    std::vector<Operand> ops;
    for (const auto& v : vs) ops.push_back({&v, false});
    ops.push_back({&ones, true});
    return ops;
  };
  const auto bx = mat_vecs(p.B.data(), s.K, s.N, operands(xs, ones_n));
  const auto abx = mat_vecs(p.A.data(), s.M, s.K, operands({bx.begin(), bx.end() - 1}, bx.back()));
  const auto ya = vec_mats(operands(ys, ones_m), p.A.data(), s.M, s.K);
  const auto yab = vec_mats(operands({ya.begin(), ya.end() - 1}, ya.back()), p.B.data(), s.K, s.N);
  for (int r = 0; r < count; ++r) {
    p.rows.push_back({xs[size_t(r)], abx[size_t(r)]});
    p.cols.push_back({ys[size_t(r)], yab[size_t(r)]});
  }
  p.row_scale = abx.back();
  p.col_scale = yab.back();
}

// The elements checked exactly: every element of the last `edge` rows and columns (at most a 16th of
// them), then one random element in each cell of a grid of about 4*(M+N) cells (so every region of a
// few cells is looked at).
std::vector<std::pair<int64_t, int64_t>> exact_positions(const Shape& s, Rng& rng, int64_t edge) {
  std::vector<std::pair<int64_t, int64_t>> at;
  const int64_t er = std::clamp<int64_t>(s.M / 16, 1, edge), ec = std::clamp<int64_t>(s.N / 16, 1, edge);
  for (int64_t i = s.M - er; i < s.M; ++i)
    for (int64_t j = 0; j < s.N; ++j) at.emplace_back(i, j);
  for (int64_t i = 0; i < s.M - er; ++i)
    for (int64_t j = s.N - ec; j < s.N; ++j) at.emplace_back(i, j);
  const double cells = 4.0 * double(s.M + s.N);
  const double area = std::max(1.0, double(s.M) * double(s.N) / cells);
  const int64_t ch = std::clamp<int64_t>(std::llround(std::sqrt(area)), 1, s.M);
  const int64_t cw = std::clamp<int64_t>(int64_t(std::ceil(area / double(ch))), 1, s.N);
  for (int64_t i0 = 0; i0 < s.M; i0 += ch)
    for (int64_t j0 = 0; j0 < s.N; j0 += cw) {
      const int64_t i = i0 + int64_t(rng.below(uint64_t(std::min(ch, s.M - i0))));
      const int64_t j = j0 + int64_t(rng.below(uint64_t(std::min(cw, s.N - j0))));
      at.emplace_back(i, j);
    }
  return at;
}

// X (r x c, row-major) transposed, in 64x64 tiles so both sides stay in cache (a plain loop over a
// 16384^2 matrix takes seconds of cache misses).
std::vector<float> transposed(const std::vector<float>& X, int64_t r, int64_t c) {
  std::vector<float> T(X.size());
  constexpr int64_t kTile = 64;
  parallel_rows((r + kTile - 1) / kTile, [&](int64_t lo, int64_t hi) {
    for (int64_t i0 = lo * kTile; i0 < std::min(r, hi * kTile); i0 += kTile)
      for (int64_t j0 = 0; j0 < c; j0 += kTile)
        for (int64_t i = i0; i < std::min(r, i0 + kTile); ++i)
          for (int64_t j = j0; j < std::min(c, j0 + kTile); ++j) T[size_t(j * r + i)] = X[size_t(i * c + j)];
  });
  return T;
}

// sum a_k*b_k and sum |a_k*b_k| in fp64, with four independent sums (the loop is latency-bound).
void dot_with_scale(const float* a, const float* b, int64_t n, double& dot, double& scale) {
  double v[4] = {0, 0, 0, 0}, sc[4] = {0, 0, 0, 0};
  int64_t k = 0;
  for (; k + 4 <= n; k += 4)
    for (int u = 0; u < 4; ++u) {
      const double t = double(a[k + u]) * double(b[k + u]);
      v[u] += t;
      sc[u] += std::fabs(t);
    }
  for (; k < n; ++k) {
    const double t = double(a[k]) * double(b[k]);
    v[0] += t;
    sc[0] += std::fabs(t);
  }
  dot = (v[0] + v[1]) + (v[2] + v[3]);
  scale = (sc[0] + sc[1]) + (sc[2] + sc[3]);
}

// Exact fp64 values of the chosen elements: dot products of A's rows with B's columns (B transposed
// once so both are contiguous).
void build_exact(GemmProblem& p, Rng& rng, int64_t edge) {
  const Shape& s = p.shape;
  const auto at = exact_positions(s, rng, edge);
  const std::vector<float> Bt = transposed(p.B, s.K, s.N);
  p.exact.resize(at.size());
  parallel_rows(int64_t(at.size()), [&](int64_t lo, int64_t hi) {
    for (int64_t n = lo; n < hi; ++n) {
      const auto [i, j] = at[size_t(n)];
      const float* a = p.A.data() + i * s.K;
      const float* b = Bt.data() + j * s.K;
      p.exact[size_t(n)] = {i, j, 0, 0};
      dot_with_scale(a, b, s.K, p.exact[size_t(n)].ref, p.exact[size_t(n)].scale);
    }
  });
}

}  // namespace

float round_to_dtype(float x, DType d) {
  switch (d) {
    case DType::f32: return x;
    case DType::bf16: return static_cast<float>(Eigen::bfloat16(x));
    case DType::f16: return static_cast<float>(Eigen::half(x));
  }
  return x;
}

size_t GemmProblem::bytes() const {
  size_t b = (A.size() + B.size()) * sizeof(float) + (C.size() + scale.size()) * sizeof(double);
  for (const auto& v : {&rows, &cols})
    for (const auto& pr : *v) b += (pr.v.size() + pr.ref.size()) * sizeof(double);
  return b + (row_scale.size() + col_scale.size()) * sizeof(double) + exact.size() * sizeof(RefElement);
}

std::shared_ptr<const GemmProblem> make_problem(const Shape& s, DType d, uint64_t seed, const ReferenceOptions& opts) {
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
  if (opts.inputs_only) return p;
  if (s.flops() <= opts.full_max_flop) {
    build_full(*p);
  } else {
    Rng check_rng(seed * 0xD1B54A32D192ED03ull + 1);
    build_projections(*p, check_rng, opts.projections);
    build_exact(*p, check_rng, opts.edge);
  }
  return p;
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
  auto p = make_problem(s, d, seed, opts_);
  items_.push_front(p);
  size_t total = 0;
  for (const auto& q : items_) total += q->bytes();
  while (items_.size() > 1 && total > max_bytes_) {
    total -= items_.back()->bytes();
    items_.pop_back();
  }
  return p;
}

}  // namespace kb
