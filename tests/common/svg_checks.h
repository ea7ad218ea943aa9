// Checks on the SVG plots of the HTML reports (drawn by report/svg): the y-axis tick labels are round
// (equally spaced by 1, 2 or 5 times a power of ten, each a multiple of that step) and points carry
// tooltips.
#pragma once
#include <cmath>
#include <regex>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace kbtest {

// The left y axis's tick labels, in the order drawn (report/svg right-aligns exactly these texts).
inline std::vector<std::string> y_tick_labels(const std::string& svg) {
  static const std::regex re("<text [^>]*text-anchor=\"end\">([^<]*)</text>");
  std::vector<std::string> out;
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), re); it != std::sregex_iterator(); ++it)
    out.push_back((*it)[1].str());
  return out;
}

// The tick labels parse as numbers (an optional sign and unit suffix aside) that step evenly by a 1-2-5
// step, each value a whole multiple of it.
inline testing::AssertionResult round_ticks(const std::vector<std::string>& labels) {
  if (labels.size() < 2) return testing::AssertionFailure() << "fewer than 2 y tick labels";
  std::vector<double> v;
  for (const auto& l : labels) {
    size_t used = 0;
    try {
      v.push_back(std::stod(l, &used));
    } catch (const std::exception&) {
      return testing::AssertionFailure() << "tick label '" << l << "' is not a number";
    }
  }
  const double step = std::fabs(v[1] - v[0]);
  const double mant = step / std::pow(10.0, std::floor(std::log10(step)));
  if (!(std::fabs(mant - 1) < 1e-6 || std::fabs(mant - 2) < 1e-6 || std::fabs(mant - 5) < 1e-6 ||
        std::fabs(mant - 10) < 1e-6))
    return testing::AssertionFailure() << "tick step " << step << " is not 1, 2 or 5 times a power of ten";
  for (size_t i = 0; i < v.size(); ++i) {
    if (i && std::fabs(std::fabs(v[i] - v[i - 1]) - step) > 1e-6 * step)
      return testing::AssertionFailure() << "ticks '" << labels[i - 1] << "' and '" << labels[i] << "' are not one step apart";
    const double k = v[i] / step;
    if (std::fabs(k - std::round(k)) > 1e-6)
      return testing::AssertionFailure() << "tick '" << labels[i] << "' is not a multiple of the step " << step;
  }
  return testing::AssertionSuccess();
}

// How many <title> tooltips contain `needle`.
inline size_t tooltips_with(const std::string& svg, const std::string& needle) {
  static const std::regex re("<title>([^<]*)</title>");
  size_t n = 0;
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), re); it != std::sregex_iterator(); ++it)
    if ((*it)[1].str().find(needle) != std::string::npos) ++n;
  return n;
}

}  // namespace kbtest
