#include "backends/triton/triton_compile.h"

#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <cmath>
#include <mutex>
#include <set>
#include <sstream>
#include <tuple>

#include <fmt/format.h>

#include "backends/cache.h"
#include "backends/triton/expr.h"
#include "backends/triton/prebuilt.h"
#include "backends/triton/user_kernel.h"
#include "core/error.h"
#include "core/fsutil.h"
#include "core/hash.h"
#include "core/process.h"

extern char** environ;

namespace kb::triton {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string triton_dtype(DType d) {
  switch (d) {
    case DType::f16: return "fp16";
    case DType::bf16: return "bf16";
    case DType::f32: return "fp32";
  }
  return "fp32";
}

// The driver's last stdout line is its verdict (a JSON object); anything before it is the compiler's chatter.
json driver_verdict(const RunResult& r, const std::string& what) {
  std::string out = r.out;
  while (!out.empty() && isspace((unsigned char)out.back())) out.pop_back();
  const size_t nl = out.rfind('\n');
  const std::string last = nl == std::string::npos ? out : out.substr(nl + 1);
  json v = json::parse(last, nullptr, false);
  if (v.is_discarded() || !v.is_object() || !v.contains("status"))
    throw CompileError(fmt::format("{}: the Triton compile driver ended without a verdict ({})", what, r.status_text()),
                       tail(r.out + r.err, 3000));
  return v;
}

// Environment knobs this process would hand the compiler that change what Triton emits.
std::vector<std::pair<std::string, std::string>> inherited_knobs() {
  std::vector<std::pair<std::string, std::string>> out;
  for (char** e = environ; e && *e; ++e) {
    std::string kv(*e);
    const size_t eq = kv.find('=');
    if (eq == std::string::npos) continue;
    const std::string k = kv.substr(0, eq);
    if (k == "TRITON_CACHE_DIR" || k == "TRITON_HOME") continue;  // where, not what
    if (k.rfind("TRITON_", 0) == 0 || k.rfind("AMDGCN_", 0) == 0 || k == "MLIR_ENABLE_DUMP" ||
        k == "LLVM_IR_ENABLE_DUMP")
      out.emplace_back(k, kv.substr(eq + 1));
  }
  std::sort(out.begin(), out.end());
  return out;
}

// SHA-256 of a large file (libtriton is 300-550 MB), remembered per process by path, size and mtime.
std::string big_file_sha(const std::string& path) {
  static std::mutex mu;
  static std::map<std::string, std::string> memo;
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) return "missing:" + path;
  const std::string key = fmt::format("{}|{}|{}.{}", path, st.st_size, st.st_mtim.tv_sec, st.st_mtim.tv_nsec);
  {
    std::lock_guard<std::mutex> lock(mu);
    if (auto it = memo.find(key); it != memo.end()) return it->second;
  }
  std::string h = sha256_resolved(path);
  std::lock_guard<std::mutex> lock(mu);
  memo[key] = h;
  return h;
}

bool version_at_least(const std::string& have, const std::string& want) {
  auto parts = [](const std::string& v) {
    std::vector<int> out;
    size_t i = 0;
    while (i < v.size() && out.size() < 3) {
      size_t j = i;
      while (j < v.size() && isdigit((unsigned char)v[j])) ++j;
      out.push_back(j > i ? std::stoi(v.substr(i, j - i)) : 0);
      if (j >= v.size() || v[j] != '.') break;
      i = j + 1;
    }
    out.resize(3, 0);
    return out;
  };
  return parts(have) >= parts(want);
}

}  // namespace

Target parse_target(const Toolchain& tc) {
  const std::string& t = tc.target;
  if (t.rfind("sm_", 0) == 0) {
    std::string digits;
    for (size_t i = 3; i < t.size() && isdigit((unsigned char)t[i]); ++i) digits += t[i];
    if (!digits.empty()) return {"cuda", digits, 32};
  }
  if (t.rfind("gfx", 0) == 0 && t.size() > 3) return {"hip", t, 64};
  throw InputError(fmt::format("toolchain '{}': target '{}' is not a Triton target (sm_80, sm_90a, sm_100a, "
                               "gfx90a, gfx942, ...)", tc.name, t));
}

