// Inputs and references of GEMM problems: seeded random inputs rounded to the dtype, and what the
// correctness check (harness/check.h) compares a result with. Small problems keep the full fp64
// reference C = A*B and S = |A|*|B|; above a size budget only what the fast check needs, built in
// O(M*N + (M+N)*K): Freivalds projections, the last rows and columns, and a stratified sample.
#pragma once
#include <cstdint>
#include <list>
#include <memory>
#include <string>
#include <vector>

#include "backends/kernel.h"
#include "harness/check.h"
#include "harness/user_check.h"

namespace kb {

struct ReferenceOptions {
  // Problems of at most this many flops (2*M*N*K) get the full reference; larger ones the fast one.
  double full_max_flop = 2e9;
  int projections = 2;  // Freivalds vectors per direction
  int64_t edge = 8;     // last rows and last columns checked exactly
  bool inputs_only = false;  // A and B alone, no reference (benchmarks of the reference's own cost)
};

// One exactly known element of C.
struct RefElement {
  int64_t i = 0, j = 0;
  double ref = 0;    // (A*B)_ij in fp64
  double scale = 0;  // (|A|*|B|)_ij
};

// A projection of C onto a random +-1 vector: along rows (C*x, length M) or columns (y*C, length N).
struct Projection {
  std::vector<double> v;    // the +-1 vector (length N for rows, M for columns)
  std::vector<double> ref;  // A*(B*x) or (y*A)*B in fp64
};

struct GemmProblem {
  Shape shape;
  DType dtype = DType::f32;
  uint64_t seed = 0;
  std::vector<float> A, B;      // row-major, values exactly representable in dtype
  bool full = false;
  std::vector<double> C;        // full: reference C = A*B in double
  std::vector<double> scale;    // full: (|A| |B|)_ij, for normalized errors
  // fast:
  std::vector<Projection> rows, cols;
  std::vector<double> row_scale;  // |A| * (|B| * 1)   (M)
  std::vector<double> col_scale;  // (1 * |A|) * |B|   (N)
  std::vector<RefElement> exact;  // the last rows and columns, then one element per grid cell
  size_t bytes() const;
};

// Rounds to the nearest representable value of the dtype (ties to even).
float round_to_dtype(float x, DType d);

// Builds inputs and reference for a shape/dtype/seed.
std::shared_ptr<const GemmProblem> make_problem(const Shape& s, DType d, uint64_t seed = 42,
                                                const ReferenceOptions& opts = {});

// The problems of a sweep, each built once: every problem stays until the cache holds more than
// `max_bytes`, then the least recently used go first (a sweep's loop order never rebuilds one that fits).
class ReferenceCache {
 public:
  explicit ReferenceCache(size_t max_bytes = size_t(4) << 30, ReferenceOptions opts = {})
      : max_bytes_(max_bytes), opts_(opts) {}
  std::shared_ptr<const GemmProblem> get(const Shape& s, DType d, uint64_t seed = 42);
  size_t size() const { return items_.size(); }
  // Users' Triton kernels have no GEMM reference: their baselines' outputs (harness/user_check.h).
  OutputReferences& outputs() { return outputs_; }

 private:
  size_t max_bytes_;
  ReferenceOptions opts_;
  std::list<std::shared_ptr<const GemmProblem>> items_;
  OutputReferences outputs_;
};

}  // namespace kb
