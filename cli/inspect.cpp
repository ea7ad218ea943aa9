// kbisect inspect KERNEL --toolchain T [--param K=V ...]: compile only and print static metrics.
#include <iostream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "backends/backend.h"
#include "backends/cache.h"
#include "cli/command.h"
#include "core/error.h"
#include "harness/sweep.h"
#include "harness/tuned_table.h"

namespace kb::cli {
namespace {

struct Opts {
  std::string kernel, toolchain, dtype = "f32", config, tuned_table;
  std::vector<std::string> params;
  bool json = false, show_log = false;
};

// The tuned entries for this kernel, toolchain build, dtype and machine, marking the one these params are.
void print_tuned(const Opts& o, const KernelDecl& k, const Toolchain& tc, DType dt, const Params& full) {
  const std::string path = o.tuned_table.empty() ? default_tuned_table_path() : o.tuned_table;
  if (path.empty()) return;
  for (const auto& e : TunedTable::load(path).for_kernel(machine_key(tc), k.backend, k.name))
    if (e.toolchain_identity == tc.identity && e.dtype == dt)
      std::cout << fmt::format("tuned       {} [{}] {}{}\n", e.shape.str(), e.params.str(), e.method,
                               e.params == full ? " (these params)" : "");
}

int run(const Opts& o) {
  Toolchain tc = find_toolchain(o.toolchain);
  resolve_identity(tc);
  const KernelDecl& k = find_kernel(tc.backend, o.kernel);
  Params given;
  if (!o.config.empty()) {
    bool found = false;
    for (const auto& [n, p] : k.configs)
      if (n == o.config) {
        given = p;
        found = true;
      }
    if (!found) throw InputError(fmt::format("--config: kernel {}/{} has no config '{}'", k.backend, k.name, o.config));
  }
  for (const auto& kv : o.params) {
    auto eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) throw InputError(fmt::format("--param '{}' must be NAME=VALUE", kv));
    given.set(kv.substr(0, eq), parse_param_value(kv.substr(eq + 1)));
  }
  DType dt = parse_dtype(o.dtype);
  Params full = k.complete(given);
  if (!k.supports(dt)) throw InputError(fmt::format("kernel {}/{} does not support dtype {}", k.backend, k.name, o.dtype));
  if (k.check_params)
    if (auto why = k.check_params(full, dt, tc.target))
      throw InputError(fmt::format("{}/{}[{}] with {}: {}", k.backend, k.name, full.str(), tc.name, *why));
  CompileRequest req;
  req.kernel = &k;
  req.params = full;
  req.dtype = dt;
  req.toolchain = &tc;
  req.kernel_dir = kernel_dir();
  CompileCache cache;
  Artifact a = cache.compile(backend_for(tc), req);
  if (o.json) {
    auto j = nlohmann::json::parse(artifact_to_json(a));
    j["cache_hit"] = a.cache_hit;
    j["toolchain_version"] = tc.version_text;
    if (!o.show_log) j.erase("log");
    std::cout << j.dump(2) << "\n";
    return 0;
  }
  std::cout << fmt::format("kernel      {}/{} [{}] {}\n", k.backend, k.name, full.str(), to_string(dt));
  std::cout << fmt::format("toolchain   {} ({}) {}\n", tc.name, tc.kind, tc.version_text);
  std::cout << fmt::format("identity    {}\n", tc.identity);
  if (!a.target.empty()) std::cout << fmt::format("target      {}\n", a.target);
  std::cout << fmt::format("binary      {}\n", a.binary_path);
  std::cout << fmt::format("code_hash   {}\n", a.code_hash);
  std::cout << fmt::format("code_bytes  {}\n", a.code_bytes);
  std::cout << fmt::format("compile_s   {:.3f}{}\n", a.compile_s, a.cache_hit ? " (cached)" : "");
  for (const auto& [n, v] : a.metrics) std::cout << fmt::format("{:<11} {}\n", n, v);
  print_tuned(o, k, tc, dt, full);
  if (o.show_log && !a.log.empty()) std::cout << "log:\n" << a.log << "\n";
  return 0;
}

Registrar reg("inspect", "Compile one kernel instance (no run) and print its static metrics", [](CLI::App* app) {
  auto o = std::make_shared<Opts>();
  app->add_option("kernel", o->kernel, "kernel name (see kbisect list)")->required();
  app->add_option("--toolchain", o->toolchain, "toolchain name or YAML file")->required();
  app->add_option("--param", o->params, "NAME=VALUE (repeatable)");
  app->add_option("--config", o->config, "start from a built-in config (e.g. best)");
  app->add_option("--dtype", o->dtype, "f32, f16 or bf16")->default_val("f32");
  app->add_option("--tuned-table", o->tuned_table, "tuned-config table to show entries from ($KBISECT_TUNED_TABLE)");
  app->add_flag("--json", o->json, "print JSON");
  app->add_flag("--log", o->show_log, "print the compiler's output");
  return [o] { return run(*o); };
});

}  // namespace
}  // namespace kb::cli
