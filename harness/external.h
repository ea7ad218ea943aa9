// An external (tier l3) metric: a user command (an argv list, never a shell string) whose output is parsed
// with a regular expression holding exactly one capture group, e.g. a training job's throughput or final
// loss. The command gets the toolchain under test in KBISECT_TOOLCHAIN_* environment variables, so one
// script can build and run with whatever compiler a nightly or a bisection step hands it.
//
//   metric:
//     external:
//       command: [./train.sh, --steps, "100"]   # argv; relative program paths resolve against `cwd`
//       parse: "throughput: ([0-9.eE+-]+)"      # ECMAScript; the LAST match in the output counts
//       repeat: 3                               # runs per measurement (default 1)
//       timeout_s: 600                          # per run (default 3600)
//       cwd: .                                  # default: the directory of the YAML file
//       stream: stdout                          # stdout | stderr | both (default both: stdout then stderr)
//       better: higher                          # higher | lower (default lower, like time)
//       env: {OMP_NUM_THREADS: "8"}
//
// Environment given to the command: KBISECT_TOOLCHAIN_NAME, _BACKEND, _KIND, _COMPILER, _FLAGS (space
// separated), _TARGET, _IDENTITY, _VERSION (when a toolchain is given), plus KBISECT_RUN_INDEX (0-based).
#pragma once
#include <map>
#include <regex>
#include <string>
#include <vector>

namespace YAML {
class Node;
}

namespace kb {

struct Toolchain;
struct YamlCtx;

struct ExternalMetric {
  std::vector<std::string> command;
  std::string parse;        // the regex as written
  std::regex re;
  int repeat = 1;
  double timeout_s = 3600;
  std::string cwd;          // absolute
  std::string stream = "both";
  bool higher_is_better = false;
  std::map<std::string, std::string> env;
  std::string origin;       // "file:line:col" of the `external` node
};

// Parses the mapping under `external:`; relative `cwd` resolves against `base_dir`. Throws InputError naming
// file:line:col and the field (a regex without exactly one capture group is an error).
ExternalMetric parse_external_metric(const YamlCtx& cx, const YAML::Node& node, const std::string& base_dir);
// Convenience: the text is a YAML mapping with `external:` at the top (or the bare mapping).
ExternalMetric parse_external_metric(const std::string& yaml_text, const std::string& origin);

// KBISECT_TOOLCHAIN_* variables describing `tc`.
std::map<std::string, std::string> toolchain_env(const Toolchain& tc);

struct ExternalRun {
  double value = 0;
  double wall_s = 0;
  std::string output_tail;
};

// The command as run_external_once runs it: argv (a relative program path resolved against cwd), the working
// directory and the environment it adds (the metric's env, KBISECT_TOOLCHAIN_*, KBISECT_RUN_INDEX, extra_env).
struct ExternalCommand {
  std::vector<std::string> argv;
  std::string cwd;
  std::map<std::string, std::string> env;
};
ExternalCommand external_command(const ExternalMetric& m, const Toolchain* tc = nullptr, int run_index = 0,
                                 const std::map<std::string, std::string>& extra_env = {});
// The value in a run's output `text` (the stream the metric reads): the last match of `parse`. Throws Error
// naming the command (`argv`) and the output's tail when nothing matches or the capture is not a number.
double parse_external_value(const ExternalMetric& m, const std::string& text, const std::vector<std::string>& argv);

// Runs the command once (argv, timeout, captured output) and parses the value. Throws Error naming the
// command, its status and the output tail when it fails, times out, prints no match or a non-number.
ExternalRun run_external_once(const ExternalMetric& m, const Toolchain* tc = nullptr, int run_index = 0,
                              const std::map<std::string, std::string>& extra_env = {});
// `repeat` runs; the values in run order.
std::vector<double> run_external(const ExternalMetric& m, const Toolchain* tc = nullptr,
                                 const std::map<std::string, std::string>& extra_env = {});

}  // namespace kb