json flag_options(const Toolchain& tc) {
  json o = json::object();
  for (const auto& f : tc.flags) {
    const size_t eq = f.find('=');
    if (eq == std::string::npos || eq == 0)
      throw InputError(fmt::format("toolchain '{}': flag '{}' is not a Triton option (key=value, e.g. "
                                   "enable_fp_fusion=false)", tc.name, f));
    const std::string k = f.substr(0, eq), v = f.substr(eq + 1);
    if (v == "true" || v == "false") o[k] = v == "true";
    else if (!v.empty() && std::all_of(v.begin(), v.end(), [](char c) { return isdigit((unsigned char)c) || c == '-'; }))
      o[k] = std::stoll(v);
    else o[k] = v;
  }
  return o;
}

namespace {

// A typed constexpr value as the driver reads it (kernels/triton/kb_triton_aot.py, typed_value).
json constexpr_json(const ParamValue& v) {
  if (auto i = std::get_if<int64_t>(&v)) return *i;
  if (auto f = std::get_if<double>(&v)) return std::isfinite(*f) ? json(*f) : json{{"float", to_string(v)}};
  if (auto b = std::get_if<bool>(&v)) return *b;
  if (std::holds_alternative<NoneValue>(v)) return nullptr;
  if (auto d = std::get_if<DtypeValue>(&v)) return {{"dtype", d->name}};
  return std::get<std::string>(v);
}

bool is_pointer(const std::string& type) { return !type.empty() && type[0] == '*'; }

// Without a shape to take values from (kbisect's own kernels, a compile-only case), each argument gets a
// value of the kind and properties its declaration states: the JIT then specializes it as it would such a
// value at a launch (16 is divisible by 16, 17 is not and is not 1; an i64 is a value past 32 bits).
json representative_value(const TritonArg& a, const std::string& type, bool divisible) {
  if (is_pointer(type))
    return {{"tensor", type.substr(1)}, {"aligned", divisible}, {"bytes", a.large ? int64_t(1) << 31 : int64_t(1) << 20}};
  if (!tensordesc_block(type).empty()) {
    const auto block = tensordesc_block(type);
    std::vector<int64_t> shape, strides(block.size(), 1);
    for (int64_t b : block) shape.push_back(4 * b);
    for (size_t i = block.size() - 1; i-- > 0;) strides[i] = strides[i + 1] * shape[i + 1];
    return {{"tensordesc", {{"dtype", tensor_element_type(type)}, {"shape", shape}, {"strides", strides},
                            {"block", block}, {"bytes", int64_t(1) << 20}}}};
  }
  if (type == "fp32" || type == "fp64" || type == "fp16" || type == "bf16") return {{"float", 1.5}};
  if (type == "i1") return {{"bool", true}};
  const bool wide = type == "i64" || type == "u64";
  const int64_t base = wide ? int64_t(1) << 32 : 16;
  return {{"int", divisible ? base : base + 1}};
}

// An argument's value from the shape's launch arguments (a user kernel's file), as the JIT would see it.
json launch_value(const TritonArg& a, const LaunchArgs& la) {
  if (auto t = la.tensors.find(a.name); t != la.tensors.end()) {
    const TensorArg& ta = t->second;
    if (!tensordesc_block(a.type).empty())
      return {{"tensordesc", {{"dtype", ta.dtype}, {"shape", ta.shape}, {"strides", ta.strides},
                              {"block", tensordesc_block(a.type)}, {"bytes", ta.storage_bytes()},
                              {"padding", ta.padding_nan ? "nan" : "zero"}}}};
    return {{"tensor", ta.dtype}, {"aligned", true}, {"bytes", ta.storage_bytes()}};
  }
  if (auto i = la.ints.find(a.name); i != la.ints.end()) return a.type == "i1" ? json{{"bool", i->second != 0}} : json{{"int", i->second}};
  if (auto r = la.reals.find(a.name); r != la.reals.end()) return {{"float", r->second}};
  throw InputError(fmt::format("argument '{}' has no value in the shape's args", a.name));
}

const LaunchArgs* launch_args_of(const CompileRequest& req) {
  const UserKernel* u = find_user_kernel(req.kernel->name);
  if (!u || req.shape.label.empty()) return nullptr;
  auto it = u->launches.find(req.shape.label);
  return it == u->launches.end() ? nullptr : &it->second;
}

}  // namespace

