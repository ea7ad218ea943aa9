// The decisions of stats/stats.h: verdicts from confidence intervals, paired and unpaired decisions,
// and sequential looks.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <stdexcept>

#include "stats/stats.h"

namespace kb::stats {

// ---- decisions ----------------------------------------------------------------------------------

std::string to_string(Verdict v) {
  switch (v) {
    case Verdict::worse: return "worse";
    case Verdict::better: return "better";
    case Verdict::same: return "same";
    case Verdict::unsure: return "unsure";
  }
  return "unsure";
}

Verdict parse_verdict(const std::string& s) {
  for (auto v : {Verdict::worse, Verdict::better, Verdict::same, Verdict::unsure})
    if (to_string(v) == s) return v;
  throw std::invalid_argument("unknown verdict '" + s + "' (worse, better, same, unsure)");
}

int DecisionConfig::looks() const {
  if (min_n < 2 || max_n < min_n) throw std::invalid_argument("DecisionConfig: need 2 <= min_n <= max_n");
  int k = 0;
  int64_t n = min_n;
  for (; n < max_n; n *= 2) ++k;
  return k + 1;  // the looks below max_n, plus max_n itself
}

Verdict classify(const Interval& ci, double threshold, std::optional<double> estimate) {
  const double b = std::log1p(threshold);
  if (ci.lo > -b && ci.hi < b) return Verdict::same;
  if (ci.lo > 0 && (!estimate || *estimate >= b / 2)) return Verdict::worse;
  if (ci.hi < 0 && (!estimate || *estimate <= -b / 2)) return Verdict::better;
  return Verdict::unsure;
}

double Decision::effect_pct() const { return std::expm1(effect); }
double Decision::ci_lo_pct() const { return std::expm1(ci.lo); }
double Decision::ci_hi_pct() const { return std::expm1(ci.hi); }

Decision decide_paired(const std::vector<double>& base, const std::vector<double>& next, const DecisionConfig& cfg,
                       int look, bool last) {
  return decide_log_ratios(log_ratios(base, next), cfg, look, last);
}

Decision decide_log_ratios(const std::vector<double>& d, const DecisionConfig& cfg, int look, bool last) {
  Decision r;
  r.method = "paired-signed-rank-HL";
  r.n_base = r.n_new = int64_t(d.size());
  r.look = look;
  r.final_look = last;
  if (d.size() < 2) return r;  // unsure
  auto hl = hodges_lehmann_one_sample(d, 1 - cfg.alpha_per_look());
  r.effect = hl.estimate;
  r.ci = hl.ci;
  r.conf = hl.conf;
  r.p_value = wilcoxon_signed_rank(d).p_two_sided;
  r.verdict = classify(r.ci, cfg.threshold, r.effect);
  return r;
}

Decision decide_unpaired(const std::vector<double>& base, const std::vector<double>& next, const DecisionConfig& cfg) {
  Decision r;
  r.method = "mann-whitney-HL";
  r.n_base = int64_t(base.size());
  r.n_new = int64_t(next.size());
  r.look = 1;
  r.final_look = true;
  if (base.empty() || next.empty()) return r;
  std::vector<double> lx, ly;
  for (double v : base) {
    if (!(v > 0)) throw std::invalid_argument("decide_unpaired: values must be positive");
    lx.push_back(std::log(v));
  }
  for (double v : next) {
    if (!(v > 0)) throw std::invalid_argument("decide_unpaired: values must be positive");
    ly.push_back(std::log(v));
  }
  auto hl = hodges_lehmann_shift(lx, ly, 1 - cfg.alpha);
  r.effect = hl.estimate;
  r.ci = hl.ci;
  r.conf = hl.conf;
  r.p_value = mann_whitney(lx, ly).p_two_sided;
  r.verdict = classify(r.ci, cfg.threshold, r.effect);
  return r;
}

SequentialPaired::SequentialPaired(DecisionConfig cfg) : cfg_(cfg) { (void)cfg_.looks(); }

bool SequentialPaired::is_look(int64_t n) const {
  if (n == cfg_.max_n) return true;
  for (int64_t m = cfg_.min_n; m < cfg_.max_n; m *= 2)
    if (m == n) return true;
  return false;
}

Decision SequentialPaired::look(const std::vector<double>& base, const std::vector<double>& next, bool last) {
  ++looks_taken_;
  return decide_paired(base, next, cfg_, looks_taken_, last);
}

Decision SequentialPaired::look_log_ratios(const std::vector<double>& d, bool last) {
  ++looks_taken_;
  return decide_log_ratios(d, cfg_, looks_taken_, last);
}

Decision decide_sequential(const std::vector<double>& base, const std::vector<double>& next, const DecisionConfig& cfg) {
  const int64_t avail = int64_t(std::min(base.size(), next.size()));
  SequentialPaired seq(cfg);
  Decision d;
  d.method = "paired-signed-rank-HL";
  for (int64_t n = cfg.min_n;; n = std::min<int64_t>(n * 2, cfg.max_n)) {
    const bool budget_end = n > avail;
    const int64_t m = budget_end ? avail : n;
    const bool last = budget_end || n == cfg.max_n;
    if (m >= 2) {
      std::vector<double> b(base.begin(), base.begin() + m), x(next.begin(), next.begin() + m);
      d = seq.look(b, x, last);
      if (d.verdict != Verdict::unsure || last) return d;
    } else if (last) {
      d.n_base = d.n_new = m;
      d.final_look = true;
      return d;
    }
  }
}

}  // namespace kb::stats
