#include "report/svg.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "core/text.h"
#include "report/table.h"

namespace kb::report::svg {

namespace {

constexpr double kFont = 11, kCharWidth = 6.6, kPad = 6, kTop = 20;
constexpr double kTickFont = 10, kTickCharWidth = kCharWidth * kTickFont / kFont;  // x tick labels

double nice_step(double range, int max_ticks) {
  double raw = range / std::max(1, max_ticks - 1);
  double mag = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * mag >= raw * (1 - 1e-9)) return m * mag;
  return 10 * mag;
}

struct Scale {
  std::vector<double> ticks;
  double lo = 0, hi = 1;
  double step() const { return ticks.size() > 1 ? ticks[1] - ticks[0] : 1; }
};

Scale scale_for(const Axis& a, std::vector<double> values) {
  if (a.include_zero) values.push_back(0);
  Scale s;
  if (values.empty()) values = {0, 1};
  auto [mn, mx] = std::minmax_element(values.begin(), values.end());
  s.ticks = nice_ticks(*mn, *mx, a.max_ticks);
  s.lo = s.ticks.front();
  s.hi = s.ticks.back();
  return s;
}

size_t widest_label(const Scale& s, const Axis& a) {
  size_t w = 0;
  for (double t : s.ticks) w = std::max(w, tick_label(t, s.step(), a.sign, a.suffix).size());
  return w;
}

}  // namespace

std::string escape(const std::string& s) { return html_escape(s); }

std::vector<double> nice_ticks(double lo, double hi, int max_ticks) {
  max_ticks = std::max(2, max_ticks);
  if (!(hi > lo)) hi = lo + 1;
  double step = nice_step(hi - lo, max_ticks);
  while (true) {
    long first = long(std::floor(lo / step + 1e-9)), last = long(std::ceil(hi / step - 1e-9));
    if (last - first + 1 <= max_ticks) {
      std::vector<double> t;
      for (long k = first; k <= last; ++k) t.push_back(double(k) * step);
      return t;
    }
    step = nice_step(step * 1.5 * double(max_ticks - 1), max_ticks);
  }
}

std::string tick_label(double v, double step, bool sign, const std::string& suffix) {
  int decimals = step >= 1 ? 0 : int(std::ceil(-std::log10(step) - 1e-9));
  if (std::fabs(v) < step * 1e-6) v = 0;
  return fmt::format("{}{:.{}f}{}", sign && v >= 0 ? "+" : "", v, decimals, suffix);
}