std::string jit_specialization_key(const CompileRequest& req) {
  const LaunchArgs* la = launch_args_of(req);
  const TritonSpec* spec = la ? find_triton_spec(req.kernel->name) : nullptr;
  if (!spec) return "";
  std::string key = "jit-classes-v1";
  for (const auto& a : spec->args) {
    if (a.type == "constexpr") continue;
    key += ";" + a.name + ":";
    if (auto t = la->tensors.find(a.name); t != la->tensors.end()) {
      key += t->second.dtype + (t->second.storage_bytes() <= (int64_t(1) << 31) - 1 ? "S" : "");
      if (!tensordesc_block(a.type).empty()) key += fmt::format("desc{}", t->second.padding_nan ? "nan" : "");
    } else if (auto i = la->ints.find(a.name); i != la->ints.end()) {
      const int64_t v = i->second;
      if (a.type == "i1") key += v ? "true" : "false";
      else if (v == 1) key += "=1";
      else key += std::string(v >= -(int64_t(1) << 31) && v < (int64_t(1) << 31) ? "i32" : "i64") + (v % 16 == 0 ? "D" : "");
    } else {
      key += "f";
    }
  }
  return key;
}

json driver_spec(const CompileRequest& req, const TritonSpec& spec, const std::string& out_dir) {
  const Toolchain& tc = *req.toolchain;
  const Target target = parse_target(tc);
  Bindings b;
  for (const auto& [name, v] : req.params.values())
    if (std::holds_alternative<int64_t>(v)) b[name] = std::get<int64_t>(v);
  b["IEEE"] = req.dtype == DType::f32 ? 1 : 0;
  const bool aligned = req.params.get_int_or("ALIGNED", 1) != 0;
  const LaunchArgs* la = launch_args_of(req);
  json sig = json::array();
  for (const auto& a : spec.args) {
    json arg = {{"name", a.name}};
    if (a.type == "constexpr") {
      arg["type"] = "constexpr";
      if (req.params.has(a.name) && a.value == a.name) arg["value"] = {{"constexpr", constexpr_json(req.params.values().at(a.name))}};
      else if (a.name == "IEEE") arg["value"] = {{"constexpr", eval_int(a.value, b) != 0}};
      else arg["value"] = {{"constexpr", eval_int(a.value, b)}};
    } else {
      arg["type"] = a.type == "*A" || a.type == "*B" ? "*" + triton_dtype(req.dtype) : a.type;
      const bool divisible = a.divisible && (is_pointer(a.type) || aligned);
      arg["value"] = la ? launch_value(a, *la) : representative_value(a, arg["type"], divisible);
    }
    sig.push_back(arg);
  }
  // Compile options: the toolchain's flags, then the kernel's own opt.* parameters over them.
  json options = flag_options(tc);
  for (const auto& [name, v] : req.params.values())  // None: not given (the release's default applies)
    if (is_option_param(name) && !std::holds_alternative<NoneValue>(v)) options[option_name(name)] = constexpr_json(v);
  json unsupported = json::array();
  for (const auto& u : spec.unsupported) {
    json r = {{"backend", u.backend}, {"reason", u.reason}};
    if (!u.arch.empty()) r["arch"] = u.arch;
    if (!u.below.empty()) r["below"] = u.below;
    unsupported.push_back(r);
  }
  for (const auto& a : spec.args)
    if (a.type.rfind("tensordesc<", 0) == 0) {  // Triton 3.3 and older know no tensordesc signature type
      unsupported.push_back({{"backend", target.backend}, {"below", "3.4"},
                             {"reason", fmt::format("{} is a host tensor descriptor ({}): those need Triton 3.4 or later",
                                                    a.name, a.type)}});
      break;
    }
  json tj = {{"backend", target.backend}, {"warp_size", target.warp_size}};
  if (target.backend == "cuda") tj["arch"] = std::stoi(target.arch);
  else tj["arch"] = target.arch;
  return {{"source", kernel_source_path(req.kernel_dir, req.kernel->source)},
          {"function", spec.function_for(tc.target)},
          {"target", tj},
          {"signature", sig},
          {"options", options},
          {"requires", spec.requires_features},
          {"unsupported", unsupported},
          {"out_dir", out_dir}};
}

