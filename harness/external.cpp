#include "harness/external.h"

#include <cmath>
#include <filesystem>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "backends/toolchain.h"
#include "core/error.h"
#include "core/process.h"
#include "core/text.h"

namespace kb {

namespace fs = std::filesystem;

namespace {

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : " ") + x;
  return s;
}

}  // namespace

ExternalMetric parse_external_metric(const YamlCtx& cx, const YAML::Node& n, const std::string& base_dir) {
  if (!n.IsMap()) cx.fail(n, "'metric.external' must be a mapping {command, parse, repeat, timeout_s, ...}");
  check_yaml_keys(cx, n, "metric.external", {"command", "parse", "repeat", "timeout_s", "cwd", "stream", "better", "env"});
  ExternalMetric m;
  m.origin = cx.at(n);
  if (!n["command"]) cx.fail(n, "'metric.external' is missing field 'command' (an argv list)");
  const auto cmd = n["command"];
  if (!cmd.IsSequence() || cmd.size() == 0)
    cx.fail(cmd, "'metric.external.command' must be a non-empty list (argv; no shell: [prog, arg, ...])");
  for (const auto& a : cmd) m.command.push_back(yaml_scalar(cx, a, "metric.external.command[]"));
  if (m.command[0].empty()) cx.fail(cmd, "'metric.external.command' has an empty program");
  if (!n["parse"]) cx.fail(n, "'metric.external' is missing field 'parse' (a regex with one capture group)");
  m.parse = yaml_scalar(cx, n["parse"], "metric.external.parse");
  try {
    m.re = checked_regex(m.parse);
  } catch (const std::regex_error& e) {
    cx.fail(n["parse"], fmt::format("'metric.external.parse' = '{}' is not a valid regex: {}", m.parse, e.what()));
  }
  if (m.re.mark_count() != 1)
    cx.fail(n["parse"], fmt::format("'metric.external.parse' = '{}' must have exactly one capture group (it has {})", m.parse,
                                    m.re.mark_count()));
  if (n["repeat"]) {
    const double r = yaml_number(cx, n["repeat"], "metric.external.repeat");
    if (!(r >= 1 && r <= 10000 && r == std::floor(r))) cx.fail(n["repeat"], "'metric.external.repeat' must be a positive integer");
    m.repeat = int(r);
  }
  if (n["timeout_s"]) {
    m.timeout_s = yaml_number(cx, n["timeout_s"], "metric.external.timeout_s");
    if (!(m.timeout_s > 0)) cx.fail(n["timeout_s"], "'metric.external.timeout_s' must be positive");
  }
  m.cwd = base_dir;
  if (n["cwd"]) {
    fs::path p(yaml_scalar(cx, n["cwd"], "metric.external.cwd"));
    if (p.is_relative()) p = fs::path(base_dir) / p;
    std::error_code ec;
    if (!fs::is_directory(p, ec)) cx.fail(n["cwd"], fmt::format("'metric.external.cwd': directory '{}' does not exist", p.string()));
    m.cwd = fs::weakly_canonical(p).string();
  }
  if (n["stream"]) {
    m.stream = yaml_scalar(cx, n["stream"], "metric.external.stream");
    if (m.stream != "stdout" && m.stream != "stderr" && m.stream != "both")
      cx.fail(n["stream"], fmt::format("'metric.external.stream' = '{}' must be stdout, stderr or both", m.stream));
  }
  if (n["better"]) {
    const std::string b = yaml_scalar(cx, n["better"], "metric.external.better");
    if (b != "higher" && b != "lower") cx.fail(n["better"], fmt::format("'metric.external.better' = '{}' must be higher or lower", b));
    m.higher_is_better = b == "higher";
  }
  if (const auto e = n["env"]) {
    if (!e.IsMap()) cx.fail(e, "'metric.external.env' must be a mapping NAME: value");
    for (auto it = e.begin(); it != e.end(); ++it) m.env[it->first.as<std::string>()] = yaml_scalar(cx, it->second, "metric.external.env");
  }
  return m;
}

