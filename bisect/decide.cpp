#include "bisect/decide.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "core/error.h"

namespace kb::bisect {

int64_t common_units(const Rounds& r) {
  int64_t n = int64_t(r.empty() ? 0 : r[0].size());
  for (const auto& v : r) n = std::min<int64_t>(n, int64_t(v.size()));
  return n;
}

SequentialRule::SequentialRule(stats::DecisionConfig cfg, PairFn pair) : seq_(cfg), pair_(std::move(pair)) {}

bool SequentialRule::operator()(const Rounds& r) {
  if (decided_) return true;
  const int64_t n = common_units(r);
  if (n == looked_at_ || !seq_.is_look(n)) return false;
  looked_at_ = n;
  auto [base, next] = pair_(r);
  last_ = seq_.look(base, next, n >= seq_.config().max_n);
  decided_ = last_.verdict != stats::Verdict::unsure;
  return decided_;
}

stats::Decision SequentialRule::finish(const Rounds& r) {
  const int64_t n = common_units(r);
  if (!decided_ && n != looked_at_ && n >= 2) {
    // The budget ended between planned looks: one last look at what there is (it replaces the next
    // planned look, so the number of looks stays within the Bonferroni plan).
    auto [base, next] = pair_(r);
    last_ = seq_.look(base, next, true);
    looked_at_ = n;
    decided_ = last_.verdict != stats::Verdict::unsure;
  } else if (!decided_) {
    last_.final_look = true;
  }
  return last_;
}

SequentialRule side_rule(double alpha, int min_n, int max_n) {
  stats::DecisionConfig c;
  // Only the sign of d matters here (which level is nearer), so the equivalence band is vanishingly small.
  c.threshold = 1e-9;
  c.alpha = alpha;
  c.min_n = min_n;
  c.max_n = std::max(min_n, max_n);
  return SequentialRule(c, [](const Rounds& r) {
    const size_t n = std::min({r[0].size(), r[1].size(), r[2].size()});
    std::vector<double> mid(n), t(r[2].begin(), r[2].begin() + long(n));
    for (size_t i = 0; i < n; ++i) mid[i] = std::sqrt(r[0][i] * r[1][i]);
    return std::make_pair(mid, t);
  });
}

SequentialRule threshold_rule(double threshold, double alpha, int min_n, int max_n) {
  stats::DecisionConfig c;
  c.threshold = threshold;
  c.alpha = alpha;
  c.min_n = min_n;
  c.max_n = std::max(min_n, max_n);
  return SequentialRule(c, [](const Rounds& r) {
    const size_t n = std::min(r[0].size(), r[1].size());
    return std::make_pair(std::vector<double>(r[0].begin(), r[0].begin() + long(n)),
                          std::vector<double>(r[1].begin(), r[1].begin() + long(n)));
  });
}

std::string to_string(Level l) {
  switch (l) {
    case Level::a: return "first";
    case Level::b: return "last";
    case Level::between: return "intermediate";
    case Level::beyond_a: return "beyond-first";
    case Level::beyond_b: return "beyond-last";
  }
  return "?";
}

StepRule::StepRule(double threshold, double alpha, int min_n, int max_n, int commits, bool b_worse, bool levels,
                   bool extend)
    : b_worse_(b_worse),
      levels_(levels),
      extend_between_(levels),
      extend_beyond_(extend && levels),
      band_(std::log1p(threshold)) {
  side_cfg_.threshold = 1e-9;  // only the sign of d matters for the side
  side_cfg_.alpha = alpha;
  side_cfg_.min_n = min_n;
  side_cfg_.max_n = std::max(min_n, max_n);
  lvl_cfg_ = side_cfg_;
  lvl_cfg_.threshold = threshold;
  // A false "apart from a level" costs a whole extra search (a range with no step in it), a false side
  // only a wrong turn that the verify step catches: the apartness tests run at a tenth of the error rate.
  lvl_cfg_.alpha = alpha / 10;
  for (int j = 0; j < commits; ++j) {
    side_.emplace_back(side_cfg_);
    va_.emplace_back(lvl_cfg_);
    vb_.emplace_back(lvl_cfg_);
  }
  out_.assign(size_t(commits), StepDecision{});
  done_.assign(size_t(commits), false);
}

void StepRule::look(const Rounds& r, int64_t n, bool last) {
  looked_at_ = n;
  const size_t m = size_t(n);
  std::vector<double> A(r[0].begin(), r[0].begin() + long(m)), B(r[1].begin(), r[1].begin() + long(m)), mid(m);
  for (size_t i = 0; i < m; ++i) mid[i] = std::sqrt(A[i] * B[i]);
  using stats::Verdict;
  for (size_t j = 0; j < done_.size(); ++j) {
    if (done_[j]) continue;
    std::vector<double> t(r[2 + j].begin(), r[2 + j].begin() + long(m));
    StepDecision& d = out_[j];
    d.side = side_[j].look(mid, t, last);
    if (levels_) {
      d.vs_a = va_[j].look(A, t, last);
      d.vs_b = vb_[j].look(B, t, last);
    }
    // "toward B" from A is slower when B is the worse level.
    const Verdict toward_b = b_worse_ ? Verdict::worse : Verdict::better;
    const Verdict toward_a = b_worse_ ? Verdict::better : Verdict::worse;
    std::optional<Level> lv;
    if (levels_ && d.vs_a.verdict == toward_b && d.vs_b.verdict == toward_a) lv = Level::between;
    else if (levels_ && d.vs_b.verdict == toward_b) lv = Level::beyond_b;
    else if (levels_ && d.vs_a.verdict == toward_a) lv = Level::beyond_a;
    else if (d.side.verdict == toward_b) lv = Level::b;
    else if (d.side.verdict == toward_a) lv = Level::a;
    if (lv && (extend_between_ || extend_beyond_) && !last && (*lv == Level::a || *lv == Level::b)) {
      // The side is decided, but the commit may lie apart from its side's level (that test still open,
      // its estimate beyond the threshold): toward the other level (intermediate), or away from it (a step
      // back inside the range). More rounds settle it.
      const Verdict near = *lv == Level::b ? d.vs_b.verdict : d.vs_a.verdict;
      // Effect measured from the near level toward the far one.
      const double toward_far = *lv == Level::b ? (b_worse_ ? -d.vs_b.effect : d.vs_b.effect)
                                                : (b_worse_ ? d.vs_a.effect : -d.vs_a.effect);
      if (near == Verdict::unsure &&
          ((extend_between_ && toward_far > band_) || (extend_beyond_ && -toward_far > band_)))
        lv.reset();
    }
    if (lv) {
      d.level = lv;
      done_[j] = true;
    }
  }
}

bool StepRule::operator()(const Rounds& r) {
  const int64_t n = common_units(r);
  if (std::all_of(done_.begin(), done_.end(), [](bool b) { return b; })) return true;
  if (n == looked_at_ || !stats::SequentialPaired(side_cfg_).is_look(n)) return false;
  look(r, n, n >= side_cfg_.max_n);
  return std::all_of(done_.begin(), done_.end(), [](bool b) { return b; });
}

std::vector<StepDecision> StepRule::finish(const Rounds& r) {
  const int64_t n = common_units(r);
  const bool all = std::all_of(done_.begin(), done_.end(), [](bool b) { return b; });
  if (!all && n != looked_at_ && n >= 2) look(r, n, true);  // budget ended between planned looks
  for (auto& d : out_)
    if (!d.level) d.side.final_look = true;
  return out_;
}

std::optional<Side> side_of(const stats::Decision& d) {
  if (d.verdict == stats::Verdict::worse) return Side::bad;
  if (d.verdict == stats::Verdict::better) return Side::good;
  return std::nullopt;
}

bool moved_beyond(double from, double to, double threshold, bool absolute) {
  const double delta = std::abs(to - from);
  if (absolute) return delta >= threshold;
  if (from == 0) return delta > 0;
  return delta >= threshold * std::abs(from);
}

std::vector<bool> static_regressed(const std::vector<double>& good, const std::vector<double>& bad, double threshold,
                                   bool absolute) {
  std::vector<bool> out(good.size(), false);
  for (size_t i = 0; i < good.size() && i < bad.size(); ++i) out[i] = moved_beyond(good[i], bad[i], threshold, absolute);
  return out;
}

Side static_side(const std::vector<double>& good, const std::vector<double>& bad, const std::vector<double>& commit,
                 const std::vector<bool>& regressed, double threshold, bool absolute) {
  for (size_t i = 0; i < good.size() && i < commit.size(); ++i) {
    if (!regressed[i]) continue;
    const double dir = bad[i] > good[i] ? 1 : -1;
    if ((commit[i] - good[i]) * dir > 0 && moved_beyond(good[i], commit[i], threshold, absolute)) return Side::bad;
  }
  return Side::good;
}

double static_metric_value(Metric m, const std::string& backend, const std::map<std::string, double>& metrics,
                           int64_t code_bytes, double max_error, const std::string& column) {
  auto get = [&](std::initializer_list<const char*> names) -> double {
    double sum = 0;
    bool any = false;
    for (const char* n : names)
      if (auto it = metrics.find(n); it != metrics.end()) {
        sum += it->second;
        any = true;
      }
    if (!any) {
      std::string have;
      for (const auto& [k, v] : metrics) have += (have.empty() ? "" : ", ") + k;
      throw InputError(fmt::format("metric '{}' is not reported by the {} backend (it reports: {})",
                                   metric_label(m, column), backend, have.empty() ? "code_bytes only" : have));
    }
    return sum;
  };
  switch (m) {
    case Metric::code_bytes: return double(code_bytes);
    case Metric::max_error: return max_error;
    case Metric::registers: return backend == "hip" ? get({"vgprs", "agprs"}) : get({"registers"});
    case Metric::spills:
      return backend == "hip" ? get({"vgpr_spills", "sgpr_spills"}) : get({"spill_stores", "spill_loads"});
    case Metric::stack: return backend == "hip" ? get({"scratch_bytes"}) : get({"stack_bytes"});
    case Metric::smem: return backend == "hip" ? get({"lds_bytes"}) : get({"smem_bytes"});
    case Metric::column: return get({column.c_str()});
    default: throw InputError(fmt::format("metric '{}' is timed, not static", to_string(m)));
  }
}

}  // namespace kb::bisect
