// The one seeded random generator of the project: fully specified output, so a seed gives the same
// stream, permutations and normals with any standard library (std::shuffle and std::*_distribution are
// implementation-defined).
#pragma once
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace kb {

// A 64-bit generator whose output is fully specified (SplitMix64 seeding of xoshiro256**), with
// bounded integers and normals implemented here, so results are identical across standard libraries.
class Rng {
 public:
  explicit Rng(uint64_t seed);
  uint64_t next();
  uint64_t below(uint64_t n);  // uniform in [0, n), unbiased (rejection)
  double uniform();            // [0, 1), 53 random bits
  double normal();             // standard normal (Marsaglia polar method)
  // Fisher-Yates with below(): the same permutation on every standard library (std::shuffle is not).
  template <class T>
  void shuffle(std::vector<T>& v) {
    for (size_t i = v.size(); i > 1; --i) std::swap(v[i - 1], v[size_t(below(i))]);
  }

 private:
  uint64_t s_[4];
  bool has_spare_ = false;
  double spare_ = 0;
};

}  // namespace kb
