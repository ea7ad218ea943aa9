// Change-point detection on a per-case series of nightly medians: E-Divisive (Matteson & James 2014,
// energy statistic with exponent 1, binary segmentation, as used for performance CI by MongoDB) on the
// log of the medians, each new change point accepted only when a permutation test (shuffling within
// the current segments) gives p <= alpha. Deterministic for a given seed. See docs/nightly.md.
#pragma once
#include <cstdint>
#include <string>
#include <vector>


namespace kb {

struct ChangePoint {
  std::string case_id;       // filled by detect_in_series (nightly/history.h)
  int index = 0;             // first point of the new segment (0-based, into the series)
  int64_t run_id = 0;        // run of that point (detect_in_series)
  std::string date;          // date of that run (detect_in_series)
  double before = 0, after = 0;  // medians of the adjacent segments (original units)
  double rel_change = 0;     // after / before - 1 (> 0: slower when the series is a time)
  double p_value = 1;
};

struct ChangePointConfig {
  double alpha = 0.01;         // permutation-test significance per accepted change point
  int min_segment = 3;         // no segment shorter than this (a step is seen min_segment runs after it)
  int permutations = 999;
  uint64_t seed = 1;
  double min_rel_change = 0.0; // drop accepted change points with |rel_change| below this
  int max_change_points = 8;
};

// Change points of one series (values > 0, e.g. median seconds), sorted by index. Throws InputError for
// a non-positive or non-finite value or a bad config.
std::vector<ChangePoint> detect_change_points(const std::vector<double>& series, const ChangePointConfig& cfg);

}  // namespace kb