ExternalMetric parse_external_metric(const std::string& yaml_text, const std::string& origin) {
  YamlCtx cx{origin};
  const YAML::Node root = yaml_load(yaml_text, origin);
  const std::string base = fs::absolute(origin).parent_path().string();
  if (root.IsMap() && root["external"]) return parse_external_metric(cx, root["external"], base);
  return parse_external_metric(cx, root, base);
}

std::map<std::string, std::string> toolchain_env(const Toolchain& tc) {
  return {{"KBISECT_TOOLCHAIN_NAME", tc.name},         {"KBISECT_TOOLCHAIN_BACKEND", tc.backend},
          {"KBISECT_TOOLCHAIN_KIND", tc.kind},         {"KBISECT_TOOLCHAIN_COMPILER", tc.compiler},
          {"KBISECT_TOOLCHAIN_FLAGS", join(tc.flags)}, {"KBISECT_TOOLCHAIN_TARGET", tc.target},
          {"KBISECT_TOOLCHAIN_IDENTITY", tc.identity}, {"KBISECT_TOOLCHAIN_VERSION", tc.version_text}};
}

ExternalCommand external_command(const ExternalMetric& m, const Toolchain* tc, int run_index,
                                 const std::map<std::string, std::string>& extra_env) {
  ExternalCommand c;
  c.argv = m.command;
  // A relative program path ("./train.sh", "bin/x") is relative to cwd; a bare name is looked up in PATH.
  if (c.argv[0].find('/') != std::string::npos && fs::path(c.argv[0]).is_relative())
    c.argv[0] = (fs::path(m.cwd) / c.argv[0]).string();
  c.cwd = m.cwd;
  c.env = m.env;
  if (tc)
    for (const auto& [k, v] : toolchain_env(*tc)) c.env[k] = v;
  c.env["KBISECT_RUN_INDEX"] = std::to_string(run_index);
  for (const auto& [k, v] : extra_env) c.env[k] = v;
  return c;
}

double parse_external_value(const ExternalMetric& m, const std::string& text, const std::vector<std::string>& argv) {
  std::string value;
  bool found = false;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), m.re); it != std::sregex_iterator(); ++it) {
    value = (*it)[1].str();
    found = true;
  }
  if (!found)
    throw Error(fmt::format("external metric ({}): {} printed nothing matching '{}' on {}; output ends with:\n{}", m.origin,
                            argv_to_display(argv), m.parse, m.stream, tail(text, 1500)));
  try {
    size_t pos = 0;
    const double v = std::stod(value, &pos);
    if (pos != value.size() || !std::isfinite(v)) throw std::invalid_argument(value);
    return v;
  } catch (const std::exception&) {
    throw Error(fmt::format("external metric ({}): '{}' captured by '{}' is not a number", m.origin, value, m.parse));
  }
}

ExternalRun run_external_once(const ExternalMetric& m, const Toolchain* tc, int run_index,
                              const std::map<std::string, std::string>& extra_env) {
  const ExternalCommand c = external_command(m, tc, run_index, extra_env);
  RunOptions ro;
  ro.timeout_s = m.timeout_s;
  ro.cwd = c.cwd;
  ro.env_set = c.env;
  RunResult r = run_process(c.argv, ro);
  const std::string text = m.stream == "stdout" ? r.out : m.stream == "stderr" ? r.err : r.out + r.err;
  ExternalRun out;
  out.wall_s = r.wall_s;
  out.output_tail = tail(text, 2000);
  if (!r.ok())
    throw Error(fmt::format("external metric ({}): {} {}; output ends with:\n{}", m.origin, argv_to_display(c.argv),
                            r.status_text(), tail(r.out + r.err, 1500)));
  out.value = parse_external_value(m, text, c.argv);
  return out;
}

std::vector<double> run_external(const ExternalMetric& m, const Toolchain* tc, const std::map<std::string, std::string>& extra_env) {
  std::vector<double> v;
  for (int i = 0; i < m.repeat; ++i) v.push_back(run_external_once(m, tc, i, extra_env).value);
  return v;
}

}  // namespace kb