namespace {

// Scales and geometry of one plot.
struct Frame {
  Scale sx, sy, sy2;
  bool has_y2 = false;
  double L = 0, R = 0, B = 0, W = 0, H = 0, pw = 0, ph = 0;
  double px(double v) const { return sx.hi > sx.lo ? L + pw * (v - sx.lo) / (sx.hi - sx.lo) : L + pw / 2; }
  double py(const Scale& s, double v) const { return kTop + ph * (1 - (v - s.lo) / (s.hi - s.lo)); }
};

// The x axis's labels as drawn, left to right, with their x values: the text labels (at most 16 shown), else
// the round ticks.
std::vector<std::pair<double, std::string>> shown_x_labels(const Plot& p, const Scale& sx) {
  std::vector<std::pair<double, std::string>> out;
  if (p.x_labels.empty()) {
    for (double t : sx.ticks) out.push_back({t, tick_label(t, sx.step(), p.x.sign, p.x.suffix)});
  } else {
    const size_t every = (p.x_labels.size() + 15) / 16;
    for (size_t i = 0; i < p.x_labels.size(); i += every) out.push_back(p.x_labels[i]);
  }
  return out;
}

Frame frame_for(const Plot& p) {
  Frame f;
  std::vector<double> xs, ys, y2s;
  for (const auto& s : p.series)
    for (const auto& [x, y] : s.points) xs.push_back(x), (s.right_axis ? y2s : ys).push_back(y);
  for (const auto& s : p.series)
    for (const auto& [lo, hi] : s.bars) (s.right_axis ? y2s : ys).push_back(lo), (s.right_axis ? y2s : ys).push_back(hi);
  for (const auto& m : p.markers) (m.vertical ? xs : ys).push_back(m.at);
  f.has_y2 = std::any_of(p.series.begin(), p.series.end(), [](const Series& s) { return s.right_axis; });
  Axis xa = p.x;
  xa.include_zero = xa.include_zero && p.x_labels.empty();
  f.sx = scale_for(xa, xs);
  f.sy = scale_for(p.y, ys);
  f.sy2 = scale_for(p.y2, y2s);
  if (!p.x_labels.empty() && !xs.empty()) {
    f.sx.lo = *std::min_element(xs.begin(), xs.end());
    f.sx.hi = *std::max_element(xs.begin(), xs.end());
  }
  // Axis labels sit outside the tick labels, so the margins grow with the widest tick label.
  f.L = kPad + double(widest_label(f.sy, p.y)) * kCharWidth + kPad + (p.y.label.empty() ? 0 : kFont + kPad);
  f.R = f.has_y2 ? kPad + double(widest_label(f.sy2, p.y2)) * kCharWidth + kPad + (p.y2.label.empty() ? 0 : kFont + kPad)
                 : 16;
  // The x labels are centred on their points, and the first and last sit on the plot's edges: the margins
  // leave room for their halves, so a date at the right end is not cut off by the picture's border.
  const auto xl = shown_x_labels(p, f.sx);
  if (!xl.empty()) {
    f.L = std::max(f.L, double(text_width(xl.front().second)) * kTickCharWidth / 2 + 2);
    f.R = std::max(f.R, double(text_width(xl.back().second)) * kTickCharWidth / 2 + 2);
  }
  f.B = 14 + kPad + (p.x.label.empty() ? 0 : kFont + kPad) + 18;
  f.W = p.width;
  f.H = p.height;
  f.pw = f.W - f.L - f.R;
  f.ph = f.H - kTop - f.B;
  return f;
}

std::string y_axes(const Plot& p, const Frame& f) {
  std::string o;
  for (double t : f.sy.ticks) {
    double y = f.py(f.sy, t);
    o += fmt::format("<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#eee\"/>\n", f.L, y,
                     f.L + f.pw, y);
    o += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" font-size=\"{}\" text-anchor=\"end\">{}</text>\n", f.L - kPad,
                     y + 4, kFont, escape(tick_label(t, f.sy.step(), p.y.sign, p.y.suffix)));
  }
  if (f.has_y2)
    for (double t : f.sy2.ticks)
      o += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" font-size=\"{}\">{}</text>\n", f.L + f.pw + kPad,
                       f.py(f.sy2, t) + 4, kFont, escape(tick_label(t, f.sy2.step(), p.y2.sign, p.y2.suffix)));
  auto ylabel = [&](const std::string& text, double x) {
    if (text.empty()) return;
    o += fmt::format("<text x=\"{0:.1f}\" y=\"{1:.1f}\" font-size=\"{2}\" text-anchor=\"middle\" "
                     "transform=\"rotate(-90 {0:.1f} {1:.1f})\">{3}</text>\n",
                     x, kTop + f.ph / 2, kFont, escape(text));
  };
  ylabel(p.y.label, kPad + kFont / 2 + 2);
  if (f.has_y2) ylabel(p.y2.label, f.W - kPad - kFont / 2);
  return o;
}

std::string x_axis(const Plot& p, const Frame& f) {
  std::string o;
  double xt = kTop + f.ph + 14;
  for (const auto& [x, text] : shown_x_labels(p, f.sx))
    o += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" font-size=\"{}\" text-anchor=\"middle\">{}</text>\n", f.px(x), xt,
                     kTickFont, escape(text));
  if (!p.x.label.empty())
    o += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" font-size=\"{}\" text-anchor=\"middle\">{}</text>\n",
                     f.L + f.pw / 2, xt + kPad + kFont, kFont, escape(p.x.label));
  return o;
}