Compiled compile(const CompileRequest& req) {
  const TritonSpec* spec = find_triton_spec(req.kernel->name);
  if (!spec) throw InputError(fmt::format("{} is not a Triton kernel", req.kernel->name));
  const Toolchain& tc = *req.toolchain;
  if (!tc.prebuilt.empty()) refuse_prebuilt_compile(req, CompileCache().key(req));
  const json sj = driver_spec(req, *spec, req.out_dir);
  const std::string spec_path = req.out_dir + "/spec.json";
  write_file_atomic(spec_path, sj.dump(1));
  RunOptions o;
  o.timeout_s = req.timeout_s;
  o.env_set = tc.env;
  o.max_capture = std::max(o.max_capture, req.log_limit);  // explain reads every per-pass dump
  const std::vector<std::string> argv = {tc.compiler, req.kernel_dir + "/" + kDriverSource, spec_path};
  const RunResult r = run_process(argv, o);
  const std::string what = fmt::format("{} compiling {}", tc.name, req.kernel->name);
  const json v = driver_verdict(r, what);
  const std::string status = v.value("status", ""), reason = v.value("reason", "");
  // The driver's own files (its private Triton cache) are not part of the artifact.
  remove_tree(req.out_dir + "/triton-cache");
  if (status == "skipped") throw CompileSkipped(reason);
  if (status == "broken") throw EnvError(fmt::format("toolchain '{}': {}", tc.name, reason));
  if (status != "ok") {
    std::string log = tail(r.err, 3000);
    if (file_exists(req.out_dir + "/compile-error.txt")) log += read_file(req.out_dir + "/compile-error.txt");
    throw CompileError(fmt::format("{}: {}", what, reason), tail(log, 6000));
  }
  Compiled c;
  c.version = v.value("version", "");
  c.compile_s = v.value("compile_s", r.wall_s);
  c.entry = v.value("name", spec->function);
  c.metadata = json::parse(read_file(req.out_dir + "/kernel.json"));
  c.num_warps = c.metadata.value("num_warps", 4);
  c.shared_bytes = c.metadata.value("shared", int64_t(0));
  const Target target = parse_target(tc);
  c.binary_path = req.out_dir + (target.backend == "cuda" ? "/kernel.cubin" : "/kernel.hsaco");
  if (!file_exists(c.binary_path))
    throw CompileError(fmt::format("{}: triton {} wrote no {}", what, c.version, fs::path(c.binary_path).filename().string()),
                       tail(r.err, 3000));
  if (!spec->expect_ttgir.empty()) {
    const std::string ttgir = file_exists(req.out_dir + "/kernel.ttgir") ? read_file(req.out_dir + "/kernel.ttgir") : "";
    if (ttgir.find(spec->expect_ttgir) == std::string::npos)
      throw CompileSkipped(fmt::format("triton {} on {}: {}", c.version, tc.target, spec->expect_reason));
  }
  // What the compiler printed (the per-pass IR dumps when MLIR_ENABLE_DUMP / LLVM_IR_ENABLE_DUMP ask for
  // them), then what the release's ptxas -v printed.
  c.log = r.err + (file_exists(req.out_dir + "/ptxas.log") ? read_file(req.out_dir + "/ptxas.log") : "");

  // launch.json: the launcher's view (backends/cuda/triton_launch.h reads it).
  // The parameters the binary takes are the ones the JIT left as arguments (an integer equal to 1 became a
  // constant): the driver's list, in order.
  std::set<std::string> kept;
  for (const auto& n : v.value("params", json::array())) kept.insert(n.get<std::string>());
  json params = json::array();
  for (const auto& a : spec->args) {
    if (a.type == "constexpr" || !kept.count(a.name)) continue;
    json p = {{"name", a.name}, {"value", a.value}};
    for (const auto& s : sj["signature"])
      if (s["name"] == a.name) p["type"] = s["type"];
    params.push_back(p);
  }
  json constexprs = json::object();
  for (const auto& s : sj["signature"])
    if (s["type"] == "constexpr") constexprs[s["name"].get<std::string>()] = s["value"]["constexpr"];
  const auto& md = c.metadata;
  json launch = {{"format", "kbisect-triton-launch/1"},
                 {"entry", c.entry},
                 {"triton_version", c.version},
                 {"params", params},
                 {"constexprs", constexprs},
                 {"grid", spec->grid},
                 {"num_warps", c.num_warps},
                 {"num_ctas", md.value("num_ctas", 1)},
                 {"cluster_dims", md.contains("cluster_dims") ? md["cluster_dims"] : json::array({1, 1, 1})},
                 {"shared", c.shared_bytes},
                 {"global_scratch", version_at_least(c.version, "3.3") != 0},
                 {"global_scratch_size", md.value("global_scratch_size", int64_t(0))},
                 {"global_scratch_align", md.value("global_scratch_align", int64_t(1))},
                 {"profile_scratch", version_at_least(c.version, "3.5") != 0},
                 {"profile_scratch_size", md.value("profile_scratch_size", int64_t(0))},
                 {"profile_scratch_align", md.value("profile_scratch_align", int64_t(1))},
                 // per host tensor descriptor argument: how the kernel was lowered (null: not to TMA)
                 {"tensordesc_meta", md.contains("tensordesc_meta") && md["tensordesc_meta"].is_array()
                                         ? md["tensordesc_meta"] : json::array()}};
  write_file_atomic(req.out_dir + "/launch.json", launch.dump(1));
  return c;
}

