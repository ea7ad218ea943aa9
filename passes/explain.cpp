#include "passes/explain.h"

#include <algorithm>
#include <filesystem>
#include <regex>
#include <sstream>

#include <fmt/format.h>

#include "backends/backend.h"
#include "bisect/config.h"
#include "core/error.h"
#include "core/fsutil.h"
#include "passes/passes.h"
#include "passes/triton_dumps.h"
#include "harness/runner.h"
#include "harness/sweep.h"

namespace kb {

namespace fs = std::filesystem;

std::vector<std::string> lines_of(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  std::string l;
  while (std::getline(in, l)) out.push_back(l);
  return out;
}

namespace {

// LCS table over two sequences with an equality predicate; returns matched index pairs in order.
template <class Eq>
std::vector<std::pair<int, int>> lcs_pairs(int n, int m, Eq eq) {
  std::vector<std::vector<int>> t(size_t(n) + 1, std::vector<int>(size_t(m) + 1, 0));
  for (int i = n - 1; i >= 0; --i)
    for (int j = m - 1; j >= 0; --j)
      t[i][j] = eq(i, j) ? t[i + 1][j + 1] + 1 : std::max(t[i + 1][j], t[i][j + 1]);
  std::vector<std::pair<int, int>> out;
  int i = 0, j = 0;
  while (i < n && j < m) {
    if (eq(i, j)) {
      out.emplace_back(i, j);
      ++i, ++j;
    } else if (t[i + 1][j] >= t[i][j + 1]) {
      ++i;
    } else {
      ++j;
    }
  }
  return out;
}

struct Compiled {
  std::string toolchain;
  Artifact art;
  std::vector<IrDump> dumps;
};

Compiled compile_print_changed(const PlannedCase& pc) {
  Toolchain tc = *pc.toolchain;
  const bool triton = tc.kind == "triton";
  if (!is_clang_kind(tc.kind) && !triton)
    throw InputError(fmt::format("toolchain '{}' is of kind '{}': explain needs clang-based toolchains (kind clang, "
                                 "clang-cuda or clang-hip) for -mllvm -print-changed, or Triton toolchains",
                                 tc.name, tc.kind));
  if (triton) {  // Triton's own per-pass dumps (passes/triton_dumps.h); the LLVM passes' dumps (67 MB for a
    // matmul) only when the toolchain's env asks for them with LLVM_IR_ENABLE_DUMP=1
    tc.env["MLIR_ENABLE_DUMP"] = "1";
  } else {
    tc.flags.push_back("-mllvm");
    tc.flags.push_back("-print-changed=quiet");
  }
  tc.identity.clear();
  resolve_identity(tc);
  const std::string dir = temp_dir("kb-explain");
  CompileRequest req = compile_request(pc);
  req.toolchain = &tc;
  req.out_dir = dir;
  req.log_limit = size_t(1) << 30;
  Compiled c;
  c.toolchain = pc.toolchain->name;
  try {
    c.art = backend_for(tc).compile(req);
  } catch (...) {
    remove_tree(dir);
    throw;
  }
  remove_tree(dir);
  c.dumps = triton ? split_triton_dumps(c.art.log) : split_ir_dumps(c.art.log);
  if (c.dumps.empty())
    throw InputError(fmt::format("toolchain '{}' printed no '*** IR Dump After' sections with {}", tc.name,
                                 triton ? "MLIR_ENABLE_DUMP=1 LLVM_IR_ENABLE_DUMP=1" : "-mllvm -print-changed"));
  return c;
}

std::pair<std::string, std::string> bisect_toolchains(const std::string& dir, const std::string& culprit,
                                                      bisect::BisectConfig& cfg) {
  const std::string rj = dir + "/result.json";
  if (!file_exists(rj)) throw InputError(fmt::format("bisection {}: no result.json (not a finished bisection)", dir));
  nlohmann::json j = nlohmann::json::parse(read_file(rj));
  std::string sha, parent;
  auto look = [&](const nlohmann::json& c) {
    if (!c.is_object() || !c.contains("sha") || !c.contains("parent")) return;
    const std::string s = c["sha"].get<std::string>();
    if (!culprit.empty() && s.rfind(culprit, 0) == 0 && parent.empty()) sha = s, parent = c["parent"].get<std::string>();
  };
  if (j.contains("culprit")) look(j["culprit"]);
  if (j.contains("culprits"))
    for (const auto& c : j["culprits"]) look(c);
  if (parent.empty())
    throw InputError(fmt::format("'{}' is not a culprit in {} (see its culprit / culprits)", culprit, rj));
  const std::string cf = j.value("/config/file"_json_pointer, std::string());
  if (cf.empty() || !file_exists(cf)) throw InputError(fmt::format("{}: the bisection's config file '{}' is gone", rj, cf));
  cfg = bisect::load_bisect_config(cf);
  auto tc = [&](const std::string& s) {
    const std::string p = dir + "/toolchains/" + s + "/toolchain.yaml";
    if (!file_exists(p)) throw InputError(fmt::format("bisection {}: no toolchain for commit {} ({})", dir, s.substr(0, 12), p));
    return p;
  };
  return {tc(parent), tc(sha)};
}

}  // namespace

std::vector<IrDump> split_ir_dumps(const std::string& log) {
  std::vector<IrDump> out;
  std::map<std::pair<std::string, std::string>, int> seen;
  IrDump* cur = nullptr;
  const std::string head = "*** IR Dump After ";
  for (const auto& line : lines_of(log)) {
    if (line.rfind(head, 0) == 0) {
      std::string rest = line.substr(head.size());
      if (auto e = rest.rfind(" ***"); e != std::string::npos) rest.resize(e);
      IrDump d;
      const size_t on = rest.find(" on ");
      d.pass = on == std::string::npos ? rest : rest.substr(0, on);
      d.unit = on == std::string::npos ? "" : rest.substr(on + 4);
      d.occurrence = seen[{d.pass, d.unit}]++;
      out.push_back(std::move(d));
      cur = &out.back();
      continue;
    }
    if (line.rfind("*** IR Dump", 0) == 0 || line.rfind("*** IR Deleted", 0) == 0) {  // At Start / deleted: skip
      cur = nullptr;
      continue;
    }
    if (cur) cur->text += line + "\n";
  }
  return out;
}

std::string normalize_ir(const std::string& text) {
  static const std::regex attach(R"(, ![A-Za-z_.][\w.]* ![0-9]+)");
  static const std::regex attr_ref(R"( #[0-9]+\b)");
  static const std::regex comment(R"(\s*;.*$)");
  std::string out;
  for (auto l : lines_of(text)) {
    if (l.rfind("!", 0) == 0 || l.rfind("attributes #", 0) == 0 || l.rfind("; ModuleID", 0) == 0 ||
        l.rfind("source_filename", 0) == 0 || l.rfind("; Function Attrs", 0) == 0)
      continue;
    l = std::regex_replace(l, attach, "");
    l = std::regex_replace(l, attr_ref, "");
    l = std::regex_replace(l, comment, "");
    if (l.empty()) continue;
    out += l + "\n";
  }
  return out;
}

std::string unified_diff(const std::string& a, const std::string& b, const std::string& name_a,
                         const std::string& name_b, int context, int max_lines) {
  const auto la = lines_of(a), lb = lines_of(b);
  // Trim the common head and tail first (keeps the LCS table small).
  size_t pre = 0;
  while (pre < la.size() && pre < lb.size() && la[pre] == lb[pre]) ++pre;
  size_t suf = 0;
  while (suf < la.size() - pre && suf < lb.size() - pre && la[la.size() - 1 - suf] == lb[lb.size() - 1 - suf]) ++suf;
  const int n = int(la.size() - pre - suf), m = int(lb.size() - pre - suf);
  if (n == 0 && m == 0) return "";
  // Edit script: ' ' common, '-' only in a, '+' only in b, over the whole texts.
  struct Op {
    char k;
    int ia, ib;
  };
  std::vector<Op> ops;
  for (size_t i = 0; i < pre; ++i) ops.push_back({' ', int(i), int(i)});
  const int cap = 4000;  // beyond this many differing lines, a plain replacement is shown
  std::vector<std::pair<int, int>> pairs;
  if (n <= cap && m <= cap)
    pairs = lcs_pairs(n, m, [&](int i, int j) { return la[pre + size_t(i)] == lb[pre + size_t(j)]; });
  int i = 0, j = 0;
  for (auto [pi, pj] : pairs) {
    while (i < pi) ops.push_back({'-', int(pre) + i++, -1});
    while (j < pj) ops.push_back({'+', -1, int(pre) + j++});
    ops.push_back({' ', int(pre) + i++, int(pre) + j++});
  }
  while (i < n) ops.push_back({'-', int(pre) + i++, -1});
  while (j < m) ops.push_back({'+', -1, int(pre) + j++});
  for (size_t k = 0; k < suf; ++k) ops.push_back({' ', int(la.size() - suf + k), int(lb.size() - suf + k)});

  std::vector<std::string> out = {"--- " + name_a, "+++ " + name_b};
  const int N = int(ops.size());
  int k = 0;
  while (k < N) {
    while (k < N && ops[k].k == ' ') ++k;
    if (k >= N) break;
    int start = std::max(0, k - context);
    int end = k;
    // Extend the hunk while changes are within 2*context of each other.
    while (true) {
      while (end < N && ops[end].k != ' ') ++end;
      int gap = end;
      while (gap < N && ops[gap].k == ' ' && gap - end < 2 * context) ++gap;
      if (gap < N && ops[gap].k != ' ') {
        end = gap;
        continue;
      }
      end = std::min(N, end + context);
      break;
    }
    int a0 = -1, b0 = -1, ac = 0, bc = 0;
    for (int q = start; q < end; ++q) {
      if (ops[q].ia >= 0) {
        if (a0 < 0) a0 = ops[q].ia;
        ++ac;
      }
      if (ops[q].ib >= 0) {
        if (b0 < 0) b0 = ops[q].ib;
        ++bc;
      }
    }
    out.push_back(fmt::format("@@ -{},{} +{},{} @@", a0 + 1, ac, b0 + 1, bc));
    for (int q = start; q < end; ++q)
      out.push_back(std::string(1, ops[q].k) + (ops[q].ia >= 0 ? la[size_t(ops[q].ia)] : lb[size_t(ops[q].ib)]));
    k = end;
  }
  std::string s;
  const int shown = std::min<int>(int(out.size()), max_lines);
  for (int q = 0; q < shown; ++q) s += out[size_t(q)] + "\n";
  if (int(out.size()) > shown) s += fmt::format("... {} more lines\n", int(out.size()) - shown);
  return s;
}

namespace {

// The first runnable case of the sweep for each of the two toolchains (from the bisection when given).
std::pair<PlannedCase, PlannedCase> explain_cases(const ExplainOptions& o) {
  std::vector<std::string> tcs = o.toolchains;
  std::string sweep_text, sweep_origin, filter = o.filter;
  if (!o.bisect_dir.empty()) {
    if (o.culprit.empty()) throw InputError("explaining a bisection needs its culprit");
    if (!tcs.empty()) throw InputError("explain takes either a bisection with its culprit or two toolchains, not both");
    bisect::BisectConfig cfg;
    auto [pa, pb] = bisect_toolchains(o.bisect_dir, o.culprit, cfg);
    tcs = {pa, pb};
    if (o.sweep_file.empty()) {
      sweep_text = cfg.sweep_text;
      sweep_origin = cfg.sweep_origin;
      if (filter.empty()) filter = cfg.filter;
    }
  }
  if (tcs.size() != 2) throw InputError(fmt::format("explain needs exactly two toolchains (got {})", tcs.size()));
  if (sweep_text.empty()) {
    if (o.sweep_file.empty()) throw InputError("explain needs a sweep file (or a bisection with its culprit)");
    if (!file_exists(o.sweep_file)) throw InputError(fmt::format("sweep file not found: {}", o.sweep_file));
    sweep_text = read_file(o.sweep_file);
    sweep_origin = o.sweep_file;
  }
  auto first_case = [&](const std::string& tc) {
    SweepOptions so;
    so.toolchains = {tc};
    so.filter = filter;
    Sweep sw = parse_sweep(sweep_text, sweep_origin, so);
    for (const auto& pc : sw.cases)
      if (!pc.skip_reason) return pc;
    throw InputError(fmt::format("{}: no runnable case for toolchain {}{}", sweep_origin, tc,
                                 filter.empty() ? "" : " matching --filter '" + filter + "'"));
  };
  return {first_case(tcs[0]), first_case(tcs[1])};
}

// The metrics that differ between the two artifacts.
void metric_diff(const Compiled& A, const Compiled& B, Explanation& e) {
  e.toolchain_a = A.toolchain;
  e.toolchain_b = B.toolchain;
  e.dumps_a = int(A.dumps.size());
  e.dumps_b = int(B.dumps.size());
  e.code_hash_a = A.art.code_hash;
  e.code_hash_b = B.art.code_hash;
  if (A.art.code_bytes != B.art.code_bytes) e.metrics.push_back({"code_bytes", double(A.art.code_bytes), double(B.art.code_bytes)});
  for (const auto& [k, va] : A.art.metrics) {
    auto it = B.art.metrics.find(k);
    if (it != B.art.metrics.end() && it->second != va) e.metrics.push_back({k, va, it->second});
  }

}

// Walks both dump sequences in pipeline order (matched by pass, unit and occurrence) and records the first
// dump that differs and the first pass that diverged on equal input.
void first_differences(const Compiled& A, const Compiled& B, int max_diff_lines, Explanation& e) {
  std::vector<std::string> na, nb;
  for (const auto& d : A.dumps) na.push_back(normalize_ir(d.text));
  for (const auto& d : B.dumps) nb.push_back(normalize_ir(d.text));
  auto key_eq = [&](int i, int j) {
    const auto &x = A.dumps[size_t(i)], &y = B.dumps[size_t(j)];
    return x.pass == y.pass && x.unit == y.unit && x.occurrence == y.occurrence;
  };
  const auto pairs = lcs_pairs(int(A.dumps.size()), int(B.dumps.size()), key_eq);
  // Walk in pipeline order; per unit, the latest dump on each side (to tell "the pass diverged on equal
  // input" from "the unit already differed").
  std::map<std::string, std::string> last_a, last_b;
  bool found = false, divergent = false;
  auto record = [&](const IrDump& d, const std::string& kind, const std::string& ta, const std::string& tb,
                    const std::string& label_a, const std::string& label_b) {
    const bool in_eq = last_a.count(d.unit) && last_b.count(d.unit) && last_a[d.unit] == last_b[d.unit];
    if (!found) {
      found = true;
      e.pass = d.pass;
      e.unit = d.unit;
      e.occurrence = d.occurrence;
      e.kind = kind;
      e.input_equal = in_eq;
      e.diff = unified_diff(ta, tb, label_a, label_b, 3, max_diff_lines);
    }
    if (in_eq && !divergent) {
      divergent = true;
      e.first_divergent_pass = d.pass;
      e.first_divergent_unit = d.unit;
      e.divergent_diff = unified_diff(ta, tb, label_a, label_b, 3, max_diff_lines);
    }
  };
  size_t i = 0, j = 0;
  auto take_a = [&](size_t x) {
    const auto& d = A.dumps[x];
    const std::string prev_b = last_b.count(d.unit) ? last_b[d.unit] : "";
    record(d, "only-in-a", na[x], prev_b, fmt::format("{} after {} on {}", e.toolchain_a, d.pass, d.unit),
           fmt::format("{} (the pass did not change {})", e.toolchain_b, d.unit));
    last_a[d.unit] = na[x];
  };
  auto take_b = [&](size_t y) {
    const auto& d = B.dumps[y];
    const std::string prev_a = last_a.count(d.unit) ? last_a[d.unit] : "";
    record(d, "only-in-b", prev_a, nb[y], fmt::format("{} (the pass did not change {})", e.toolchain_a, d.unit),
           fmt::format("{} after {} on {}", e.toolchain_b, d.pass, d.unit));
    last_b[d.unit] = nb[y];
  };
  for (auto [pi, pj] : pairs) {
    while (i < size_t(pi)) take_a(i++);
    while (j < size_t(pj)) take_b(j++);
    const auto& d = A.dumps[i];
    if (na[i] != nb[j])
      record(d, "changed-differently", na[i], nb[j], fmt::format("{} after {} on {}", e.toolchain_a, d.pass, d.unit),
             fmt::format("{} after {} on {}", e.toolchain_b, d.pass, d.unit));
    last_a[d.unit] = na[i++];
    last_b[d.unit] = nb[j++];
    if (found && divergent) break;
  }
  if (!(found && divergent)) {
    while (i < A.dumps.size()) take_a(i++);
    while (j < B.dumps.size()) take_b(j++);
  }
  e.verdict = found ? "differs" : "same-ir";
  if (e.first_divergent_pass == e.pass && e.first_divergent_unit == e.unit) {
    e.first_divergent_pass.clear();
    e.divergent_diff.clear();
  }
}

}  // namespace

Explanation run_explain(const ExplainOptions& o) {
  const auto [ca, cb] = explain_cases(o);
  const Compiled A = compile_print_changed(ca), B = compile_print_changed(cb);
  Explanation e;
  e.case_id = ca.c.id();
  metric_diff(A, B, e);
  first_differences(A, B, o.max_diff_lines, e);
  return e;
}

nlohmann::json explanation_to_json(const Explanation& e) {
  nlohmann::json j = {{"case", e.case_id},       {"toolchain_a", e.toolchain_a}, {"toolchain_b", e.toolchain_b},
                      {"verdict", e.verdict},    {"dumps_a", e.dumps_a},         {"dumps_b", e.dumps_b},
                      {"code_hash_a", e.code_hash_a}, {"code_hash_b", e.code_hash_b}};
  if (e.verdict == "differs") {
    j["first_difference"] = {{"pass", e.pass}, {"unit", e.unit},     {"occurrence", e.occurrence},
                             {"kind", e.kind}, {"input_equal", e.input_equal}, {"diff", e.diff}};
    if (!e.first_divergent_pass.empty())
      j["first_divergence_on_equal_input"] = {
          {"pass", e.first_divergent_pass}, {"unit", e.first_divergent_unit}, {"diff", e.divergent_diff}};
  }
  nlohmann::json m = nlohmann::json::array();
  for (const auto& d : e.metrics) m.push_back({{"metric", d.name}, {"a", d.a}, {"b", d.b}});
  j["static_metrics"] = m;
  return j;
}

std::string render_explanation(const Explanation& e) {
  std::string s = fmt::format("{}\n  A = {} ({} changed-IR dumps), B = {} ({} dumps)\n", e.case_id, e.toolchain_a,
                              e.dumps_a, e.toolchain_b, e.dumps_b);
  s += fmt::format("  machine code: {}\n", e.code_hash_a == e.code_hash_b ? "identical" : "differs");
  if (e.metrics.empty()) {
    s += "  static metrics: no difference\n";
  } else {
    s += "  static metrics:\n";
    for (const auto& m : e.metrics) s += fmt::format("    {:<18} {:>10g} -> {:<10g} ({:+g})\n", m.name, m.a, m.b, m.b - m.a);
  }
  if (e.verdict != "differs") return s + "  every aligned pass produced the same IR (after normalization)\n";
  const char* what = e.kind == "only-in-a"   ? "changed the unit under A only"
                     : e.kind == "only-in-b" ? "changed the unit under B only"
                                             : "changed the unit differently";
  s += fmt::format("  first pass whose output differs: {} on {} (occurrence {}): {}; its input was {}\n", e.pass, e.unit,
                   e.occurrence + 1, what, e.input_equal ? "identical" : "already different (or not dumped)");
  for (const auto& l : lines_of(e.diff)) s += "    " + l + "\n";
  if (!e.first_divergent_pass.empty()) {
    s += fmt::format("  first pass that diverged on identical input: {} on {}\n", e.first_divergent_pass, e.first_divergent_unit);
    for (const auto& l : lines_of(e.divergent_diff)) s += "    " + l + "\n";
  }
  return s;
}

}  // namespace kb
