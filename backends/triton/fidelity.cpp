#include "backends/triton/fidelity.h"

#include <filesystem>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "backends/backend.h"
#include "backends/cache.h"
#include "backends/triton/triton_compile.h"
#include "backends/triton/user_kernel.h"
#include "core/error.h"
#include "core/fsutil.h"

namespace kb::triton {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string rtrim(std::string s) {
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.pop_back();
  return s;
}

bool starts_with_word(const std::string& line, const char* word) {
  const size_t b = line.find_first_not_of(" \t");
  return b != std::string::npos && line.compare(b, std::string(word).size(), word) == 0;
}

// Removes every ` loc(...)` (balanced parentheses, strings skipped) from an MLIR line.
std::string drop_locations(const std::string& line) {
  std::string out;
  for (size_t i = 0; i < line.size();) {
    if (line.compare(i, 4, "loc(") == 0 && (i == 0 || !isalnum((unsigned char)line[i - 1]))) {
      int depth = 0;
      bool quoted = false;
      size_t j = i + 3;
      for (; j < line.size(); ++j) {
        const char c = line[j];
        if (quoted) {
          if (c == '\\') ++j;
          else if (c == '"') quoted = false;
          continue;
        }
        if (c == '"') quoted = true;
        else if (c == '(') ++depth;
        else if (c == ')' && --depth == 0) break;
      }
      while (!out.empty() && out.back() == ' ') out.pop_back();
      i = j + 1;
      continue;
    }
    out += line[i++];
  }
  return out;
}

// Removes `, !dbg !N` and ` !dbg !N` attachments from an LLVM IR line.
std::string drop_dbg(std::string line) {
  for (size_t p = line.find("!dbg !"); p != std::string::npos; p = line.find("!dbg !")) {
    size_t e = p + 6;
    while (e < line.size() && isdigit((unsigned char)line[e])) ++e;
    size_t b = p;
    while (b > 0 && line[b - 1] == ' ') --b;
    if (b > 0 && line[b - 1] == ',') --b;
    line.erase(b, e - b);
  }
  return line;
}

bool mlir_stage(const std::string& s) { return s == "ttir" || s == "ttgir"; }

}  // namespace

std::string normalize_stage(const std::string& stage, const std::string& text) {
  std::istringstream in(text);
  std::string out, line;
  bool in_debug_section = false;
  while (std::getline(in, line)) {
    if (mlir_stage(stage)) {
      if (starts_with_word(line, "#loc")) continue;
      line = drop_locations(line);
    } else if (stage == "llir") {
      if (starts_with_word(line, "!") || starts_with_word(line, "source_filename") || starts_with_word(line, "; ModuleID") ||
          starts_with_word(line, "#dbg_") || line.find("@llvm.dbg.") != std::string::npos)
        continue;
      line = drop_dbg(line);
    } else {  // ptx, amdgcn
      if (starts_with_word(line, ".section")) {
        in_debug_section = line.find(".debug") != std::string::npos;
        if (in_debug_section) continue;
      } else if (in_debug_section) {
        // PTX closes a debug section with '}'; AMDGCN runs one until the next section or text directive.
        if (stage == "ptx" && rtrim(line) == "\t}") {
          in_debug_section = false;
          continue;
        }
        if (stage == "ptx" || !(starts_with_word(line, ".text") || starts_with_word(line, ".p2align") ||
                                starts_with_word(line, ".amdgpu_metadata") || starts_with_word(line, ".globl")))
          continue;
        in_debug_section = false;
      }
      if (starts_with_word(line, ".file") || starts_with_word(line, ".loc")) continue;
    }
    line = rtrim(line);
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    out += line;
    out += '\n';
  }
  return out;
}

FirstDifference first_difference(const std::string& expected, const std::string& got) {
  std::istringstream a(expected), b(got);
  std::string la, lb;
  for (size_t n = 1;; ++n) {
    const bool ha = bool(std::getline(a, la)), hb = bool(std::getline(b, lb));
    if (!ha && !hb) return {};
    if (!ha) la.clear();
    if (!hb) lb.clear();
    if (!ha || !hb || la != lb) return {n, la, lb};
  }
}

bool VerifyResult::identical() const {
  if (!failure.empty()) return false;
  for (const auto& s : stages)
    if (!s.identical && s.note.empty()) return false;
  return !stages.empty();
}

std::vector<StageCheck> compare_metadata(const std::string& trace_json, const std::string& ours_json) {
  const json t = json::parse(trace_json, nullptr, false), o = json::parse(ours_json, nullptr, false);
  std::vector<StageCheck> out;
  for (const char* f : {"num_warps", "num_stages", "shared", "num_ctas", "cluster_dims"}) {
    if (!t.is_object() || !t.contains(f)) continue;
    StageCheck s{fmt::format("metadata.{}", f)};
    const std::string want = t[f].dump(), have = o.is_object() && o.contains(f) ? o[f].dump() : "(absent)";
    s.identical = want == have;
    if (!s.identical) s.diff = {0, fmt::format("{}: {}", f, want), fmt::format("{}: {}", f, have)};
    out.push_back(s);
  }
  return out;
}

