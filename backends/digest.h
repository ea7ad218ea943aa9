// A digest of a GEMM result C (M x N, row-major fp32): what the fast correctness check needs of C, so
// that it can be computed where C lives (on the GPU for device backends) and only O(M + N) numbers travel:
//   projections  C*x for each row vector x (length N) and y*C for each column vector y (length M), in fp64;
//   non-finite   how many elements are NaN/inf and the first of them (row-major order);
//   cells        the values of chosen elements.
// host_digest computes it from C on the host; a backend may compute the same on its device.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "backends/kernel.h"

namespace kb {

struct DigestRequest {
  std::vector<std::vector<double>> row_vectors;  // each of length N: C * x
  std::vector<std::vector<double>> col_vectors;  // each of length M: y * C
  std::vector<std::pair<int64_t, int64_t>> cells;  // (i, j) elements to return
};

struct ResultDigest {
  std::string where = "host";        // "host" or the device that computed it
  int64_t non_finite = 0;
  int64_t first_non_finite = -1;     // row-major index, -1 when none
  float first_non_finite_value = 0;
  std::vector<std::vector<double>> rows;  // rows[r][i] = sum_j C[i][j] * row_vectors[r][j]
  std::vector<std::vector<double>> cols;  // cols[q][j] = sum_i col_vectors[q][i] * C[i][j]
  std::vector<float> cells;               // C at the requested cells, in request order
};

// Throws InputError unless every vector and cell of the request fits the shape.
void check_digest_request(const Shape& s, const DigestRequest& req);

// The digest of C on the host: one pass over C. Throws InputError when C or a vector has the wrong size.
ResultDigest host_digest(const std::vector<float>& C, const Shape& s, const DigestRequest& req);

}  // namespace kb
