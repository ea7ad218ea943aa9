#include "backends/digest.h"

#include <cmath>

#include <fmt/format.h>

#include "core/error.h"

namespace kb {

void check_digest_request(const Shape& s, const DigestRequest& req) {
  for (const auto& x : req.row_vectors)
    if (int64_t(x.size()) != s.N) throw InputError(fmt::format("digest: a row vector has {} entries, N = {}", x.size(), s.N));
  for (const auto& y : req.col_vectors)
    if (int64_t(y.size()) != s.M) throw InputError(fmt::format("digest: a column vector has {} entries, M = {}", y.size(), s.M));
  for (const auto& [i, j] : req.cells)
    if (i < 0 || i >= s.M || j < 0 || j >= s.N)
      throw InputError(fmt::format("digest: cell ({}, {}) is outside {}", i, j, s.str()));
}

ResultDigest host_digest(const std::vector<float>& C, const Shape& s, const DigestRequest& req) {
  if (int64_t(C.size()) != s.M * s.N)
    throw InputError(fmt::format("digest: result has {} elements, expected {} for {}", C.size(), s.M * s.N, s.str()));
  check_digest_request(s, req);
  ResultDigest d;
  const size_t R = req.row_vectors.size(), Q = req.col_vectors.size();
  d.rows.assign(R, std::vector<double>(size_t(s.M), 0.0));
  d.cols.assign(Q, std::vector<double>(size_t(s.N), 0.0));
  for (int64_t i = 0; i < s.M; ++i) {
    const float* row = C.data() + i * s.N;
    for (int64_t j = 0; j < s.N; ++j)
      if (!std::isfinite(row[j]) && d.non_finite++ == 0) {
        d.first_non_finite = i * s.N + j;
        d.first_non_finite_value = row[j];
      }
    for (size_t r = 0; r < R; ++r) {
      const double* x = req.row_vectors[r].data();
      double acc = 0;
      for (int64_t j = 0; j < s.N; ++j) acc += double(row[j]) * x[j];
      d.rows[r][size_t(i)] = acc;
    }
    for (size_t q = 0; q < Q; ++q) {
      const double y = req.col_vectors[q][size_t(i)];
      double* out = d.cols[q].data();
      for (int64_t j = 0; j < s.N; ++j) out[j] += y * double(row[j]);
    }
  }
  d.cells.reserve(req.cells.size());
  for (const auto& [i, j] : req.cells) d.cells.push_back(C[size_t(i * s.N + j)]);
  return d;
}

}  // namespace kb