namespace {

// The arch of a trace's target ("cuda sm_90" -> backend cuda, arch "90"; "hip gfx942").
std::pair<std::string, std::string> trace_target(const TraceCompilation& c) {
  const size_t sp = c.target.find(' ');
  if (sp == std::string::npos) throw InputError(fmt::format("line {}: compilation of {} names no target", c.line, c.kernel));
  std::string backend = c.target.substr(0, sp), arch = c.target.substr(sp + 1);
  if (arch.rfind("sm_", 0) == 0) arch = arch.substr(3);
  return {backend, arch};
}

Toolchain toolchain_for(const Trace& t, const TraceCompilation& c, const std::string& name, const std::string& source) {
  if (!name.empty()) {
    Toolchain tc = find_toolchain(name);
    resolve_identity(tc);
    return tc;
  }
  const auto [backend, arch] = trace_target(c);
  if (c.triton_version.empty())
    throw InputError(fmt::format("{}:{}: the compilation of {} does not say its Triton release (its metadata has no "
                                 "triton_version, as before 3.3): name the toolchain with --toolchain", t.path, c.line, c.kernel));
  const bool tlx = source.find("tlx") != std::string::npos;
  std::optional<Toolchain> best;
  bool release_here = false;
  for (Toolchain tc : presets(backend)) {
    if (triton_release(tc) != c.triton_version) continue;
    release_here = true;
    if (parse_target(tc).arch != arch) continue;
    const bool has_tlx = tc.name.find("-tlx-") != std::string::npos;
    if (!best || (has_tlx == tlx && (best->name.find("-tlx-") != std::string::npos) != tlx)) best = tc;
  }
  if (!best && !release_here)
    throw EnvError(fmt::format("{}:{}: {} was compiled by Triton {}, which is not installed here: `pip install "
                               "triton=={}` into {}/triton-{} (or KBISECT_TRITON_RELEASES={} scripts/install-deps), or "
                               "name a toolchain with --toolchain", t.path, c.line, c.kernel, c.triton_version,
                               c.triton_version, triton_env_root(), c.triton_version, c.triton_version));
  if (!best)
    throw EnvError(fmt::format("{}:{}: no preset of Triton {} compiles for {} ({}): name a toolchain file with "
                               "`kind: triton` and `target:` for it (--toolchain FILE)", t.path, c.line, c.triton_version,
                               c.target, c.kernel));
  resolve_identity(*best);
  return *best;
}

const char* stage_file(const std::string& stage) {
  if (stage == "ttir") return "kernel.ttir";
  if (stage == "ttgir") return "kernel.ttgir";
  if (stage == "llir") return "kernel.llir";
  if (stage == "ptx") return "kernel.ptx";
  return "kernel.amdgcn";
}

}  // namespace

std::string compile_user_kernel(const UserKernel& k, const Toolchain& tc, const std::string& shape, CompileCache cache) {
  const KernelDecl& decl = find_kernel(tc.backend, k.name);
  CompileRequest req;
  req.kernel = &decl;
  req.params = decl.complete({});
  req.dtype = decl.dtypes.front();
  req.toolchain = &tc;
  for (const auto& s : k.shapes)
    if (s.label == shape) req.shape = s;
  req.kernel_dir = kernel_dir();
  return fs::path(cache.compile(backend_for(tc), req).binary_path).parent_path().string();
}

VerifyResult verify_compilation(const Trace& t, const TraceCompilation& c, const std::string& toolchain,
                                const std::string& work_dir, const std::string& imported_dir) {
  VerifyResult r;
  r.kernel = c.kernel;
  r.index = c.index;
  r.line = c.line;
  r.target = c.target;
  std::string yaml = imported_dir.empty() ? "" : imported_dir + "/" + imported_name(t, c) + ".yaml";
  if (yaml.empty() || !file_exists(yaml))
    yaml = write_kernel_files(t, c, fmt::format("{}/{}-{}", work_dir, c.kernel, c.index)).yaml_path;
  const UserKernel& k = load_user_kernel(yaml);
  const Toolchain tc = toolchain_for(t, c, toolchain, read_file(k.spec.source));
  r.toolchain = tc.name;
  r.release = triton_release(tc);
  std::string out;
  try {
    out = compile_user_kernel(k, tc, k.shapes.empty() ? "" : k.shapes.front().label, CompileCache());
  } catch (const Error& e) {
    r.failure = e.what();
    return r;
  }
  for (const char* stage : {"ttir", "ttgir", "llir", "ptx", "amdgcn"}) {
    auto it = c.stages.find(stage);
    const std::string mine = out + "/" + stage_file(stage);
    if (it == c.stages.end()) continue;
    StageCheck s{stage};
    if (!file_exists(mine)) {
      s.diff = {1, "(the trace's " + std::string(stage) + ")", "(kbisect's compile wrote none)"};
      r.stages.push_back(s);
      continue;
    }
    s.diff = first_difference(normalize_stage(stage, it->second), normalize_stage(stage, read_file(mine)));
    s.identical = s.diff.line == 0;
    r.stages.push_back(s);
  }
  const std::string meta = out + "/kernel.json";
  for (auto& m : compare_metadata(c.metadata_json, file_exists(meta) ? read_file(meta) : "{}")) r.stages.push_back(m);
  return r;
}

}  // namespace kb::triton
