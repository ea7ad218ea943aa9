// kbisect import-trace TRACE [--kernel NAME] [--index I] [--list] [-o DIR]: a kernel from a tritonparse
// trace, written as a `triton_kernel:` YAML file with its source beside it (docs/triton.md).
// kbisect import-trace TRACE --verify [--toolchain T]: each compilation (or the chosen one) imported and
// recompiled by kbisect, every stage compared with the trace's own (docs/triton.md, "Fidelity").
#include <iostream>
#include <optional>

#include <fmt/format.h>

#include "backends/triton/fidelity.h"
#include "backends/triton/trace.h"
#include "core/fsutil.h"
#include "cli/command.h"
#include "cli/exit_codes.h"

namespace kb::cli {
namespace {

struct Opts {
  std::string trace, kernel, out_dir = ".", toolchain;
  int index = -1;
  bool list = false, verify = false, out_given = false;
};

void print_check(const triton::StageCheck& s) {
  if (!s.note.empty()) {
    std::cout << fmt::format("  {:<22} {}\n", s.stage, s.note);
  } else if (s.identical) {
    std::cout << fmt::format("  {:<22} identical\n", s.stage);
  } else if (s.diff.line == 0) {
    std::cout << fmt::format("  {:<22} differs: trace {}, kbisect {}\n", s.stage, s.diff.expected, s.diff.got);
  } else {
    std::cout << fmt::format("  {:<22} differs at line {} (locations and debug sections removed):\n"
                             "    trace:   {}\n    kbisect: {}\n", s.stage, s.diff.line, s.diff.expected, s.diff.got);
  }
}

// --verify: 0 when every stage of every chosen compilation is identical, 1 otherwise.
int verify(const Opts& o, const triton::Trace& t) {
  std::vector<const triton::TraceCompilation*> chosen;
  if (!o.kernel.empty() || o.index >= 0) {
    const auto index = o.index < 0 ? std::nullopt : std::optional<size_t>(size_t(o.index));
    chosen.push_back(&triton::choose_compilation(t, o.kernel, index));
  } else {
    for (const auto& c : t.compilations) chosen.push_back(&c);
  }
  const std::string work = temp_dir("kb-verify");
  bool all = true;
  try {
    for (const auto* c : chosen) {
      const triton::VerifyResult r = triton::verify_compilation(t, *c, o.toolchain, work, o.out_given ? o.out_dir : "");
      std::cout << fmt::format("{} #{} (line {}, {}, triton {}) recompiled with {}:\n", r.kernel, r.index, r.line, r.target,
                               r.release, r.toolchain);
      if (!r.failure.empty()) std::cout << fmt::format("  recompile failed: {}\n", r.failure);
      for (const auto& s : r.stages) print_check(s);
      all = all && r.identical();
    }
  } catch (...) {
    remove_tree(work);
    throw;
  }
  remove_tree(work);
  std::cout << (all ? "verified: every stage identical\n" : "NOT identical: kbisect's compile differs from the trace's\n");
  return all ? kExitOk : kExitFound;
}

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
  if (o.verify) return verify(o, t);
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
                app->add_flag("--verify", o->verify,
                              "recompile each compilation (or the chosen one) through kbisect and compare every stage "
                              "and the metadata with the trace's; exit 1 on a difference");
                app->add_option("--toolchain", o->toolchain,
                                "with --verify: the Triton toolchain (name or file); default: the preset of the trace's "
                                "release and target");
                auto* out = app->add_option("-o,--out-dir", o->out_dir,
                                            "directory for NAME.yaml and NAME.py; with --verify, where an earlier "
                                            "import wrote them (perhaps edited since): those are verified as they are")
                                ->default_val(".");
                return [o, out] {
                  o->out_given = out->count() > 0;
                  return run(*o);
                };
              });

}  // namespace
}  // namespace kb::cli
