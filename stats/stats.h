// Statistics as pure functions (docs/design.md, rule 5): no I/O, no global state, deterministic for a seed.
//
// Conventions
// - Effects are log-ratios of times (or metric values): effect = log(new / base), so a 0.5% slowdown is
//   log(1.005) ~= +0.005 and "worse" means a positive effect (more time). Callers that track a metric
//   where larger is better pass the reciprocal (or negate the log-ratio).
// - Quantiles use Hyndman & Fan (1996) definition 7 (linear interpolation between order statistics at
//   h = (n-1)p; the default of R and NumPy).
// - Outliers are KEPT. Every test and estimate here is rank-based (Mann-Whitney U, Wilcoxon signed-rank)
//   or median-based (Hodges-Lehmann, median, MAD), so a few extreme samples move a result by at most
//   their rank, never by their magnitude; nothing is trimmed or silently dropped. The only values
//   removed are exact zero differences in the signed-rank test (Wilcoxon's convention; they carry no
//   sign), and they are counted in the result (`zeros`).
#pragma once
#include "core/rng.h"
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace kb::stats {

struct Interval {
  double lo = 0, hi = 0;
  bool contains(double x) const { return lo <= x && x <= hi; }
  double width() const { return hi - lo; }
};

// ---- descriptive --------------------------------------------------------------------------------
double mean(const std::vector<double>& x);                 // throws std::invalid_argument if empty
double stddev(const std::vector<double>& x);               // sample standard deviation (n - 1); 0 for n < 2
double median(std::vector<double> x);                      // Hyndman-Fan type 7 at p = 0.5
double quantile(std::vector<double> x, double p);          // Hyndman-Fan type 7, p in [0, 1]
std::vector<double> quantiles(std::vector<double> x, const std::vector<double>& ps);
// Median absolute deviation from the median, unscaled. Multiply by kMadToSigma for a normal sigma.
double mad(const std::vector<double>& x);
constexpr double kMadToSigma = 1.482602218505602;          // 1 / Phi^-1(3/4)
// Standard error of the median of n normal samples is about kMedianSe * sigma / sqrt(n) (sqrt(pi/2)).
constexpr double kMedianSe = 1.2533141373155003;
std::vector<double> log_ratios(const std::vector<double>& base, const std::vector<double>& next);  // log(next_i/base_i)

// ---- distributions (Boost.Math) -----------------------------------------------------------------
double normal_quantile(double p);         // standard normal inverse CDF
double normal_cdf(double z);              // P(Z <= z)
double normal_sf(double z);               // P(Z > z), accurate far into the upper tail
double t_quantile(double p, double dof);  // Student t inverse CDF

// ---- seeded random numbers: kb::Rng (core/rng.h), the one generator of the project.
using kb::Rng;

// ---- bootstrap ----------------------------------------------------------------------------------
using Statistic = std::function<double(const std::vector<double>&)>;
// Percentile bootstrap CI of stat(x) at confidence `conf`, `resamples` resamples, seeded: the same
// inputs and seed give the same interval.
Interval bootstrap_ci(const std::vector<double>& x, const Statistic& stat, double conf, int resamples,
                      uint64_t seed);

// ---- Mann-Whitney U (two independent samples) ---------------------------------------------------
struct MannWhitney {
  double u = 0;        // U of the FIRST sample: #{x_i > y_j} + 0.5 #{x_i == y_j} (R's W statistic)
  double z = 0;        // normal score (0 when exact)
  double p_two_sided = 1;
  double p_less = 1;     // H1: x tends to be smaller than y
  double p_greater = 1;  // H1: x tends to be larger than y
  bool exact = false;  // exact null distribution (no ties and both n < 50), else normal approximation
                       // with continuity correction and tie-corrected variance
  int64_t n1 = 0, n2 = 0;
  int64_t tie_groups = 0;
};
MannWhitney mann_whitney(const std::vector<double>& x, const std::vector<double>& y);

// Exact null distribution of U for sample sizes n1, n2 without ties: P(U <= u) (u integer).
double mann_whitney_cdf(int64_t n1, int64_t n2, int64_t u);

// ---- Hodges-Lehmann ---------------------------------------------------------------------------
struct ShiftEstimate {
  double estimate = 0;  // point estimate
  Interval ci;          // distribution-free CI at the requested confidence
  double conf = 0;      // achieved nominal confidence of the CI (>= requested for exact CIs)
  int64_t n = 0;        // pairs/differences the estimate is built from
  bool exact = false;   // critical value from the exact distribution
};
// Two-sample shift of y relative to x: median of all y_j - x_i; CI by Moses' method (order statistics
// of the differences at the Mann-Whitney critical value). Needs both samples non-empty.
ShiftEstimate hodges_lehmann_shift(const std::vector<double>& x, const std::vector<double>& y, double conf);

// ---- Wilcoxon signed-rank (one sample / paired differences) ------------------------------------
struct SignedRank {
  double w_plus = 0;   // sum of ranks of positive differences (average ranks for ties in |d|)
  double z = 0;
  double p_two_sided = 1;
  bool exact = false;  // exact (no ties, no zeros, n < 50) or normal with continuity + tie correction
  int64_t n = 0;       // non-zero differences used
  int64_t zeros = 0;   // exact zeros (dropped by Wilcoxon's convention, counted here)
};
SignedRank wilcoxon_signed_rank(const std::vector<double>& d);
double signed_rank_cdf(int64_t n, int64_t t);  // exact P(T+ <= t), n non-zero untied differences

// One-sample Hodges-Lehmann: median of the Walsh averages (d_i + d_j)/2, i <= j, with the
// distribution-free CI from the signed-rank critical value (assumes d symmetric about its center).
ShiftEstimate hodges_lehmann_one_sample(const std::vector<double>& d, double conf);

// ---- decisions ----------------------------------------------------------------------------------
enum class Verdict { worse, better, same, unsure };
std::string to_string(Verdict v);
Verdict parse_verdict(const std::string& s);  // throws std::invalid_argument

struct DecisionConfig {
  double threshold = 0.005;  // relative: 0.005 = 0.5%
  double alpha = 0.05;       // total error rate of a wrong "different" call on identical code,
                             // spread over all planned looks (Bonferroni)
  int min_n = 16;            // first look at this many samples (pairs for paired data)
  int max_n = 2048;          // last planned look; looks are min_n * 2^k up to max_n
  int looks() const;         // number of planned looks (>= 1)
  double alpha_per_look() const { return alpha / looks(); }
};

// The rule, applied to a CI of the effect d = log(new/base) at confidence 1 - alpha_per_look, with
// band b = log(1 + threshold):
//   worse  : CI entirely above 0 (significantly slower) and not inside (-b, +b)
//   better : CI entirely below 0 and not inside (-b, +b)
//   same   : CI inside the equivalence band (-b, +b)
//   unsure : otherwise (the caller takes more samples, doubling, up to its budget)
// "Not inside the band" keeps a statistically significant but tiny change from failing a gate: once
// the CI shows it is smaller than the threshold it is "same". With this rule identical code is called
// worse/better with probability <= alpha over all looks (each look errs with <= alpha/looks), and a
// change of exactly the threshold is called worse with probability -> 1 - alpha/looks once the CI
// half-width drops well below the threshold.
// With the point `estimate` given, worse/better also need |estimate| >= b/2: an early, wide CI that is
// above 0 and reaches past the band for a small real change (+2% against a 50% threshold after 8 noisy
// samples) is "unsure" (take more samples) instead of "worse". Identical code is unaffected (it still
// needs the CI to exclude 0); a change of the threshold has its estimate near b.
Verdict classify(const Interval& ci, double threshold, std::optional<double> estimate = std::nullopt);

struct Decision {
  Verdict verdict = Verdict::unsure;
  double effect = 0;      // log-ratio estimate (Hodges-Lehmann)
  Interval ci;            // log-ratio CI at `conf`
  double conf = 0;
  int64_t n_base = 0, n_new = 0;  // samples used (equal for paired)
  int look = 0;           // 1-based look index
  bool final_look = false;
  double p_value = 1;     // two-sided (signed-rank or Mann-Whitney), for reporting only
  std::string method;     // "paired-signed-rank-HL" / "mann-whitney-HL"
  // Percentages for humans: exp(x) - 1.
  double effect_pct() const;
  double ci_lo_pct() const;
  double ci_hi_pct() const;
};

// Paired (interleaved) samples: round i of base and new form a pair; uses d_i = log(new_i/base_i),
// one-sample HL + signed-rank CI at confidence 1 - cfg.alpha_per_look(). Uses min(|base|,|new|) pairs.
// `last` marks the final look (budget exhausted): the verdict is still computed with the same CI, and
// an undecided final look stays "unsure" (reported honestly).
Decision decide_paired(const std::vector<double>& base, const std::vector<double>& next, const DecisionConfig& cfg,
                       int look = 1, bool last = true);
// The same rule on log-ratios that are already computed (e.g. one summary per block of pairs).
Decision decide_log_ratios(const std::vector<double>& d, const DecisionConfig& cfg, int look = 1, bool last = true);

// Unpaired samples (separate runs): two-sample HL shift of log times with Moses' CI, one look at the
// full alpha (cfg.alpha, not split) — used by `compare` on two result files.
Decision decide_unpaired(const std::vector<double>& base, const std::vector<double>& next, const DecisionConfig& cfg);

// Sequential driver for paired data: looks at n = min_n * 2^k pairs (and at the end of the data), each
// at confidence 1 - alpha/looks, returns at the first decided look. `available` pairs may be fewer than
// max_n (budget ran out): the last look then uses what there is and an undecided result is "unsure".
class SequentialPaired {
 public:
  explicit SequentialPaired(DecisionConfig cfg);
  // Is n pairs a planned look?
  bool is_look(int64_t n) const;
  // Evaluates at n pairs (call when is_look(n) or at the end of the budget with last = true).
  Decision look(const std::vector<double>& base, const std::vector<double>& next, bool last);
  // The same on log-ratios already computed (n = d.size()).
  Decision look_log_ratios(const std::vector<double>& d, bool last);
  const DecisionConfig& config() const { return cfg_; }
  int looks_taken() const { return looks_taken_; }

 private:
  DecisionConfig cfg_;
  int looks_taken_ = 0;
};

// Runs the sequential paired rule over complete sample vectors as if they arrived in order (for
// simulations and re-analysis): returns the decision at the first decided look, or the last look.
Decision decide_sequential(const std::vector<double>& base, const std::vector<double>& next, const DecisionConfig& cfg);

// Geometric mean of per-case ratios, with an approximate CI from the per-case CIs (independent cases,
// normal approximation: se_i = CI width / (2 z_i) at each case's confidence); effects are log-ratios.
// The CI is at `conf`; the geomean of one case is that case exactly (its effect, CI and confidence).
struct GeoMean {
  double effect = 0;
  Interval ci;
  int64_t cases = 0;
  double conf = 0;  // the confidence of ci
};
GeoMean geometric_mean(const std::vector<Decision>& decisions, double conf);

}  // namespace kb::stats
