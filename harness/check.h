// The correctness check of a GEMM result against seeded inputs (harness/reference.h), with a tolerance
// derived from the arithmetic (docs/correctness.md):
//   full  every element against the fp64 reference C = A*B, scaled by S = |A|*|B|;
//   fast  above a size budget: every element scanned for NaN/inf, Freivalds projections C*x vs A*(B*x)
//         (rows) and y*C vs (y*A)*B (columns) for random +-1 vectors with a rigorous bound, every element
//         of the last rows and columns exactly, and one random element of each cell of a grid of about
//         4*(M+N) cells exactly. Its cost grows like O(M*N + (M+N)*K), not O(M*N*K).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "backends/digest.h"
#include "backends/kernel.h"

namespace kb {

struct GemmProblem;


// Bound on max |c - ref| / (|A||B|)_ij for a correct kernel: gamma_n * accumulate_ulps with
// gamma_n = n*u / (1 - n*u), n = K accumulation steps (+1 product rounding for f32 inputs; bf16 and f16
// products are exact in fp32), plus the output rounding when the kernel writes a low-precision output.
double tolerance_for(DType input, int64_t K, const ToleranceSpec& spec = {});

struct Check {
  bool ok = false;
  std::string method;     // "full" or "fast"
  double max_error = 0;   // normalized, over the elements checked exactly
  double tolerance = 0;
  int64_t checked = 0;    // elements compared exactly with the fp64 reference
  double projection_ratio = 0;  // fast: worst |projection error| / its bound (<= 1 passes)
  std::string detail;     // the first failure: element or projection, non-finite count
};

// Checks C (M x N, row-major) against the problem: full when the problem holds the full reference,
// fast otherwise. Never throws for a wrong result; throws InputError for a result of the wrong size.
Check check_result(const GemmProblem& p, const std::vector<float>& C, const ToleranceSpec& spec = {});

// The fast check runs on a digest of C (backends/digest.h): what to ask of C, and the check of the answer.
DigestRequest digest_request(const GemmProblem& p);
Check check_digest(const GemmProblem& p, const ResultDigest& d, const ToleranceSpec& spec = {});

// The check of an executable's last result: the full check on its result(), the fast one on its digest()
// (computed on the device by device backends, so only O(M + N) numbers leave it).
Check check_executable(const GemmProblem& p, Executable& exe, const ToleranceSpec& spec = {});

}  // namespace kb
