#include "harness/printers.h"
#include "core/text.h"

#include <algorithm>
#include <optional>
#include <sstream>

#include <fmt/format.h>

#include "core/error.h"
#include "core/fsutil.h"
#include "report/table.h"

namespace kb {

using json = nlohmann::json;

std::string format_time(double s) {
  if (s <= 0) return "-";
  if (s < 1e-6) return fmt::format("{:.1f} ns", s * 1e9);
  if (s < 1e-3) return fmt::format("{:.2f} us", s * 1e6);
  if (s < 1) return fmt::format("{:.3f} ms", s * 1e3);
  return fmt::format("{:.3f} s", s);
}

namespace {

// Environment fields, tolerant of results that carry no environment.
template <class T>
T env(const RunResults& r, const char* key, T fallback) {
  if (!r.environment.is_object() || !r.environment.contains(key)) return fallback;
  try {
    return r.environment.at(key).get<T>();
  } catch (const json::exception&) {
    return fallback;
  }
}

struct Row {
  std::vector<std::string> cells;
};

// The console table: report::TextTable (UTF-8 widths, the last column not padded).
std::string text_table(const std::vector<std::string>& header, const std::vector<Row>& rows) {
  std::vector<report::Column> cols;
  for (size_t i = 0; i < header.size(); ++i) {
    report::Column c;
    c.header = header[i];
    c.gap = i ? 2 : 0;
    cols.push_back(c);
  }
  report::TextTable t(std::move(cols));
  for (const auto& r : rows) t.add_row(r.cells);
  return t.render('-');
}

// A GitHub Markdown table; a '|' inside a cell is escaped.
std::string markdown_table(const std::vector<std::string>& header, const std::vector<Row>& rows) {
  std::ostringstream os;
  auto line = [&](const std::vector<std::string>& cells) {
    os << "|";
    for (const auto& c : cells) {
      std::string e;
      for (char ch : c) e += ch == '|' ? std::string("\\|") : std::string(1, ch);
      os << " " << e << " |";
    }
    os << "\n";
  };
  line(header);
  os << "|";
  for (size_t i = 0; i < header.size(); ++i) os << "---|";
  os << "\n";
  for (const auto& r : rows) line(r.cells);
  return os.str();
}

// A warp-specialized case's partitions in one cell: "4w/40r 4w/232r 4w/232r" (warps, and the register
// limit setmaxnreg sets, per partition, the default first); "-" for a case that is not specialized.
std::string warp_groups_cell(const CaseResult& c) {
  auto get = [&](const std::string& k) -> std::optional<double> {
    auto it = c.metrics.find(k);
    return it == c.metrics.end() ? std::nullopt : std::optional<double>(it->second);
  };
  const auto parts = get("ws_partitions");
  if (!c.has_static || !parts || *parts < 2) return "-";
  std::string cell;
  for (int i = 0; i < int(*parts); ++i) {
    const auto w = get(fmt::format("ws_p{}_warps", i)), r = get(fmt::format("ws_p{}_maxnreg", i));
    cell += fmt::format("{}{}w{}", i ? " " : "", w ? fmt::format("{:g}", *w) : "?", r ? fmt::format("/{:g}r", *r) : "");
  }
  return cell;
}

bool any_warp_groups(const RunResults& r) {
  for (const auto& c : r.cases)
    if (warp_groups_cell(c) != "-") return true;
  return false;
}

std::vector<Row> case_rows(const RunResults& r) {
  const bool ws = any_warp_groups(r);
  std::vector<Row> rows;
  for (const auto& c : r.cases) {
    Row row;
    std::string status = to_string(c.status);
    std::string lat = "-", tput = "-", noise = "-", n = "-";
    if (c.status == CaseStatus::ok && c.summary.samples > 0) {
      lat = format_time(c.summary.median_s);
      tput = fmt::format("{:.4f}", c.summary.tflops);
      noise = fmt::format("{:.2f}%", 100 * c.summary.noise);
      n = std::to_string(c.summary.samples);
    }
    std::string note = c.reason;
    if (auto nl = note.find('\n'); nl != std::string::npos) note = note.substr(0, nl);
    if (note.size() > 60) note = note.substr(0, 57) + "...";
    row.cells = {c.shape.label.empty() ? fmt::format("({}, {}, {})", c.shape.M, c.shape.N, c.shape.K) : c.shape.label,
                 c.kernel,
                 c.params.str(),
                 to_string(c.dtype),
                 c.toolchain,
                 lat,
                 tput,
                 noise,
                 n,
                 status,
                 c.has_static ? std::to_string(c.code_bytes) : "-",
                 note};
    if (ws) row.cells.insert(row.cells.end() - 1, warp_groups_cell(c));
    rows.push_back(std::move(row));
  }
  return rows;
}

const std::vector<std::string> kHeader = {"(M, N, K)", "kernel", "params", "dtype", "toolchain", "latency",
                                          "TFLOP/s", "noise", "samples", "status", "code_bytes", "note"};

// The header, with the warp-group column before the note when a case is warp-specialized.
std::vector<std::string> header_for(const RunResults& r) {
  std::vector<std::string> h = kHeader;
  if (any_warp_groups(r)) h.insert(h.end() - 1, "warp groups");
  return h;
}

}  // namespace

std::string render_table(const RunResults& r) {
  std::string s = text_table(header_for(r), case_rows(r));
  size_t ok = 0, skipped = 0, bad = 0;
  double check_s = 0, measure_s = 0;
  for (const auto& c : r.cases) {
    check_s += c.check_s;
    measure_s += c.measure_s;
    if (c.status == CaseStatus::ok) ++ok;
    else if (c.status == CaseStatus::skipped) ++skipped;
    else ++bad;
  }
  s += fmt::format("{} cases: {} ok, {} skipped, {} failed or incorrect; {:.1f} s", r.cases.size(), ok, skipped, bad,
                   r.wall_s);
  if (check_s > 0 || measure_s > 0) s += fmt::format(" (checking {:.1f} s, measuring {:.1f} s)", check_s, measure_s);
  s += "\n";
  return s;
}

std::string render_markdown(const RunResults& r) {
  std::string s = fmt::format("# kbisect {}: {}\n\n", r.kind, r.name);
  s += fmt::format("kbisect {} on {} ({}), {}\n\n", env<std::string>(r, "kbisect_sha", "?"),
                   env<std::string>(r, "host", "?"), env<std::string>(r, "cpu", "?"), r.started);
  s += markdown_table(header_for(r), case_rows(r));
  return s;
}

std::string render_csv(const RunResults& r) {
  std::ostringstream os;
  const auto q = csv_field;
  os << "kernel,backend,params,M,N,K,dtype,toolchain,toolchain_identity,status,reason,code_bytes,code_hash,compile_s,"
        "samples,median_s,mean_s,stddev_s,min_s,noise,tflops,max_error,tolerance,check_method\n";
  for (const auto& c : r.cases) {
    std::string reason = c.reason.substr(0, c.reason.find('\n'));
    os << fmt::format("{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{:.9g},{:.9g},{:.9g},{:.9g},{:.6g},{:.6g},{},{},{}\n",
                      q(c.kernel), q(c.backend), q(c.params.str()), c.shape.M, c.shape.N, c.shape.K,
                      to_string(c.dtype), q(c.toolchain), q(c.toolchain_identity), to_string(c.status), q(reason),
                      c.has_static ? std::to_string(c.code_bytes) : "", c.code_hash,
                      c.has_static ? fmt::format("{:.4f}", c.compile_s) : "", c.summary.samples, c.summary.median_s,
                      c.summary.mean_s, c.summary.stddev_s, c.summary.min_s, c.summary.noise, c.summary.tflops,
                      c.checked ? fmt::format("{:.3g}", c.max_error) : "", c.checked ? fmt::format("{:.3g}", c.tolerance) : "",
                      c.checked ? c.check_method : "");
  }
  return os.str();
}

std::string render_gbench_json(const RunResults& r) {
  json j;
  j["context"] = {{"date", r.started},
                  {"host_name", env<std::string>(r, "host", "")},
                  {"executable", "kbisect"},
                  {"num_cpus", env<int>(r, "cpus", 1)},
                  {"mhz_per_cpu", 0},
                  {"cpu_scaling_enabled", false},
                  {"caches", json::array()},
                  {"library_build_type", "release"},
                  {"kbisect_sha", env<std::string>(r, "kbisect_sha", "")}};
  j["benchmarks"] = json::array();
  for (const auto& c : r.cases) {
    if (c.status != CaseStatus::ok || c.samples_s.empty()) continue;
    std::string name = c.id();
    int64_t reps = int64_t(c.samples_s.size());
    for (int64_t i = 0; i < reps; ++i) {
      j["benchmarks"].push_back({{"name", name},
                                 {"family_index", 0},
                                 {"per_family_instance_index", 0},
                                 {"run_name", name},
                                 {"run_type", "iteration"},
                                 {"repetitions", reps},
                                 {"repetition_index", i},
                                 {"threads", 1},
                                 {"iterations", c.conditions.batch},
                                 {"real_time", c.samples_s[size_t(i)] * 1e9},
                                 {"cpu_time", c.samples_s[size_t(i)] * 1e9},
                                 {"time_unit", "ns"}});
    }
    for (auto [agg, v] : {std::pair<const char*, double>{"mean", c.summary.mean_s},
                          {"median", c.summary.median_s},
                          {"stddev", c.summary.stddev_s}}) {
      j["benchmarks"].push_back({{"name", name + "_" + agg},
                                 {"run_name", name},
                                 {"run_type", "aggregate"},
                                 {"repetitions", reps},
                                 {"threads", 1},
                                 {"aggregate_name", agg},
                                 {"iterations", reps},
                                 {"real_time", v * 1e9},
                                 {"cpu_time", v * 1e9},
                                 {"time_unit", "ns"}});
    }
  }
  return j.dump(2) + "\n";
}

std::string render_json(const RunResults& r) { return to_json(r).dump(1) + "\n"; }

std::vector<std::string> parse_formats(const std::string& list, const std::vector<std::string>& allowed) {
  std::vector<std::string> out;
  std::stringstream ss(list);
  std::string f;
  while (std::getline(ss, f, ',')) {
    if (f.empty()) continue;
    if (std::find(allowed.begin(), allowed.end(), f) == allowed.end()) {
      std::string a;
      for (auto& x : allowed) a += (a.empty() ? "" : ", ") + x;
      throw InputError(fmt::format("unknown format '{}' (known: {})", f, a));
    }
    out.push_back(f);
  }
  return out;
}

std::string write_outputs(const RunResults& r, const std::string& dir, const std::vector<std::string>& formats) {
  std::string table;
  for (const auto& f : formats) {
    if (f == "table") table = render_table(r);
    else if (f == "json") write_file_atomic(dir + "/results.json", render_json(r));
    else if (f == "csv") write_file_atomic(dir + "/results.csv", render_csv(r));
    else if (f == "gbench") write_file_atomic(dir + "/results.gbench.json", render_gbench_json(r));
    else if (f == "md") write_file_atomic(dir + "/results.md", render_markdown(r));
  }
  return table;
}

}  // namespace kb
