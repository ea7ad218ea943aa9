// Inputs and the Eigen reference: seeded random inputs rounded to the dtype, a double-precision GEMM,
// and the correctness check with a tolerance by dtype and K.
#pragma once
#include <cstdint>
#include <list>
#include <memory>
#include <string>
#include <vector>

#include "harness/case.h"

namespace kb {

struct GemmProblem {
  Shape shape;
  DType dtype = DType::f32;
  uint64_t seed = 0;
  std::vector<float> A, B;        // row-major, values exactly representable in dtype
  std::vector<double> C;          // reference C = A*B in double
  std::vector<double> scale;      // (|A| |B|)_ij, for normalized errors
};

// Rounds to the nearest representable value of the dtype (ties to even).
float round_to_dtype(float x, DType d);

// Builds inputs and reference for a shape/dtype/seed (Eigen GEMM in double).
std::shared_ptr<const GemmProblem> make_problem(const Shape& s, DType d, uint64_t seed = 42);

// Tolerance on max |c - ref| / (|A||B|)_ij for fp32 accumulation over K.
double tolerance_for(DType d, int64_t K);

struct Check {
  bool ok = false;
  double max_error = 0;   // normalized
  double tolerance = 0;
  std::string detail;     // first bad element, NaN count
};
Check check_result(const GemmProblem& p, const std::vector<float>& C);

// Keeps the most recent problems so cases sharing a shape/dtype share inputs and reference.
class ReferenceCache {
 public:
  explicit ReferenceCache(size_t capacity = 4) : capacity_(capacity) {}
  std::shared_ptr<const GemmProblem> get(const Shape& s, DType d, uint64_t seed = 42);

 private:
  size_t capacity_;
  std::list<std::shared_ptr<const GemmProblem>> items_;
};

}  // namespace kb