std::string markers(const Plot& p, const Frame& f) {
  std::string o;
  int text_row = 0;  // marker texts alternate between two rows so neighbours do not overlap
  for (const auto& m : p.markers) {
    double a = m.vertical ? f.px(m.at) : f.py(f.sy, m.at);
    o += m.vertical ? fmt::format("<line x1=\"{0:.1f}\" y1=\"{1}\" x2=\"{0:.1f}\" y2=\"{2:.1f}\"", a, kTop, kTop + f.ph)
                    : fmt::format("<line x1=\"{1:.1f}\" y1=\"{0:.1f}\" x2=\"{2:.1f}\" y2=\"{0:.1f}\"", a, f.L, f.L + f.pw);
    o += fmt::format(" stroke=\"{}\" stroke-dasharray=\"3,3\">", escape(m.color));
    o += m.label.empty() ? "</line>\n" : "<title>" + escape(m.label) + "</title></line>\n";
    if (m.vertical && !m.text.empty()) {
      // Right of the line, or left of it when it would run past the picture's right border (a culprit at
      // the last commit).
      const double w = double(text_width(m.text)) * kCharWidth;
      const double tx = a + 3 + w > f.W - 2 ? std::max(2.0, a - 3 - w) : a + 3;
      o += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" font-size=\"{}\" fill=\"{}\">{}</text>\n", tx,
                       kTop + 10 + 12 * double(text_row++ % 2), kFont, escape(m.color), escape(m.text));
    }
  }
  return o;
}

std::string series(const Plot& p, const Frame& f) {
  std::string o;
  for (const auto& s : p.series) {
    const Scale& sc = s.right_axis ? f.sy2 : f.sy;
    std::string pts;
    for (size_t i = 0; i < s.points.size(); ++i)
      pts += fmt::format("{}{:.1f},{:.1f}", i ? " " : "", f.px(s.points[i].first), f.py(sc, s.points[i].second));
    if (s.line)
      o += fmt::format("<polyline points=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"2\"{}/>\n", pts,
                       escape(s.color), s.dashed ? " stroke-dasharray=\"5,3\"" : "");
    for (size_t i = 0; i < s.bars.size() && i < s.points.size(); ++i)
      if (s.bars[i].second > s.bars[i].first)
        o += fmt::format("<line x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{0:.1f}\" y2=\"{2:.1f}\" stroke=\"{3}\"/>\n",
                         f.px(s.points[i].first), f.py(sc, s.bars[i].first), f.py(sc, s.bars[i].second), escape(s.color));
    if (!s.dots) continue;
    const std::string paint = s.hollow ? "fill=\"white\" stroke=\"" + escape(s.color) + "\"" : "fill=\"" + escape(s.color) + "\"";
    for (size_t i = 0; i < s.points.size(); ++i) {
      o += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"{:g}\" {}>", f.px(s.points[i].first),
                       f.py(sc, s.points[i].second), s.dot_radius, paint);
      o += i < s.titles.size() ? "<title>" + escape(s.titles[i]) + "</title></circle>\n" : "</circle>\n";
    }
  }
  double lx = f.L;
  for (const auto& s : p.series) {
    if (s.name.empty()) continue;
    o += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" font-size=\"{}\" fill=\"{}\">{} {}</text>\n", lx, f.H - 6, kFont,
                     escape(s.color), s.dashed ? "- -" : "—", escape(s.name));
    lx += (double(text_width(s.name)) + 6) * kCharWidth;
  }
  return o;
}

}  // namespace

std::string render(const Plot& p) {
  Frame f = frame_for(p);
  std::string o = fmt::format("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} "
                              "{1}\" role=\"img\" aria-label=\"{2}\">\n",
                              f.W, f.H, escape(p.aria_label));
  o += fmt::format("<rect x=\"{:.1f}\" y=\"{}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"none\" stroke=\"#bbb\"/>\n",
                   f.L, kTop, f.pw, f.ph);
  o += y_axes(p, f) + x_axis(p, f) + markers(p, f) + series(p, f);
  return o + "</svg>\n";
}

}  // namespace kb::report::svg
