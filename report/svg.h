// One small SVG plot for every report: a plot area with x/y axes (an optional second y axis on the
// right), round tick values (1-2-5 steps), axis labels placed outside the tick labels, line and point
// series with per-point <title> tooltips, vertical/horizontal marker lines and a legend. Pure string
// building; every text is escaped here.
#pragma once
#include <string>
#include <utility>
#include <vector>

namespace kb::report::svg {

std::string escape(const std::string& s);  // & < > " '

// Round ticks covering [lo, hi]: a 1, 2 or 5 times 10^k step, at most `max_ticks` ticks (at least 2),
// the first at or below lo and the last at or above hi.
std::vector<double> nice_ticks(double lo, double hi, int max_ticks = 6);
// A tick value printed with as many decimals as the step needs, "+" before values >= 0 when `sign`,
// then `suffix` ("%"): 5 with step 5 -> "+5%", 0.25 with step 0.05 -> "0.25".
std::string tick_label(double v, double step, bool sign = false, const std::string& suffix = "");

struct Axis {
  std::string label;
  bool sign = false;       // "+" before non-negative tick values
  std::string suffix;      // after tick values ("%", "ms")
  bool include_zero = true;
  int max_ticks = 6;
};

struct Series {
  std::string name;                 // legend text
  std::string color = "#1f5fa8";
  std::vector<std::pair<double, double>> points;  // (x, y)
  std::vector<std::string> titles;  // tooltip per point (empty: none)
  bool line = true, dots = true, dashed = false;
  bool right_axis = false;          // plotted against the right y axis
  std::vector<std::pair<double, double>> bars;  // per point (lo, hi) of a vertical error bar; empty: none
  bool hollow = false;              // dots drawn as rings
  double dot_radius = 3;
};

// A series with its legend text and colour, the rest as defaults.
inline Series series(std::string name, std::string color) {
  Series s;
  s.name = std::move(name);
  s.color = std::move(color);
  return s;
}

struct Marker {
  bool vertical = true;   // a vertical line at x = at, else a horizontal one at y = at (left axis)
  double at = 0;
  std::string color = "#888", label;  // label: the line's tooltip
  std::string text;                   // shown at the top of a vertical marker line (empty: none)
};

// A vertical marker at x = at with its tooltip and (optional) text.
inline Marker vertical_marker(double at, std::string color, std::string label, std::string text = "") {
  Marker m;
  m.at = at;
  m.color = std::move(color);
  m.label = std::move(label);
  m.text = std::move(text);
  return m;
}

struct Plot {
  double width = 720, height = 260;
  std::string aria_label;
  Axis x, y, y2;
  // Text labels for x positions (dates, commits); empty: numeric round ticks. At most 16 are shown.
  std::vector<std::pair<double, std::string>> x_labels;
  std::vector<Series> series;
  std::vector<Marker> markers;
};

std::string render(const Plot& p);

}  // namespace kb::report::svg
