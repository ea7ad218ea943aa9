// Writing an imported compilation: the signature from its TTIR (argument types, divisibility, the
// pointers stored through), the `triton_kernel:` YAML of docs/triton.md and the kernel's module source.
#include <algorithm>
#include <map>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "backends/triton/trace.h"
#include "backends/triton/triton_kernels.h"
#include "core/error.h"
#include "core/fsutil.h"

namespace kb::triton {
namespace {

std::string scalar_type(std::string t) {
  static const std::map<std::string, std::string> m = {
      {"f16", "fp16"},          {"bf16", "bf16"},    {"f32", "fp32"},           {"f64", "fp64"},
      {"f8E4M3FN", "fp8e4nv"},  {"f8E5M2", "fp8e5"}, {"f8E4M3FNUZ", "fp8e4b8"}, {"f8E5M2FNUZ", "fp8e5b16"},
      {"ui8", "u8"},            {"ui32", "u32"},     {"ui64", "u64"}};
  auto it = m.find(t);
  return it == m.end() ? t : it->second;
}

// "!tt.ptr<f16>" or "!tt.ptr<f16, 1>" -> "*fp16"; "i32" -> "i32"; "f32" -> "fp32".
std::string triton_type(const std::string& mlir) {
  const std::string ptr = "!tt.ptr<";
  if (mlir.rfind(ptr, 0) == 0) {
    std::string inner = mlir.substr(ptr.size());
    inner = inner.substr(0, inner.find_first_of(",>"));
    return "*" + scalar_type(inner);
  }
  return scalar_type(mlir);
}

std::vector<std::string> split_top_level(const std::string& s) {
  std::vector<std::string> out;
  std::string cur;
  int depth = 0;
  bool quoted = false;
  for (char c : s) {
    if (c == '"') quoted = !quoted;
    if (!quoted && (c == '(' || c == '{' || c == '[' || c == '<')) ++depth;
    if (!quoted && (c == ')' || c == '}' || c == ']' || c == '>')) --depth;
    if (!quoted && depth == 0 && c == ',') {
      out.push_back(cur);
      cur.clear();
      continue;
    }
    cur += c;
  }
  if (cur.find_first_not_of(" \t\n") != std::string::npos) out.push_back(cur);
  return out;
}

bool is_ident(char c) { return isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '#'; }

// The SSA names (%x) in a text, in order.
std::vector<std::string> ssa_names(const std::string& s) {
  std::vector<std::string> out;
  for (size_t i = s.find('%'); i != std::string::npos; i = s.find('%', i + 1)) {
    size_t e = i + 1;
    while (e < s.size() && is_ident(s[e])) ++e;
    if (e > i + 1) out.push_back(s.substr(i, e - i));
  }
  return out;
}

std::string yaml_str(const std::string& s) {
  const bool plain = !s.empty() && s.find_first_of(":{}[],&*#?|<>=!%@`'\"\n ") == std::string::npos;
  return plain ? s : "\"" + s + "\"";
}

// Triton's dtype names (str(tl.float16) == "fp16") and their attribute names in triton.language.
std::string dtype_attribute(const std::string& triton_name) {
  static const std::map<std::string, std::string> m = {
      {"fp16", "float16"},     {"bf16", "bfloat16"},    {"fp32", "float32"},         {"fp64", "float64"},
      {"i1", "int1"},          {"i8", "int8"},          {"i16", "int16"},            {"i32", "int32"},
      {"i64", "int64"},        {"u8", "uint8"},         {"u16", "uint16"},           {"u32", "uint32"},
      {"u64", "uint64"},       {"fp8e4nv", "float8e4nv"}, {"fp8e5", "float8e5"},     {"fp8e4b15", "float8e4b15"},
      {"fp8e4b8", "float8e4b8"}, {"fp8e5b16", "float8e5b16"}};
  auto it = m.find(triton_name);
  return it == m.end() ? "" : it->second;
}

// A constant as tritonparse wrote it (JSON) -> its value with its kind. tritonparse writes a dtype as
// "triton.language.core.dtype('fp16')" and a non-finite float as "inf", "-inf" or "nan".
ParamValue constant_value(const TraceCompilation& c, const std::string& name, const std::string& text) {
  const nlohmann::json v = nlohmann::json::parse(text, nullptr, false);
  if (v.is_number_integer() && !v.is_number_unsigned()) return v.get<int64_t>();
  if (v.is_number_unsigned() && v.get<uint64_t>() <= uint64_t(INT64_MAX)) return int64_t(v.get<uint64_t>());
  if (v.is_number_float()) return v.get<double>();
  if (v.is_boolean()) return v.get<bool>();
  if (v.is_null()) return NoneValue{};
  if (v.is_string()) {
    const std::string s = v.get<std::string>();
    const std::string pre = "triton.language.core.dtype('";
    if (s.rfind(pre, 0) == 0 && s.size() > pre.size() + 2 && s.substr(s.size() - 2) == "')") {
      const std::string attr = dtype_attribute(s.substr(pre.size(), s.size() - pre.size() - 2));
      if (!attr.empty()) return DtypeValue{attr};
    } else if (s == "inf" || s == "-inf" || s == "nan") {
      return parse_param_value(s);
    } else {
      return s;
    }
  }
  throw InputError(fmt::format("line {}: {} constexpr {} = {}: not a value kbisect can carry exactly (an integer, a "
                               "float, a string, a bool, None or a Triton dtype)", c.line, c.kernel, name, text));
}

// A value as YAML that yaml_param_value reads back to the same value and kind: strings always quoted.
std::string yaml_value(const ParamValue& v) {
  if (auto s = std::get_if<std::string>(&v)) return nlohmann::json(*s).dump();
  return to_string(v);
}

struct SigEntry {
  std::string name, type;
  bool output = false, divisible = false, large = false;
};

// Every parameter of the function in order: constexprs from the constants, the others from the TTIR (or,
// without one, from the first launch's argument kinds).
std::vector<SigEntry> signature_of(const Trace& t, const TraceCompilation& c) {
  if (c.params.empty())
    throw InputError(fmt::format("{}:{}: the compilation of {} has no python_source with `def {}(...)`: nothing to "
                                 "write the kernel from", t.path, c.line, c.kernel, c.kernel));
  std::set<std::string> constant;
  for (const auto& [n, v] : c.constants) constant.insert(n);
  std::vector<TtirArg> ttir = c.ttir.empty() ? std::vector<TtirArg>{} : ttir_signature(c.ttir, c.kernel);
  const std::vector<std::string> stored = ttir_stored_pointers(c.ttir, ttir);
  size_t runtime = 0;
  for (const auto& p : c.params) runtime += constant.count(p) ? 0 : 1;
  if (!c.ttir.empty() && ttir.size() != runtime)
    throw InputError(fmt::format("{}:{}: the TTIR of {} has {} arguments, its source {} that are not constexprs", t.path,
                                 c.line, c.kernel, ttir.size(), runtime));
  std::vector<SigEntry> out;
  size_t k = 0;
  for (const auto& p : c.params) {
    SigEntry e{p, "constexpr"};
    if (!constant.count(p)) {
      if (!ttir.empty()) {
        e.type = ttir[k].type;
        e.divisible = ttir[k].divisible;
        // With AMD buffer ops on, a pointer without the 32-bit range was a tensor of 2 GiB or more.
        e.large = e.type[0] == '*' && !ttir[k].pointer_range32 &&
                  std::any_of(ttir.begin(), ttir.end(), [](const TtirArg& x) { return x.pointer_range32; });
        e.output = std::find(stored.begin(), stored.end(), ttir[k].name) != stored.end();
        ++k;
      } else if (!c.launches.empty()) {
        for (const auto& a : c.launches.front().args)
          if (a.name == p) e.type = a.kind == "tensor" ? "*" + a.dtype : a.kind == "float" ? "fp32" : a.kind == "bool" ? "i1" : "i32";
        e.divisible = e.type[0] == '*';
      }
      if (e.type.empty() || e.type == "constexpr")
        throw InputError(fmt::format("{}:{}: cannot type argument {} of {}: the event has no TTIR and no launch logs it",
                                     t.path, c.line, p, c.kernel));
    }
    out.push_back(e);
  }
  return out;
}

std::string dims(const std::vector<int64_t>& v) { return fmt::format("[{}]", fmt::join(v, ", ")); }

std::string shape_yaml(const Trace& t, const TraceCompilation& c, const TraceLaunch& l, const std::vector<SigEntry>& sig,
                       size_t grid_dims, std::set<std::string>& names) {
  std::string label;
  for (const auto& a : l.args)
    if (a.kind == "tensor" && label.empty()) label = fmt::format("{}", fmt::join(a.shape, "x"));
  if (label.empty()) label = "launch";
  for (size_t i = 2; !names.insert(label).second; ++i) label = fmt::format("{}-{}", label.substr(0, label.rfind('-')), i);
  std::string y = fmt::format("  - name: {}    # {} launch(es), first at line {}\n", yaml_str(label), l.count, l.line);
  static const char* gn[] = {"grid_x", "grid_y", "grid_z"};
  std::vector<std::string> vals;
  for (size_t d = 0; d < grid_dims; ++d) vals.push_back(fmt::format("{}: {}", gn[d], l.grid[d]));
  y += fmt::format("    values: {{{}}}\n    args:\n", fmt::join(vals, ", "));
  for (const auto& e : sig) {
    if (e.type == "constexpr") continue;
    const TraceArg* a = nullptr;
    for (const auto& x : l.args)
      if (x.name == e.name) a = &x;
    if (!a) throw InputError(fmt::format("{}:{}: the launch of {} has no argument {}", t.path, l.line, c.kernel, e.name));
    if (e.type[0] == '*') {
      if (a->kind != "tensor")
        throw InputError(fmt::format("{}:{}: argument {} of {} is a {}: kbisect's triton_kernel files take tensors and "
                                     "scalars", t.path, l.line, e.name, c.kernel, a->kind.empty() ? "?" : a->kind));
      y += fmt::format("      {}: {{shape: {}, dtype: {}, strides: {}{}}}\n", e.name, dims(a->shape), a->dtype,
                       dims(a->stride), e.output ? ", init: zeros" : "");
    } else {
      if (a->value.empty())
        throw InputError(fmt::format("{}:{}: scalar argument {} of {} has no value", t.path, l.line, e.name, c.kernel));
      y += fmt::format("      {}: {}\n", e.name, a->value);
    }
  }
  return y;
}

}  // namespace

std::vector<TtirArg> ttir_signature(const std::string& ttir, const std::string& kernel) {
  size_t at = ttir.find("@" + kernel + "(");
  if (at == std::string::npos) return {};
  at += kernel.size() + 2;
  int depth = 1;
  size_t end = at;
  bool quoted = false;
  for (; end < ttir.size() && depth > 0; ++end) {
    if (ttir[end] == '"') quoted = !quoted;
    if (!quoted && ttir[end] == '(') ++depth;
    if (!quoted && ttir[end] == ')') --depth;
  }
  std::vector<TtirArg> out;
  for (const auto& piece : split_top_level(ttir.substr(at, end - 1 - at))) {
    TtirArg a;
    const size_t pct = piece.find('%'), colon = piece.find(':', pct);
    if (pct == std::string::npos || colon == std::string::npos) continue;
    a.name = piece.substr(pct, colon - pct);
    size_t tb = piece.find_first_not_of(' ', colon + 1);
    size_t te = tb;
    for (int d = 0; te < piece.size() && (d > 0 || (piece[te] != ' ' && piece[te] != '{')); ++te)
      d += piece[te] == '<' ? 1 : piece[te] == '>' ? -1 : 0;
    a.type = triton_type(piece.substr(tb, te - tb));
    a.divisible = piece.find("tt.divisibility = 16") != std::string::npos;
    a.pointer_range32 = piece.find("tt.pointer_range = 32") != std::string::npos;
    out.push_back(a);
  }
  return out;
}

// Which pointer arguments reach the address operand of a store: a forward walk over the TTIR's SSA values
// (every op but a load passes on where its operands came from; scf.for iter_args pass theirs to the block
// arguments), then the first operand of each tt.store, atomic and descriptor store.
std::vector<std::string> ttir_stored_pointers(const std::string& ttir, const std::vector<TtirArg>& args) {
  std::map<std::string, std::set<std::string>> from;
  for (const auto& a : args)
    if (a.type[0] == '*') from[a.name] = {a.name};
  std::set<std::string> stored;
  std::istringstream in(ttir);
  for (std::string line; std::getline(in, line);) {
    const size_t eq = line.find(" = "), pct = line.find('%');
    const bool has_result = eq != std::string::npos && pct != std::string::npos && pct < eq &&
                            line.find_first_not_of(' ') == pct;
    const std::string rhs = has_result ? line.substr(eq + 3) : line;
    const size_t op_at = rhs.find_first_not_of(' ');
    if (op_at == std::string::npos) continue;  // a blank line (or nothing after " = "): no op
    const size_t op_end = rhs.find(' ', op_at);
    const std::string op = rhs.substr(op_at, op_end == std::string::npos ? std::string::npos : op_end - op_at);
    const std::vector<std::string> ops = ssa_names(rhs.substr(0, rhs.find(" loc(")));
    if (op == "tt.store" || op == "tt.atomic_rmw" || op == "tt.atomic_cas" || op == "tt.descriptor_store") {
      if (!ops.empty() && from.count(ops[0])) stored.insert(from[ops[0]].begin(), from[ops[0]].end());
    }
    if (op == "scf.for")  // iter_args(%argN = %value, ...)
      for (const auto& p : split_top_level(rhs.substr(rhs.find("iter_args(") == std::string::npos ? rhs.size() : rhs.find("iter_args(") + 10))) {
        const auto n = ssa_names(p);
        if (n.size() >= 2 && from.count(n[1])) from[n[0]].insert(from[n[1]].begin(), from[n[1]].end());
      }
    if (!has_result || op == "tt.load") continue;
    std::set<std::string> origin;
    for (const auto& o : ops)
      if (from.count(o)) origin.insert(from[o].begin(), from[o].end());
    if (origin.empty()) continue;
    for (const auto& r : ssa_names(line.substr(0, eq))) from[r.substr(0, r.find('#'))].insert(origin.begin(), origin.end());
  }
  std::vector<std::string> out;
  for (const auto& a : args)
    if (stored.count(a.name)) out.push_back(a.name);
  return out;
}

std::string kernel_module_source(const TraceCompilation& c) {
  if (c.full_file) return c.python_source;  // tritonparse captured the whole file, imports included
  std::istringstream in(c.python_source);
  std::vector<std::string> lines;
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  size_t def = 0, indent = 0;
  for (; def < lines.size(); ++def) {
    indent = lines[def].find_first_not_of(" \t");
    if (indent != std::string::npos && lines[def].compare(indent, 4 + c.kernel.size(), "def " + c.kernel) == 0) break;
  }
  std::string out = fmt::format(
      "# {} as tritonparse recorded it (the function only); kbisect import-trace added the imports and\n"
      "# @triton.jit. Helpers or globals the function uses are not in the trace: add them here.\n"
      "import triton\nimport triton.language as tl\n\n\n@triton.jit\n", c.kernel);
  for (size_t i = def; i < lines.size(); ++i)
    out += (lines[i].size() >= indent ? lines[i].substr(std::min(indent, lines[i].find_first_not_of(" \t"))) : lines[i]) + "\n";
  return out;
}

std::string imported_name(const Trace& t, const TraceCompilation& c) {
  size_t per_kernel = 0;
  for (const auto& x : t.compilations) per_kernel += x.kernel == c.kernel;
  std::string name = per_kernel > 1 ? fmt::format("{}_{}", c.kernel, c.index) : c.kernel;
  if (is_builtin_kernel_name(name)) name += "_user";  // a kernel kbisect ships has that name: one that loads
  return name;
}

ImportedKernel write_kernel_files(const Trace& t, const TraceCompilation& c, const std::string& out_dir) {
  const std::vector<SigEntry> sig = signature_of(t, c);
  ImportedKernel r;
  r.name = imported_name(t, c);
  r.yaml_path = out_dir + "/" + r.name + ".yaml";
  r.py_path = out_dir + "/" + r.name + ".py";
  r.shapes = c.launches.size();
  size_t grid_dims = 1;
  for (const auto& l : c.launches) grid_dims = std::max(grid_dims, size_t(l.grid[2] > 1 ? 3 : l.grid[1] > 1 ? 2 : 1));
  std::string y = fmt::format("# Imported by kbisect import-trace from {} line {}:\n# compilation {} of {} (hash {}, "
                              "{}, {} launch event(s)); one shape per distinct grid and arguments.\n",
                              t.path, c.line, c.index, c.kernel, c.hash.substr(0, 16), c.target, c.launch_events);
  y += fmt::format("triton_kernel:\n  name: {}\n  source: {}.py\n  function: {}\n  signature:\n", r.name, r.name, c.kernel);
  std::vector<std::string> cx, div, large;
  for (const auto& e : sig) {
    y += fmt::format("    - {{name: {}, type: {}{}}}\n", e.name, yaml_str(e.type), e.output ? ", output: true" : "");
    if (e.divisible) div.push_back(e.name);
    if (e.large) large.push_back(e.name);
  }
  for (const auto& [n, v] : c.constants) cx.push_back(fmt::format("{}: {}", n, yaml_value(constant_value(c, n, v))));
  if (!cx.empty()) y += fmt::format("  constexprs: {{{}}}\n", fmt::join(cx, ", "));
  y += fmt::format("  num_warps: {}\n  num_stages: {}\n", c.num_warps, c.num_stages);
  std::vector<std::string> opts;
  for (const auto& [k, v] : c.options) opts.push_back(fmt::format("{}: {}", k, yaml_value(constant_value(c, k, v))));
  if (!opts.empty()) y += fmt::format("  options: {{{}}}\n", fmt::join(opts, ", "));
  y += fmt::format("  divisible: [{}]\n", fmt::join(div, ", "));
  if (!large.empty()) y += fmt::format("  large: [{}]    # tensors of 2 GiB or more: no 32-bit pointer range\n", fmt::join(large, ", "));
  static const char* gn[] = {"grid_x", "grid_y", "grid_z"};
  std::vector<std::string> grid(gn, gn + grid_dims);
  y += fmt::format("  grid: [{}]{}\n", fmt::join(grid, ", "),
                   c.launches.empty() ? "    # no launch in the trace: a shape's values give grid_x" : "");
  if (c.launches.empty()) {
    y += "shapes: []    # compile-only: the trace has no launch of this compilation\n";
  } else {
    y += "shapes:\n";
    std::set<std::string> names;
    for (const auto& l : c.launches) y += shape_yaml(t, c, l, sig, grid_dims, names);
  }
  make_dirs(out_dir);
  write_file_atomic(r.py_path, kernel_module_source(c));
  write_file_atomic(r.yaml_path, y);
  return r;
}

}  // namespace kb::triton
