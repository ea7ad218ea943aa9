#include "harness/compare.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include <fmt/format.h>

#include "core/error.h"
#include "core/fsutil.h"

namespace kb {

using json = nlohmann::json;
using stats::Verdict;

namespace {

double unit_to_seconds(const std::string& unit, const std::string& origin, const std::string& name) {
  if (unit == "ns") return 1e-9;
  if (unit == "us") return 1e-6;
  if (unit == "ms") return 1e-3;
  if (unit == "s") return 1;
  throw InputError(fmt::format("{}: benchmark '{}': unknown time_unit '{}' (ns, us, ms, s)", origin, name, unit));
}

std::string pct(double x) {
  if (!std::isfinite(x)) return x > 0 ? "+inf" : "-inf";
  return fmt::format("{:+.2f}%", 100 * x);
}

std::string ci_text(const stats::Decision& d) {
  return fmt::format("[{}, {}]", pct(d.ci_lo_pct()), pct(d.ci_hi_pct()));
}

std::string p_text(double p) { return p < 1e-4 ? fmt::format("{:.1e}", p) : fmt::format("{:.4f}", p); }

}  // namespace

std::string format_seconds(double s) {
  if (!(s > 0)) return "-";
  if (s >= 1) return fmt::format("{:.3f} s", s);
  if (s >= 1e-3) return fmt::format("{:.3f} ms", s * 1e3);
  if (s >= 1e-6) return fmt::format("{:.3f} us", s * 1e6);
  return fmt::format("{:.1f} ns", s * 1e9);
}

// ---- loading ------------------------------------------------------------------------------------

SampleSet sample_set_from_results(const RunResults& r, const std::string& origin) {
  SampleSet s;
  s.origin = origin;
  s.format = "kbisect";
  for (const auto& c : r.cases) {
    SampleEntry e;
    e.key = c.key();
    e.toolchain = c.toolchain;
    e.samples_s = c.samples_s;
    if (c.status != CaseStatus::ok) {
      e.ok = false;
      e.reason = to_string(c.status) + (c.reason.empty() ? "" : ": " + c.reason);
    } else if (c.samples_s.empty()) {
      e.ok = false;
      e.reason = "no samples";
    }
    s.entries.push_back(std::move(e));
  }
  return s;
}

SampleSet sample_set_from_google_benchmark(const json& j, const std::string& origin, const std::string& time_field) {
  if (time_field != "real_time" && time_field != "cpu_time")
    throw InputError(fmt::format("time field '{}' must be real_time or cpu_time", time_field));
  SampleSet s;
  s.origin = origin;
  s.format = "google-benchmark";
  if (!j.contains("benchmarks") || !j["benchmarks"].is_array())
    throw InputError(fmt::format("{}: field 'benchmarks' missing or not an array", origin));
  std::map<std::string, size_t> index;
  size_t i = 0;
  for (const auto& b : j["benchmarks"]) {
    const std::string where = fmt::format("{}: benchmarks[{}]", origin, i++);
    if (!b.is_object()) throw InputError(where + ": not an object");
    std::string run_type = b.value("run_type", "iteration");
    if (run_type == "aggregate") continue;  // mean/median/stddev rows: recomputed from repetitions
    if (run_type != "iteration") throw InputError(fmt::format("{}: unknown run_type '{}'", where, run_type));
    std::string name;
    if (b.contains("run_name") && b["run_name"].is_string()) name = b["run_name"].get<std::string>();
    else if (b.contains("name") && b["name"].is_string()) name = b["name"].get<std::string>();
    else throw InputError(where + ": field 'name' missing");
    auto it = index.find(name);
    if (it == index.end()) {
      it = index.emplace(name, s.entries.size()).first;
      SampleEntry e;
      e.key = name;
      s.entries.push_back(e);
    }
    SampleEntry& e = s.entries[it->second];
    if (b.value("error_occurred", false)) {
      e.ok = false;
      e.reason = "error: " + b.value("error_message", std::string("(no message)"));
      continue;
    }
    if (!b.contains(time_field) || !b[time_field].is_number())
      throw InputError(fmt::format("{} ('{}'): field '{}' missing or not a number", where, name, time_field));
    const std::string unit = b.value("time_unit", std::string("ns"));
    const double t = b[time_field].get<double>() * unit_to_seconds(unit, origin, name);
    if (!(t > 0)) throw InputError(fmt::format("{} ('{}'): {} = {} is not positive", where, name, time_field, t));
    e.samples_s.push_back(t);
  }
  for (auto& e : s.entries)
    if (e.ok && e.samples_s.empty()) {
      e.ok = false;
      e.reason = "no iteration entries";
    }
  return s;
}

SampleSet load_sample_set(const std::string& path, const std::string& time_field) {
  const std::string text = read_file(path);
  json j;
  try {
    j = json::parse(text);
  } catch (const json::parse_error& e) {
    throw InputError(fmt::format("{}: not valid JSON: {}", path, e.what()));
  }
  if (!j.is_object()) throw InputError(fmt::format("{}: expected a JSON object", path));
  if (j.contains("benchmarks")) return sample_set_from_google_benchmark(j, path, time_field);
  if (j.contains("cases")) return sample_set_from_results(results_from_json(j, path), path);
  throw InputError(fmt::format("{}: neither a kbisect result (field 'cases') nor Google Benchmark JSON (field 'benchmarks')",
                               path));
}

// ---- comparing ----------------------------------------------------------------------------------

int Comparison::count(Verdict v) const {
  int n = 0;
  for (const auto& c : cases) n += c.compared && c.decision.verdict == v;
  return n;
}

bool Comparison::fails() const { return options.fail_on_slower && count(Verdict::worse) > 0; }

namespace {

// True when some key appears with more than one toolchain in the set.
bool several_toolchains_per_key(const SampleSet& s) {
  std::map<std::string, std::set<std::string>> m;
  for (const auto& e : s.entries) m[e.key].insert(e.toolchain);
  for (const auto& [k, t] : m)
    if (t.size() > 1) return true;
  return false;
}

}  // namespace

Comparison compare_sets(const SampleSet& base, const SampleSet& next, const CompareOptions& opts) {
  if (!(opts.threshold > 0 && opts.threshold < 1))
    throw InputError(fmt::format("threshold {} must be in (0, 1) (e.g. 0.5%)", opts.threshold));
  if (!(opts.alpha > 0 && opts.alpha < 0.5)) throw InputError(fmt::format("alpha {} must be in (0, 0.5)", opts.alpha));
  Comparison c;
  c.base_origin = base.origin;
  c.new_origin = next.origin;
  c.options = opts;
  c.method = "unpaired: Mann-Whitney U; Hodges-Lehmann shift of log times with Moses CI";
  const bool by_toolchain = several_toolchains_per_key(base) || several_toolchains_per_key(next);
  if (by_toolchain)
    c.notes.push_back(fmt::format("{} has several toolchains per case: matched on case key + toolchain",
                                  several_toolchains_per_key(base) ? base.origin : next.origin));
  auto match_key = [&](const SampleEntry& e) { return by_toolchain ? e.key + "/" + e.toolchain : e.key; };

  std::map<std::string, const SampleEntry*> nmap;
  for (const auto& e : next.entries) {
    auto [it, fresh] = nmap.emplace(match_key(e), &e);
    if (!fresh) throw InputError(fmt::format("{}: case '{}' appears twice", next.origin, match_key(e)));
  }
  std::set<std::string> used;
  stats::DecisionConfig cfg;
  cfg.threshold = opts.threshold;
  cfg.alpha = opts.alpha;
  std::set<std::string> seen_base;
  for (const auto& b : base.entries) {
    CaseComparison cc;
    cc.key = match_key(b);
    if (!seen_base.insert(cc.key).second)
      throw InputError(fmt::format("{}: case '{}' appears twice", base.origin, cc.key));
    cc.base_toolchain = b.toolchain;
    auto it = nmap.find(cc.key);
    if (it == nmap.end()) {
      cc.reason = "only in base";
      c.cases.push_back(cc);
      continue;
    }
    const SampleEntry& n = *it->second;
    used.insert(cc.key);
    cc.new_toolchain = n.toolchain;
    if (!b.ok || !n.ok) {
      std::string why;
      if (!b.ok) why += "base " + b.reason;
      if (!n.ok) why += std::string(why.empty() ? "" : "; ") + "new " + n.reason;
      cc.reason = why;
      c.cases.push_back(cc);
      continue;
    }
    cc.compared = true;
    cc.base_median_s = stats::median(b.samples_s);
    cc.new_median_s = stats::median(n.samples_s);
    cc.decision = stats::decide_unpaired(b.samples_s, n.samples_s, cfg);
    c.cases.push_back(cc);
  }
  for (const auto& e : next.entries)
    if (!used.count(match_key(e))) {
      CaseComparison cc;
      cc.key = match_key(e);
      cc.new_toolchain = e.toolchain;
      cc.reason = "only in new";
      c.cases.push_back(cc);
    }
  finish_comparison(c);
  return c;
}

void finish_comparison(Comparison& c) {
  std::vector<stats::Decision> ds;
  for (const auto& cc : c.cases)
    if (cc.compared) ds.push_back(cc.decision);
  c.has_geomean = !ds.empty();
  if (!c.has_geomean) return;
  c.geomean = stats::geometric_mean(ds, 1 - c.options.alpha);
  // One case: its own verdict (it may come from a sequential rule that classify() does not repeat).
  c.geomean_verdict = ds.size() == 1 ? ds[0].verdict : stats::classify(c.geomean.ci, c.options.threshold, c.geomean.effect);
}

// ---- printers -------------------------------------------------------------------------------------

json decision_to_json(const stats::Decision& d) {
  auto num = [](double x) -> json { return std::isfinite(x) ? json(x) : json(nullptr); };
  return json{{"verdict", stats::to_string(d.verdict)},
              {"effect_log", d.effect},
              {"effect_pct", 100 * d.effect_pct()},
              {"ci_log", {num(d.ci.lo), num(d.ci.hi)}},
              {"ci_pct", {num(100 * d.ci_lo_pct()), num(100 * d.ci_hi_pct())}},
              {"confidence", d.conf},
              {"p_value", d.p_value},
              {"n_base", d.n_base},
              {"n_new", d.n_new},
              {"look", d.look},
              {"final_look", d.final_look},
              {"method", d.method}};
}

json comparison_to_json(const Comparison& c) {
  json j;
  j["base"] = c.base_origin;
  j["new"] = c.new_origin;
  j["method"] = c.method;
  j["threshold"] = c.options.threshold;
  j["alpha"] = c.options.alpha;
  j["fail_on"] = c.options.fail_on_slower ? "slower" : "never";
  j["notes"] = c.notes;
  j["cases"] = json::array();
  for (const auto& cc : c.cases) {
    json e{{"key", cc.key}, {"base_toolchain", cc.base_toolchain}, {"new_toolchain", cc.new_toolchain},
           {"compared", cc.compared}};
    if (cc.compared) {
      e["base_median_s"] = cc.base_median_s;
      e["new_median_s"] = cc.new_median_s;
      e["decision"] = decision_to_json(cc.decision);
    } else {
      e["reason"] = cc.reason;
    }
    j["cases"].push_back(e);
  }
  if (c.has_geomean) {
    auto num = [](double x) -> json { return std::isfinite(x) ? json(x) : json(nullptr); };
    j["geomean"] = {{"cases", c.geomean.cases},
                    {"effect_pct", 100 * std::expm1(c.geomean.effect)},
                    {"ci_pct", {num(100 * std::expm1(c.geomean.ci.lo)), num(100 * std::expm1(c.geomean.ci.hi))}},
                    {"verdict", stats::to_string(c.geomean_verdict)}};
  }
  j["counts"] = {{"worse", c.count(Verdict::worse)},
                 {"better", c.count(Verdict::better)},
                 {"same", c.count(Verdict::same)},
                 {"unsure", c.count(Verdict::unsure)},
                 {"not_compared", int(std::count_if(c.cases.begin(), c.cases.end(), [](auto& x) { return !x.compared; }))}};
  j["exit_code"] = c.fails() ? 1 : 0;  // the status `kbisect compare` exits with, for scripts reading the file
  return j;
}

namespace {

struct Row {
  std::string name, base, next, effect, ci, n, p, verdict;
};

std::vector<Row> rows(const Comparison& c) {
  std::vector<Row> out;
  for (const auto& cc : c.cases) {
    if (!cc.compared) continue;
    const auto& d = cc.decision;
    out.push_back({cc.key, format_seconds(cc.base_median_s), format_seconds(cc.new_median_s), pct(d.effect_pct()),
                   ci_text(d), fmt::format("{}/{}", d.n_base, d.n_new), p_text(d.p_value),
                   stats::to_string(d.verdict)});
  }
  if (c.has_geomean)
    out.push_back({fmt::format("geomean ({} cases)", c.geomean.cases), "", "", pct(std::expm1(c.geomean.effect)),
                   fmt::format("[{}, {}]", pct(std::expm1(c.geomean.ci.lo)), pct(std::expm1(c.geomean.ci.hi))), "",
                   "", stats::to_string(c.geomean_verdict)});
  return out;
}

std::string summary_line(const Comparison& c) {
  return fmt::format("{} worse, {} better, {} same, {} unsure, {} not compared (threshold {:.2f}%, alpha {})",
                     c.count(Verdict::worse), c.count(Verdict::better), c.count(Verdict::same),
                     c.count(Verdict::unsure),
                     std::count_if(c.cases.begin(), c.cases.end(), [](auto& x) { return !x.compared; }),
                     100 * c.options.threshold, c.options.alpha);
}

}  // namespace

std::string render_table(const Comparison& c) {
  auto rs = rows(c);
  Row head{"case", "base", "new", "effect", "CI", "n", "p", "verdict"};
  size_t w[8] = {};
  auto widen = [&](const Row& r) {
    const std::string* f[8] = {&r.name, &r.base, &r.next, &r.effect, &r.ci, &r.n, &r.p, &r.verdict};
    for (int i = 0; i < 8; ++i) w[i] = std::max(w[i], f[i]->size());
  };
  widen(head);
  for (const auto& r : rs) widen(r);
  std::string out = fmt::format("base: {}\nnew:  {}\nmethod: {}\n", c.base_origin, c.new_origin, c.method);
  for (const auto& n : c.notes) out += "note: " + n + "\n";
  auto line = [&](const Row& r) {
    return fmt::format("{:<{}}  {:>{}}  {:>{}}  {:>{}}  {:<{}}  {:>{}}  {:>{}}  {}\n", r.name, w[0], r.base, w[1], r.next,
                       w[2], r.effect, w[3], r.ci, w[4], r.n, w[5], r.p, w[6], r.verdict);
  };
  out += line(head);
  for (const auto& r : rs) out += line(r);
  for (const auto& cc : c.cases)
    if (!cc.compared) out += fmt::format("not compared: {}: {}\n", cc.key, cc.reason);
  out += summary_line(c) + "\n";
  return out;
}

std::string render_markdown(const Comparison& c) {
  std::string out = fmt::format("**base:** `{}`  \n**new:** `{}`  \n**method:** {}\n\n", c.base_origin, c.new_origin,
                                c.method);
  for (const auto& n : c.notes) out += "> note: " + n + "\n\n";
  out += "| case | base | new | effect | CI | n (base/new) | p | verdict |\n";
  out += "|---|---:|---:|---:|---|---:|---:|---|\n";
  auto esc = [](std::string s) {
    std::string o;
    for (char ch : s) o += ch == '|' ? std::string("\\|") : std::string(1, ch);
    return o;
  };
  for (const auto& r : rows(c)) {
    const bool bold = r.verdict == "worse";
    out += fmt::format("| `{}` | {} | {} | {} | {} | {} | {} | {} |\n", esc(r.name), r.base, r.next, r.effect, r.ci, r.n,
                       r.p, bold ? "**worse**" : r.verdict);
  }
  bool any = false;
  for (const auto& cc : c.cases)
    if (!cc.compared) {
      if (!any) out += "\nNot compared:\n\n";
      any = true;
      out += fmt::format("- `{}`: {}\n", esc(cc.key), cc.reason);
    }
  out += "\n" + summary_line(c) + "\n";
  return out;
}

}  // namespace kb
