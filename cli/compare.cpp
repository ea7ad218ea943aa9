// kbisect compare BASE NEW: per-case verdicts (worse / better / same / unsure) between two result files
// (ours or Google Benchmark JSON with repetitions). Exit code 1 when a case is slower beyond the
// threshold (with --fail-on slower, the default), 0 otherwise, 2 for bad input.
#include <iostream>
#include <memory>
#include <sstream>

#include <fmt/format.h>

#include "cli/exit_codes.h"
#include "cli/command.h"
#include "harness/compare.h"
#include "core/error.h"
#include "core/fsutil.h"
#include "harness/sweep.h"

namespace kb::cli {
namespace {

struct Args {
  std::string base, next;
  std::string threshold = "0.5%";
  double alpha = 0.05;
  std::string fail_on = "slower";
  std::string format = "table";
  std::string out;
  std::string time_field = "real_time";
};

std::vector<std::string> split_formats(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string f;
  while (std::getline(ss, f, ','))
    if (!f.empty()) out.push_back(f);
  return out;
}

std::string render(const Comparison& c, const std::string& format) {
  if (format == "table") return render_table(c);
  if (format == "md" || format == "markdown") return render_markdown(c);
  if (format == "json") return comparison_to_json(c).dump(2) + "\n";
  throw InputError(fmt::format("--format: unknown format '{}' (table, md, json)", format));
}

int run(const Args& a) {
  CompareOptions o;
  o.threshold = parse_fraction(a.threshold, "--threshold");
  o.alpha = a.alpha;
  if (a.fail_on == "slower") o.fail_on_slower = true;
  else if (a.fail_on == "never") o.fail_on_slower = false;
  else throw InputError(fmt::format("--fail-on: '{}' must be slower or never", a.fail_on));
  auto formats = split_formats(a.format);
  if (formats.empty()) throw InputError("--format: empty");
  for (const auto& f : formats) (void)render(Comparison{}, f);  // validate before the work

  auto base = load_sample_set(a.base, a.time_field);
  auto next = load_sample_set(a.next, a.time_field);
  auto c = compare_sets(base, next, o);
  for (const auto& f : formats) std::cout << render(c, f);
  if (!a.out.empty()) {
    std::string fmt_out = "table";
    auto ends = [&](const char* s) {
      std::string suf(s);
      return a.out.size() >= suf.size() && a.out.compare(a.out.size() - suf.size(), suf.size(), suf) == 0;
    };
    if (ends(".json")) fmt_out = "json";
    else if (ends(".md")) fmt_out = "md";
    write_file_atomic(a.out, render(c, fmt_out));
  }
  return exit_code_for(c);
}

Registrar reg("compare",
              "Compare two result files (kbisect JSON or Google Benchmark JSON with repetitions): per-case "
              "verdict worse/better/same/unsure with effect and CI; exit 1 if any case is slower beyond the threshold",
              [](CLI::App* app) {
                auto a = std::make_shared<Args>();
                app->add_option("BASE", a->base, "baseline result file")->required();
                app->add_option("NEW", a->next, "new result file")->required();
                app->add_option("--threshold", a->threshold, "smallest change that matters (e.g. 0.5%)")->capture_default_str();
                app->add_option("--alpha", a->alpha, "error rate of calling identical code different")
                    ->capture_default_str()
                    ->check(CLI::Range(1e-6, 0.499));
                app->add_option("--fail-on", a->fail_on, "slower | never: exit 1 when a case is worse")->capture_default_str();
                app->add_option("--format", a->format, "stdout formats, comma-separated: table, md, json")->capture_default_str();
                app->add_option("-o,--output", a->out, "also write the report here (.json, .md, else table), atomically");
                app->add_option("--time", a->time_field, "Google Benchmark files: real_time or cpu_time")->capture_default_str();
                return [a] { return run(*a); };
              });

}  // namespace
}  // namespace kb::cli