void identify(Toolchain& tc) {
  parse_target(tc);
  flag_options(tc);
  if (!tc.prebuilt.empty()) return identify_prebuilt(tc);
  RunOptions o;
  o.timeout_s = 120;
  o.env_set = tc.env;
  const std::string driver = kernel_dir() + "/" + kDriverSource;
  if (which(tc.compiler).empty())
    throw EnvError(fmt::format("toolchain '{}': Python not found: {}", tc.name, tc.compiler));
  const RunResult r = run_process({tc.compiler, driver, "--identify"}, o);
  json v;
  try {
    v = driver_verdict(r, fmt::format("toolchain '{}'", tc.name));
  } catch (const CompileError& e) {
    throw EnvError(fmt::format("toolchain '{}': {} cannot identify its Triton: {}", tc.name, tc.compiler,
                               tail(r.err, 300)));
  }
  if (v.value("status", "") != "ok") throw EnvError(fmt::format("toolchain '{}': {}", tc.name, v.value("reason", "")));
  identify_toolchain(tc, [&](Hasher& h) {
    h.add("python").add(sha256_resolved(which(tc.compiler)));
    h.add("triton").add(v.value("version", "")).add(v.value("git", ""));
    const std::string lib = v.value("libtriton", ""), ptxas = v.value("ptxas", "");
    h.add("libtriton").add(lib.empty() ? "none" : big_file_sha(lib));
    const Target target = parse_target(tc);
    if (target.backend == "cuda") {
      h.add("ptxas").add(ptxas.empty() ? "none" : big_file_sha(ptxas));
      // sm_100 and later are assembled by the release's ptxas-blackwell (3.3+), when it has one.
      const std::string bw = v.value("ptxas_blackwell", "");
      if (std::stoi(target.arch) >= 100 && !bw.empty()) h.add("ptxas-blackwell").add(big_file_sha(bw));
    }
    // Compiler plugins (TRITON_PLUGIN_PATHS, e.g. TLX's libutlx.so): each library's bytes and the plugin
    // package's version.
    for (const auto& p : v.value("plugins", json::array())) {
      const std::string path = p.get<std::string>();
      h.add("plugin").add(file_exists(path) ? big_file_sha(path) : "missing:" + path);
    }
    const std::string utlx = v.value("utlx", "");
    if (!utlx.empty()) h.add("triton-utlx").add(utlx);
    for (const auto& [k, val] : inherited_knobs())
      if (!tc.env.count(k)) h.add(k).add(val);
    const std::string git = v.value("git", "");
    tc.version_text = fmt::format("triton {}{}{} ({})", v.value("version", "?"), git.empty() ? "" : " git " + git,
                                  utlx.empty() ? "" : " + triton-utlx " + utlx, v.value("root", ""));
  });
}

