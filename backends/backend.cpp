#include "backends/backend.h"

#include <filesystem>
#include <memory>

#include <fmt/format.h>

#include "core/error.h"
#include "core/fsutil.h"
#include "core/hash.h"
#include "core/process.h"

namespace kb {

std::string kernel_dir() {
  namespace fs = std::filesystem;
  if (const char* d = getenv("KBISECT_KERNEL_DIR"); d && *d) return d;
  std::string exe = executable_path();
  if (!exe.empty()) {
    fs::path installed = fs::path(exe).parent_path().parent_path() / "share" / "kbisect" / "kernels";
    if (fs::is_directory(installed)) return installed.string();
  }
  return KBISECT_SOURCE_KERNEL_DIR;
}

std::shared_ptr<const OutputSnapshot> Executable::snapshot_outputs() {
  throw Error("this backend does not run users' Triton kernels: it has no outputs to keep");
}

OutputCheck Executable::compare_outputs(const OutputSnapshot&, const ToleranceOf&) {
  throw Error("this backend does not run users' Triton kernels: it has no outputs to compare");
}

std::string kernel_source_path(const std::string& kernel_dir, const std::string& rel) {
  return !rel.empty() && rel[0] == '/' ? rel : kernel_dir + "/" + rel;
}

void identify_toolchain(Toolchain& tc, const std::function<void(Hasher&)>& add_own) {
  Hasher h;
  h.add("kbisect-toolchain-v1").add(tc.backend).add(tc.kind).add(tc.target);
  for (const auto& f : tc.flags) h.add(f);
  for (const auto& [k, v] : tc.env) h.add(k).add(v);
  add_own(h);
  tc.identity = h.hex();
}

std::string sha256_resolved(const std::string& path) {
  std::error_code ec;
  auto real = std::filesystem::canonical(path, ec);
  return sha256_file(ec ? path : real.string());
}

void identify_compiler_binary(Toolchain& tc, const std::vector<std::string>& version_argv) {
  identify_toolchain(tc, [&](Hasher& h) {
    auto hash_program = [&](const std::string& role, const std::string& prog) {
      std::string path = which(prog);
      if (path.empty()) throw EnvError(fmt::format("toolchain '{}': {} not found: {}", tc.name, role, prog));
      h.add(role).add(sha256_resolved(path));
    };
    if (!tc.compiler.empty()) hash_program("compiler", tc.compiler);
    for (const auto& [role, prog] : tc.tools) hash_program(role, prog);
    if (version_argv.empty()) return;
    RunOptions o;
    o.timeout_s = 60;
    o.env_set = tc.env;
    auto r = run_process(version_argv, o);
    std::string text = r.out + r.err;
    h.add(text);
    tc.version_text = text.substr(0, text.find('\n'));
  });
}

Artifact make_artifact(const CompileRequest& req, const std::string& binary_path, const std::string& entry,
                       double compile_s, const std::string& log) {
  Artifact a;
  a.kernel = req.kernel->name;
  a.backend = req.kernel->backend;
  a.params = req.params;
  a.dtype = req.dtype;
  a.toolchain = req.toolchain->name;
  a.toolchain_identity = req.toolchain->identity;
  a.target = req.toolchain->target;
  a.binary_path = binary_path;
  a.entry = entry;
  a.compile_s = compile_s;
  a.log = tail(log, req.log_limit);
  return a;
}

std::vector<std::string> param_defines(const Params& params) {
  std::vector<std::string> v;
  for (const auto& [n, val] : params.values()) v.push_back(fmt::format("-DKB_{}={}", n, to_string(val)));
  return v;
}

std::string dtype_define(DType d) {
  switch (d) {
    case DType::f32: return "-DKB_DTYPE_F32=1";
    case DType::f16: return "-DKB_DTYPE_F16=1";
    case DType::bf16: return "-DKB_DTYPE_BF16=1";
  }
  return "";
}

void Backend::identify(Toolchain& tc) const {
  std::vector<std::string> argv;
  if (!tc.compiler.empty()) argv = {tc.compiler, "--version"};
  identify_compiler_binary(tc, argv);
}

}  // namespace kb
