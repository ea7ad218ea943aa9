// kbisect prebuild SWEEP -o DIR: compile a sweep's cases here and write what another machine needs to run
// them without their compilers (docs/triton.md, "Compile here, run there"): DIR/compile holds the builds
// (the files a launch reads: the binary, Triton's metadata, the launch record and the PTX), and
// DIR/triton/triton-X.Y.Z/kbisect-prebuilt.json the identity of every Triton toolchain used, with the cases
// it could not build and why. On the other machine: KBISECT_CACHE_DIR=DIR KBISECT_TRITON_DIR=DIR/triton.
#include <unistd.h>

#include <filesystem>
#include <iostream>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "backends/cache.h"
#include "backends/triton/prebuilt.h"
#include "cli/command.h"
#include "cli/exit_codes.h"
#include "cli/terminal_log.h"
#include "core/error.h"
#include "core/fsutil.h"
#include "harness/results.h"
#include "harness/runner.h"
#include "harness/sweep.h"

namespace kb::cli {
namespace {

namespace fs = std::filesystem;

struct Opts {
  std::string file, out, filter;
  std::vector<std::string> toolchains;
  int jobs = 0;
};

// The files of a cache entry a run on another machine reads besides the binary and artifact.json (written
// with the binary's new place); the IR dumps stay here.
const char* const kRunFiles[] = {"kernel.json", "launch.json", "kernel.ptx"};

int64_t copy_entry(const Artifact& a, const std::string& src_dir, const std::string& dst_root) {
  const std::string dst = fmt::format("{}/compile/{}/{}", dst_root, a.cache_key.substr(0, 2), a.cache_key);
  make_dirs(dst);
  int64_t bytes = 0;
  std::vector<std::string> names(std::begin(kRunFiles), std::end(kRunFiles));
  names.push_back(fs::path(a.binary_path).filename().string());
  for (const auto& n : names) {
    const std::string from = src_dir + "/" + n;
    if (!file_exists(from)) continue;
    std::error_code ec;
    fs::copy_file(from, dst + "/" + n, fs::copy_options::overwrite_existing, ec);
    if (ec) throw EnvError(fmt::format("{}: cannot copy into {}: {}", from, dst, ec.message()));
    bytes += int64_t(fs::file_size(from));
  }
  Artifact moved = a;  // the record names the binary where it now is (a copy elsewhere is rebased on read)
  moved.binary_path = dst + "/" + fs::path(a.binary_path).filename().string();
  moved.cache_hit = false;
  write_file_atomic(dst + "/artifact.json", artifact_to_json(moved));
  return bytes;
}

int run(const Opts& o) {
  if (o.out.empty()) throw InputError("kbisect prebuild: -o DIR is required");
  if (o.jobs < 0) throw InputError(fmt::format("--jobs {} must be 0 (one per core) or more", o.jobs));
  Sweep sw = load_sweep(o.file, SweepOptions{o.toolchains, o.filter, ""});
  if (sw.cases.empty()) throw InputError(fmt::format("{}: no cases left after --filter", o.file));
  CompileCache cache;
  precompile(sw, cache, o.jobs, progress_log());
  std::set<std::string> done;
  std::vector<std::pair<std::string, triton::NotBuilt>> not_built;
  int built = 0, skipped = 0, failed = 0;
  int64_t bytes = 0;
  for (const auto& pc : sw.cases) {
    if (pc.skip_reason) continue;  // the other machine decides the same skip itself
    const CompileRequest req = compile_request(pc);
    const std::string key = cache.key(req);
    if (!done.insert(key).second) continue;
    try {
      const Artifact a = cache.compile(backend_for(*pc.toolchain), req);
      bytes += copy_entry(a, fs::path(a.binary_path).parent_path().string(), o.out);
      ++built;
    } catch (const CompileSkipped& e) {
      not_built.push_back({pc.toolchain->name, {key, pc.c.id(), "skipped", e.what()}});
      ++skipped;
    } catch (const CompileError& e) {
      not_built.push_back({pc.toolchain->name, {key, pc.c.id(), "failed", e.what()}});
      ++failed;
      std::cerr << fmt::format("prebuild: {}: failed: {}\n", pc.c.id(), e.what());
    }
  }
  std::vector<Toolchain> tcs;
  for (const auto& t : sw.toolchains) tcs.push_back(*t);
  for (const auto& pc : sw.cases) tcs.push_back(*pc.toolchain);  // a benchmark's own toolchains
  const nlohmann::json env = describe_environment();
  const std::string made_on = fmt::format("{} ({})", env.value("host", "?"), env.value("cpu", "?"));
  const auto records = triton::write_prebuilt_records(o.out, tcs, not_built, made_on);
  std::cout << fmt::format("prebuilt {} builds ({:.1f} MiB) into {}/compile; {} skipped, {} failed\n", built,
                           double(bytes) / 1048576.0, o.out, skipped, failed);
  for (const auto& r : records) std::cout << "record: " << r << "\n";
  std::cout << fmt::format("run them elsewhere with KBISECT_CACHE_DIR={} KBISECT_TRITON_DIR={}/triton\n", o.out, o.out);
  return failed ? kExitFound : kExitOk;
}

Registrar reg("prebuild", "Compile a sweep's cases here, for a machine without the compilers (a GPU node): builds and Triton identities into DIR",
              [](CLI::App* app) {
                auto o = std::make_shared<Opts>();
                app->add_option("file", o->file, "sweep YAML file")->required();
                app->add_option("-o,--out", o->out, "output directory")->required();
                app->add_option("--filter", o->filter, "regex on case ids (kernel[params]/dtype/MxNxK/toolchain)");
                app->add_option("--toolchain", o->toolchains, "toolchain name or YAML file; overrides the sweep's (repeatable)");
                app->add_option("--jobs", o->jobs, "builds compiled at once (0: one per core)")->capture_default_str();
                app->footer("Exit codes: 0 every case built or skipped, 1 a case failed to compile, 2 bad input, "
                            "3 environment missing.");
                return [o] { return run(*o); };
              });

}  // namespace
}  // namespace kb::cli
