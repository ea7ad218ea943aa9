// kbisect import-trace TRACE [--kernel NAME] [--index I] [--list] [-o DIR]: a kernel from a tritonparse
// trace, written as a `triton_kernel:` YAML file with its source beside it (docs/triton.md).
#include <iostream>
#include <optional>

#include <fmt/format.h>

#include "backends/triton/trace.h"
#include "cli/command.h"
#include "cli/exit_codes.h"

namespace kb::cli {
namespace {

struct Opts {
  std::string trace, kernel, out_dir = ".";
  int index = -1;
  bool list = false;
};

void print_list(const triton::Trace& t) {
  std::cout << fmt::format("{} compilation(s), {} launch event(s) in {}\n", t.compilations.size(), t.launch_events, t.path);
  std::cout << fmt::format("  {:<20} {:>5}  {:<12} {:<11} {:>5} {:>6}  {:<13} {}\n", "kernel", "index", "hash", "target",
                           "warps", "stages", "launches", "constants");
  for (const auto& c : t.compilations) {
    std::vector<std::string> cs;
    for (const auto& [n, v] : c.constants) cs.push_back(n + "=" + v);
    const std::string launches = c.launch_events ? fmt::format("{} ({} shapes)", c.launch_events, c.launches.size()) : "0";
    std::cout << fmt::format("  {:<20} {:>5}  {:<12} {:<11} {:>5} {:>6}  {:<13} {}\n", c.kernel, c.index,
                             c.hash.substr(0, 12), c.target, c.num_warps, c.num_stages, launches, fmt::join(cs, " "));
    for (const auto& l : c.launches) {
      std::vector<std::string> args;
      for (const auto& a : l.args)
        args.push_back(a.kind == "tensor" ? fmt::format("{}[{}]{}", a.name, fmt::join(a.shape, "x"), a.dtype)
                                          : fmt::format("{}={}", a.name, a.value));
      std::cout << fmt::format("      grid ({}) x{}  {}\n", fmt::join(l.grid, ", "), l.count, fmt::join(args, " "));
    }
  }
}

int run(const Opts& o) {
  const triton::Trace t = triton::read_trace(o.trace);
  for (const auto& w : t.warnings) std::cerr << "kbisect: warning: " << w << "\n";
  if (o.list) {
    print_list(t);
    return kExitOk;
  }
  const auto index = o.index < 0 ? std::nullopt : std::optional<size_t>(size_t(o.index));
  const triton::TraceCompilation& c = triton::choose_compilation(t, o.kernel, index);
  const triton::ImportedKernel k = triton::write_kernel_files(t, c, o.out_dir);
  std::cout << fmt::format("wrote {} and {}: kernel {} ({}), {}\n", k.yaml_path, k.py_path, k.name, c.target,
                           k.shapes ? fmt::format("{} shape(s) from {} launch(es)", k.shapes, c.launch_events)
                                    : std::string("compile-only (no launch in the trace)"));
  return kExitOk;
}

Registrar reg("import-trace", "Write a triton_kernel: YAML file and its .py from a tritonparse trace (NDJSON, or gzip)",
              [](CLI::App* app) {
                auto o = std::make_shared<Opts>();
                app->add_option("trace", o->trace, "tritonparse trace (.ndjson or .ndjson.gz)")->required();
                app->add_option("--kernel", o->kernel, "kernel name (needed when the trace has several)");
                app->add_option("--index", o->index, "which compilation of the kernel (0-based; see --list)");
                app->add_flag("--list", o->list, "list the compilations and their launches, write nothing");
                app->add_option("-o,--out-dir", o->out_dir, "directory for NAME.yaml and NAME.py")->default_val(".");
                return [o] { return run(*o); };
              });

}  // namespace
}  // namespace kb::cli
