#include "backends/triton/user_kernel.h"

#include <deque>
#include <filesystem>
#include <mutex>
#include <set>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "backends/kernel_decl.h"
#include "backends/param_yaml.h"
#include "backends/triton/pysource.h"
#include "backends/triton/expr.h"
#include "core/error.h"
#include "core/fsutil.h"
#include "core/text.h"

namespace kb::triton {
namespace {

namespace fs = std::filesystem;

const std::set<std::string> kScalarTypes = {"i1", "i8", "i16", "i32", "i64", "u32", "u64", "fp16", "bf16", "fp32", "fp64"};

bool valid_name(const std::string& s) {
  if (s.empty() || !(isalpha((unsigned char)s[0]) || s[0] == '_')) return false;
  for (char c : s)
    if (!(isalnum((unsigned char)c) || c == '_')) return false;
  return true;
}

// The dtype kbisect files a kernel under: its first pointer's element type where kbisect has it.
DType file_dtype(const TritonSpec& s) {
  for (const auto& a : s.args) {
    const std::string t = tensor_element_type(a.type);
    if (t == "fp16") return DType::f16;
    if (t == "bf16") return DType::bf16;
    if (t == "fp32") return DType::f32;
  }
  return DType::f32;
}

void parse_signature(const YamlCtx& cx, const YAML::Node& sig, UserKernel& k) {
  if (!sig || !sig.IsSequence() || sig.size() == 0)
    cx.fail(sig ? sig : YAML::Node(), "'triton_kernel.signature' must be a non-empty list of {name, type}");
  std::set<std::string> seen;
  for (const auto& a : sig) {
    if (!a.IsMap()) cx.fail(a, "each signature entry must be a mapping {name, type[, output]}");
    check_yaml_keys(cx, a, "signature entry", {"name", "type", "output"});
    for (const char* key : {"name", "type"})
      if (!a[key]) cx.fail(a, fmt::format("signature entry has no '{}' (each is {{name, type[, output]}})", key));
    TritonArg arg;
    arg.name = yaml_scalar(cx, a["name"], "signature.name");
    arg.type = yaml_scalar(cx, a["type"], "signature.type");
    if (!valid_name(arg.name)) cx.fail(a["name"], fmt::format("signature.name '{}' is not a Python identifier", arg.name));
    if (!seen.insert(arg.name).second) cx.fail(a["name"], fmt::format("signature.name '{}' appears twice", arg.name));
    const bool pointer = arg.type.size() > 1 && arg.type[0] == '*' && kScalarTypes.count(arg.type.substr(1));
    const bool desc = !tensordesc_block(arg.type).empty();  // a host tensor descriptor: tensordesc<fp16[64, 64]>
    if (arg.type.rfind("tensordesc", 0) == 0 && !desc)
      cx.fail(a["type"], fmt::format("signature.type '{}' of '{}': a tensor descriptor is tensordesc<TYPE[B0, B1, ...]> "
                                     "with 1 to 5 block sizes, e.g. tensordesc<fp16[64, 64]>", arg.type, arg.name));
    if (arg.type != "constexpr" && !pointer && !desc && !kScalarTypes.count(arg.type))
      cx.fail(a["type"], fmt::format("signature.type '{}' of '{}' is not a Triton type (*fp16, *bf16, *fp32, *i32, i32, "
                                     "i64, fp32, tensordesc<fp16[64, 64]>, constexpr, ...)", arg.type, arg.name));
    if (a["output"] && a["output"].as<std::string>() == "true" && !pointer && !desc)
      cx.fail(a["output"], fmt::format("signature entry '{}': only a pointer or a tensor descriptor can be an output", arg.name));
    arg.value = arg.type == "constexpr" ? arg.name : "";
    arg.output = a["output"] && a["output"].as<std::string>() == "true";
    k.spec.args.push_back(arg);
  }
}

Shape parse_shape(const YamlCtx& cx, const YAML::Node& n, const UserKernel& k, size_t i, LaunchArgs& la) {
  if (!n.IsMap()) cx.fail(n, "each shape must be a mapping {name, values, args}");
  check_yaml_keys(cx, n, "shape", {"name", "values", "args"});
  Shape s;
  if (n["values"]) {
    if (!n["values"].IsMap()) cx.fail(n["values"], "'values' must be a mapping of names to integers");
    for (auto it = n["values"].begin(); it != n["values"].end(); ++it) {
      const std::string key = yaml_scalar(cx, it->first, "a key of values");
      const std::string v = yaml_scalar(cx, it->second, "values." + key);
      try {
        s.values[key] = std::stoll(v);
      } catch (const std::exception&) {
        cx.fail(it->second, fmt::format("values.{} = '{}' is not an integer", key, v));
      }
    }
  }
  const YAML::Node args = n["args"];
  if (args && !args.IsMap()) cx.fail(args, "'args' must be a mapping of argument names");
  for (const auto& a : k.spec.args) {
    if (a.type == "constexpr") continue;
    if (!args || !args[a.name]) cx.fail(args ? args : n, fmt::format("shape {}: argument '{}' has no value in 'args'", i, a.name));
    const YAML::Node v = args[a.name];
    if (!tensor_element_type(a.type).empty()) {
      if (!v.IsMap() || !v["shape"] || !v["shape"].IsSequence())
        cx.fail(v, fmt::format("args.{}: a tensor needs {{shape: [...], dtype: ...}}", a.name));
      check_yaml_keys(cx, v, "args." + a.name, {"shape", "dtype", "strides", "init", "padding"});
      la.tensors[a.name] = parse_tensor_arg(cx, v, a.name, a.type, a.output);
    } else if (!v.IsScalar()) {
      cx.fail(v, fmt::format("args.{}: a scalar argument needs a value", a.name));
    } else if (a.type[0] == 'i' || a.type[0] == 'u') {
      const std::string t = v.as<std::string>();
      try {
        s.values.emplace(a.name, std::stoll(t));
      } catch (const std::exception&) {
        cx.fail(v, fmt::format("args.{} = '{}' is not an integer", a.name, t));
      }
      la.ints[a.name] = s.values.at(a.name);
    } else if (a.type == "fp32" || a.type == "fp64") {
      la.reals[a.name] = yaml_number(cx, v, "args." + a.name);
    }
  }
  for (auto it = args ? args.begin() : YAML::const_iterator(); args && it != args.end(); ++it) {
    const std::string key = yaml_scalar(cx, it->first, "a key of args");
    bool known = false;
    for (const auto& a : k.spec.args) known |= a.name == key;
    if (!known) cx.fail(it->first, fmt::format("args.{}: no such argument in the signature", key));
  }
  s.label = n["name"] ? yaml_scalar(cx, n["name"], "shape.name") : fmt::format("shape{}", i);
  return s;
}

UserKernel parse(const std::string& path, const YAML::Node& root) {
  const std::string abs = fs::weakly_canonical(fs::absolute(path)).string();
  YamlCtx cx{path};
  if (!root.IsMap() || !root["triton_kernel"])
    throw InputError(fmt::format("{}: expected a mapping with 'triton_kernel' (docs/triton.md)", path));
  check_yaml_keys(cx, root, "kernel file", {"triton_kernel", "shapes"});
  const YAML::Node t = root["triton_kernel"];
  if (!t.IsMap()) cx.fail(t, "'triton_kernel' must be a mapping");
  check_yaml_keys(cx, t, "triton_kernel", {"name", "source", "function", "signature", "constexprs", "num_warps",
                                           "num_stages", "options", "divisible", "large", "grid", "space", "flops", "bytes",
                                           "description", "tolerance"});
  for (const char* f : {"name", "source", "function", "signature", "grid"})
    if (!t[f]) cx.fail(t, fmt::format("triton_kernel is missing field '{}'", f));
  UserKernel k;
  k.file = abs;
  k.name = yaml_scalar(cx, t["name"], "triton_kernel.name");
  if (!valid_name(k.name)) cx.fail(t["name"], fmt::format("triton_kernel.name '{}' must be letters, digits and _", k.name));
  const std::string src = yaml_scalar(cx, t["source"], "triton_kernel.source");
  const fs::path src_path = fs::path(src).is_absolute() ? fs::path(src) : fs::path(abs).parent_path() / src;
  if (!fs::exists(src_path)) cx.fail(t["source"], fmt::format("triton_kernel.source '{}' does not exist ({})", src, src_path.string()));
  k.spec.source = fs::weakly_canonical(src_path).string();
  k.spec.function = yaml_scalar(cx, t["function"], "triton_kernel.function");
  parse_signature(cx, t["signature"], k);
  if (!t["grid"].IsSequence() || t["grid"].size() < 1 || t["grid"].size() > 3)
    cx.fail(t["grid"], "'triton_kernel.grid' must be a list of 1 to 3 expressions");
  for (const auto& g : t["grid"]) k.spec.grid.push_back(yaml_scalar(cx, g, "grid"));
  for (const auto& g : k.spec.grid) {
    try {
      eval_int(g, {});
    } catch (const InputError& e) {
      if (std::string(e.what()).find("unknown name") == std::string::npos)
        cx.fail(t["grid"], fmt::format("triton_kernel.grid: {}", e.what()));
    }
  }
  std::set<std::string> divisible;
  if (t["divisible"]) {
    if (!t["divisible"].IsSequence()) cx.fail(t["divisible"], "'divisible' must be a list of argument names");
    for (const auto& d : t["divisible"]) divisible.insert(yaml_scalar(cx, d, "divisible"));
  }
  for (auto& a : k.spec.args) {
    a.divisible = t["divisible"] ? divisible.count(a.name) > 0 : a.type[0] == '*';
    divisible.erase(a.name);
  }
  if (!divisible.empty()) cx.fail(t["divisible"], fmt::format("divisible: '{}' is not an argument", *divisible.begin()));
  if (const YAML::Node large = t["large"]) {  // compile-only: tensors of 2 GiB or more (import-trace writes it)
    if (!large.IsSequence()) cx.fail(large, "'large' must be a list of pointer argument names");
    for (const auto& n : large) {
      const std::string name = yaml_scalar(cx, n, "large");
      TritonArg* a = nullptr;
      for (auto& x : k.spec.args)
        if (x.name == name) a = &x;
      if (!a || a->type[0] != '*') cx.fail(n, fmt::format("large: '{}' is not a pointer argument", name));
      a->large = true;
    }
  }
  if (t["tolerance"]) k.tolerance = parse_tolerance(cx, t["tolerance"]);
  for (const char* f : {"flops", "bytes"}) {
    if (!t[f]) continue;
    const std::string e = yaml_scalar(cx, t[f], f);
    try {
      eval_int(e, {});
    } catch (const InputError& err) {
      if (std::string(err.what()).find("unknown name") == std::string::npos)
        cx.fail(t[f], fmt::format("triton_kernel.{}: {}", f, err.what()));
    }
    (std::string(f) == "flops" ? k.flops : k.bytes) = e;
  }
  return k;
}

// A constexpr's value: the file's `constexprs:` entry, typed as written; else the literal default of the
// function's parameter, which the JIT would apply.
ParamValue constexpr_value(const YamlCtx& cx, const YAML::Node& t, const UserKernel& k, const std::vector<PyParam>& py,
                           const std::string& name) {
  const YAML::Node values = t["constexprs"];
  if (values && values[name]) return yaml_param_value(cx, values[name], "constexprs." + name);
  for (const auto& p : py) {
    if (p.name != name) continue;
    if (p.default_text.empty()) break;
    if (auto v = python_literal(p.default_text)) return *v;
    cx.fail(t["signature"], fmt::format("constexpr '{}' has no value in 'constexprs', and its default in {} ({} = {}) is "
                                        "not a literal kbisect can carry: give its value", name, k.spec.source, name,
                                        p.default_text));
  }
  cx.fail(values ? values : t["signature"], fmt::format("constexpr '{}' has no value in 'constexprs' (and {}() gives it "
                                                        "no default)", name, k.spec.function));
}

// Triton's compile options: `num_warps`, `num_stages` and `options: {name: value}` become the parameters
// opt.<name> (triton_kernels.h), never confused with a constexpr of any name.
void declare_options(const YamlCtx& cx, const YAML::Node& t, KernelDeclBuilder& b, std::set<std::string>& declared) {
  auto declare = [&](const std::string& opt, const YAML::Node& n, ParamValue dflt) {
    ParamValue v = n ? yaml_param_value(cx, n, opt) : std::move(dflt);
    if (!declared.insert(std::string(kOptionPrefix) + opt).second)
      cx.fail(n, fmt::format("option '{}' is given twice (as '{}:' and under 'options:')", opt, opt));
    b.param(std::string(kOptionPrefix) + opt, ParamKind::Any, v, "Triton compile option " + opt);
  };
  // Omitted, an option is None: not given to Triton, which takes the release's and target's own default (as
  // the JIT does for a launch that does not pass it; num_stages is 3 on NVIDIA and 2 on AMD).
  for (const char* f : {"num_warps", "num_stages"}) {
    const YAML::Node n = t[f];
    if (n && !std::holds_alternative<int64_t>(yaml_param_value(cx, n, f)))
      cx.fail(n, fmt::format("{} = '{}' is not an integer", f, n.Scalar()));
    declare(f, n, NoneValue{});
  }
  if (const YAML::Node o = t["options"]) {
    if (!o.IsMap()) cx.fail(o, "'options' must be a mapping of Triton compile options to values (num_ctas: 2, maxnreg: 128)");
    for (auto it = o.begin(); it != o.end(); ++it) {
      const std::string name = yaml_scalar(cx, it->first, "a key of options");
      if (!valid_name(name)) cx.fail(it->first, fmt::format("options.{}: not a Triton option name", name));
      declare(name, it->second, {});
    }
  }
}

// `space:` keys are constexprs or opt.<option>; NUM_WARPS / NUM_STAGES of old files are named as what they now are.
void declare_space(const YamlCtx& cx, const YAML::Node& sp, const UserKernel& k, const std::set<std::string>& options,
                   KernelDeclBuilder& b) {
  if (!sp.IsMap()) cx.fail(sp, "'space' must be a mapping of parameter names to value lists");
  for (auto it = sp.begin(); it != sp.end(); ++it) {
    const std::string name = yaml_scalar(cx, it->first, "a key of space");
    bool constexpr_ = false;
    for (const auto& a : k.spec.args) constexpr_ |= a.type == "constexpr" && a.name == name;
    if (!constexpr_ && !options.count(name)) {
      std::string hint = is_option_param(name) ? fmt::format(" (declare the option first: options: {{{}: ...}})", option_name(name))
                                               : "";
      if (name == "NUM_WARPS" || name == "NUM_STAGES")
        hint = fmt::format(": kbisect's compile options are named opt.num_warps and opt.num_stages ({} is not a constexpr "
                           "of {})", name, k.spec.function);
      cx.fail(it->first, fmt::format("space.{}: not a constexpr of the kernel nor a declared option{}", name, hint));
    }
    // A copy of the node: the iterator's pair is a temporary, and a range-for over its member would outlive it.
    const YAML::Node list = it->second;
    if (!list.IsSequence() || list.size() == 0) cx.fail(list, fmt::format("space.{} must be a non-empty list", name));
    std::vector<ParamValue> vals;
    for (const auto& v : list) vals.push_back(yaml_param_value(cx, v, "space." + name));
    b.tunable_values(name, vals);
  }
}

// The declaration: the constexprs and the compile options as parameters, with the file's values as defaults.
KernelDecl make_decl(const YAML::Node& t, const YamlCtx& cx, const UserKernel& k, const std::string& backend) {
  KernelDeclBuilder b(backend, k.name);
  b.source(k.spec.source, {kDriverSource, k.file});
  b.description(t["description"] ? t["description"].as<std::string>()
                                 : fmt::format("user Triton kernel {} ({})", k.spec.function, k.file));
  const YAML::Node cx_values = t["constexprs"];
  if (cx_values && !cx_values.IsMap()) cx.fail(cx_values, "'constexprs' must be a mapping of names to values");
  const std::vector<PyParam> py = python_signature(read_file(k.spec.source), k.spec.function);
  for (const auto& a : k.spec.args)
    if (a.type == "constexpr") b.param(a.name, ParamKind::Any, constexpr_value(cx, t, k, py, a.name), "constexpr of " + k.spec.function);
  for (auto it = cx_values ? cx_values.begin() : YAML::const_iterator(); cx_values && it != cx_values.end(); ++it) {
    const std::string name = yaml_scalar(cx, it->first, "a key of constexprs");
    bool known = false;
    for (const auto& a : k.spec.args) known |= a.type == "constexpr" && a.name == name;
    if (!known) cx.fail(it->first, fmt::format("constexprs.{}: not a constexpr of the signature", name));
  }
  std::set<std::string> options;
  declare_options(cx, t, b, options);
  b.dtypes({file_dtype(k.spec)});
  b.defaults_config("file");
  if (const YAML::Node sp = t["space"]) declare_space(cx, sp, k, options, b);
  KernelDecl d = b;
  d.language = "triton";
  return d;
}

struct Registry {
  std::mutex mu;
  std::deque<UserKernel> kernels;
  std::deque<KernelDecl> decls;
};
Registry& registry() {
  static Registry r;
  return r;
}

}  // namespace

UserKernel parse_user_kernel(const std::string& path) {
  const YAML::Node root = yaml_load(read_file(path), path);
  UserKernel k = parse(path, root);
  YamlCtx cx{path};
  if (const YAML::Node shapes = root["shapes"]) {
    if (!shapes.IsSequence()) cx.fail(shapes, "'shapes' must be a list");
    std::set<std::string> names;
    for (size_t i = 0; i < shapes.size(); ++i) {
      LaunchArgs la;
      Shape s = parse_shape(cx, shapes[i], k, i, la);
      if (!names.insert(s.label).second) cx.fail(shapes[i], fmt::format("shape name '{}' appears twice", s.label));
      k.launches[s.label] = std::move(la);
      k.shapes.push_back(std::move(s));
    }
  }
  for (const auto& backend : {"cuda", "hip"}) k.decls.push_back(make_decl(root["triton_kernel"], cx, k, backend));
  return k;
}

const UserKernel& load_user_kernel(const std::string& path) {
  UserKernel k = parse_user_kernel(path);
  if (is_builtin_kernel_name(k.name))
    throw InputError(fmt::format("{}: kernel name '{}' is taken by a built-in kernel", path, k.name));
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  for (const auto& have : r.kernels) {
    if (have.name != k.name) continue;
    if (have.file == k.file) return have;
    throw InputError(fmt::format("{}: kernel '{}' is already declared by {}", path, k.name, have.file));
  }
  for (auto& d : k.decls) r.decls.push_back(std::move(d));
  k.decls.clear();
  r.kernels.push_back(std::move(k));
  return r.kernels.back();
}

std::vector<const KernelDecl*> user_kernel_decls(const std::string& backend) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  std::vector<const KernelDecl*> out;
  for (const auto& d : r.decls)
    if (d.backend == backend) out.push_back(&d);
  return out;
}

double user_kernel_work(const UserKernel& k, const std::string& expr, const Shape& shape, const Params& params) {
  if (expr.empty()) return 0;
  Bindings names(shape.values.begin(), shape.values.end());
  for (const auto& [name, v] : params.values())  // the integer constexprs and options (opt.num_warps, ...)
    if (auto i = std::get_if<int64_t>(&v)) names[name] = *i;
  try {
    return double(eval_int(expr, names));
  } catch (const InputError&) {
    return 0;
  }
}

const UserKernel* find_user_kernel(const std::string& name) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  for (const auto& k : r.kernels)
    if (k.name == name) return &k;
  return nullptr;
}

}  // namespace kb::triton