std::string triton_release(const Toolchain& tc) {
  std::istringstream in(tc.version_text);
  std::string word, release;
  in >> word >> release;
  return word == "triton" ? release : "";
}

std::string triton_env_root() {
  if (const char* d = getenv("KBISECT_TRITON_DIR"); d && *d) return d;
  if (const char* x = getenv("XDG_CACHE_HOME"); x && *x) return std::string(x) + "/kbisect/triton";
  const char* home = getenv("HOME");
  return std::string(home && *home ? home : "/tmp") + "/.cache/kbisect/triton";
}

std::vector<Toolchain> presets(const std::string& backend) {
  std::vector<Toolchain> out;
  std::error_code ec;
  const fs::path root = triton_env_root();
  if (!fs::is_directory(root, ec)) return out;
  struct Env {
    std::string version, utlx;  // triton's, and the TLX plugin's when the environment has one
    fs::path python;
    bool operator<(const Env& o) const { return std::tie(version, utlx) < std::tie(o.version, o.utlx); }
  };
  std::vector<Env> envs;
  std::vector<Toolchain> prebuilt;
  for (const auto& e : fs::directory_iterator(root, ec)) {
    const fs::path py = e.path() / "bin" / "python";
    if (!fs::exists(py, ec)) {  // no Triton here, but perhaps its builds (`kbisect prebuild`)
      if (fs::exists(e.path() / kPrebuiltRecord, ec))
        for (auto& tc : prebuilt_toolchains((e.path() / kPrebuiltRecord).string(), backend)) prebuilt.push_back(std::move(tc));
      continue;
    }
    Env env{"", "", py};
    for (const auto& lib : fs::directory_iterator(e.path() / "lib", ec))
      for (const auto& sp : fs::directory_iterator(lib.path() / "site-packages", ec)) {
        const std::string n = sp.path().filename().string();
        const bool info = n.size() > 10 && n.substr(n.size() - 10) == ".dist-info";
        if (info && n.rfind("triton-", 0) == 0 && n.size() > 17) env.version = n.substr(7, n.size() - 17);
        if (info && n.rfind("triton_utlx-", 0) == 0 && n.size() > 22) env.utlx = n.substr(12, n.size() - 22);
      }
    if (!env.version.empty()) envs.push_back(env);
  }
  std::sort(envs.begin(), envs.end());
  const std::vector<std::string> targets =
      backend == "cuda" ? std::vector<std::string>{"sm_90a", "sm_80", "sm_100a"} : std::vector<std::string>{"gfx942", "gfx90a"};
  const std::string lld19 = "/usr/lib/llvm-19/bin/ld.lld";
  for (const auto& [version, utlx, py] : envs)
    for (const auto& t : targets) {
      Toolchain tc;
      std::string short_t = t;
      short_t.erase(std::remove(short_t.begin(), short_t.end(), '_'), short_t.end());
      // An environment with the TLX plugin is its own toolchain: triton-3.8.0-tlx-sm90a.
      tc.name = fmt::format("triton-{}{}-{}", version, utlx.empty() ? "" : "-tlx", short_t);
      tc.backend = backend;
      tc.kind = "triton";
      tc.compiler = py.string();
      tc.target = t;
      tc.origin = "preset";
      tc.version_text = "triton " + version;  // from the dist-info; identify() replaces it with the import's word
      tc.description = fmt::format("Triton {}{} ({}) ahead of time for {}", version,
                                   utlx.empty() ? "" : " + TLX (triton-utlx " + utlx + ")",
                                   py.parent_path().parent_path().string(), t);
      // Releases before 3.5 run an ld.lld executable for AMD code objects; Debian's default lld is too old
      // for the code object version they emit ("unknown abi version"), LLVM 19's is not.
      if (backend == "hip" && !version_at_least(version, "3.5") && file_exists(lld19)) tc.env["TRITON_HIP_LLD_PATH"] = lld19;
      out.push_back(std::move(tc));
    }
  std::sort(prebuilt.begin(), prebuilt.end(), [](const Toolchain& a, const Toolchain& b) { return a.name < b.name; });
  for (auto& tc : prebuilt) out.push_back(std::move(tc));
  return out;
}

}  // namespace kb::triton
